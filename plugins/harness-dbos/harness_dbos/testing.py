"""Helpers for tests and benchmarks of harness-dbos: worker processes, PostgreSQL databases, the journal.

* :class:`WorkerProcess`: ``python -m harness_dbos worker ...`` as a child process (with the
  durable scenario in its environment), waited for until it is ready, and SIGKILLed or
  stopped;
* :func:`temporary_database`: a fresh PostgreSQL database (for a DBOS system database),
  dropped afterwards; the server comes from
  :func:`harness_postgres.testing.require_server` (``CI=true`` fails without one, elsewhere
  the test skips);
* :func:`journal_sizes`: bytes of DBOS's system tables, ``operation_outputs`` first.
"""

from __future__ import annotations

__all__ = [
    "JournalSizes",
    "WorkerProcess",
    "count_workflows",
    "database_url",
    "journal_sizes",
    "temporary_database",
]

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Generator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import attrs
import sqlalchemy as sa

from harness_dbos.config import system_database_url


def database_url(dsn: str, name: str) -> str:
    """``dsn`` (a ``postgresql://`` URL) naming the database ``name`` instead of its own."""
    url = sa.make_url(system_database_url(dsn))
    return url.set(database=name).render_as_string(hide_password=False)


def _admin_engine(dsn: str) -> sa.Engine:
    url = sa.make_url(system_database_url(dsn)).set(drivername="postgresql+psycopg")
    return sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)


@contextmanager
def temporary_database(dsn: str, prefix: str = "harness_dbos_test") -> Generator[str, None, None]:
    """A fresh database on ``dsn``'s server (its URL), dropped (with its connections) on exit."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    engine = _admin_engine(dsn)
    try:
        with engine.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        try:
            yield database_url(dsn, name)
        finally:
            with engine.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        engine.dispose()


@attrs.frozen
class JournalSizes:
    """Bytes DBOS stored for the runs.

    Attributes:
        operation_outputs: Bytes of the step outputs (``output`` and ``error`` columns).
        steps: Rows of ``operation_outputs``.
        inputs: Bytes of the workflow inputs.
        results: Bytes of the workflow results.
        tables: Bytes of every text column of every DBOS system table.
    """

    operation_outputs: int
    steps: int
    inputs: int
    results: int
    tables: int


def _text_bytes(conn: sa.Connection, table: sa.Table) -> int:
    columns = [c for c in table.columns if isinstance(c.type, sa.Text | sa.String)]
    if not columns:
        return 0
    total = 0
    for column in columns:
        query = sa.select(sa.func.coalesce(sa.func.sum(sa.func.length(column)), 0))
        total += int(conn.execute(query).scalar_one())
    return total


def journal_sizes(system_database: str, *, schema: str = "dbos") -> JournalSizes:
    """Measure what DBOS stored in ``system_database`` (characters of its text columns).

    The harness steps store ASCII-escaped-free UTF-8 JSON; for ASCII content characters
    are bytes.
    """
    url = system_database_url(system_database)
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    sqlite = url.startswith("sqlite")
    try:
        metadata = sa.MetaData(schema=None if sqlite else schema)
        metadata.reflect(engine)
        tables = {t.name: t for t in metadata.tables.values()}
        with engine.connect() as conn:
            outputs = tables["operation_outputs"]
            step_bytes = int(
                conn.execute(
                    sa.select(
                        sa.func.coalesce(
                            sa.func.sum(
                                sa.func.coalesce(sa.func.length(outputs.c.output), 0)
                                + sa.func.coalesce(sa.func.length(outputs.c.error), 0)
                            ),
                            0,
                        )
                    )
                ).scalar_one()
            )
            steps = int(conn.execute(sa.select(sa.func.count()).select_from(outputs)).scalar_one())
            inputs = _text_bytes(conn, tables["workflow_input"]) if "workflow_input" in tables else 0
            results = _text_bytes(conn, tables["workflow_output"]) if "workflow_output" in tables else 0
            whole = sum(_text_bytes(conn, t) for t in tables.values())
    finally:
        engine.dispose()
    return JournalSizes(step_bytes, steps, inputs, results, whole)


class WorkerProcess:
    """A ``python -m harness_dbos worker`` child process.

    Args:
        system_db: The system database URL.
        env: Extra environment (the scenario's :meth:`~harness.testing.durable.Scenario.env`).
        executor_id: The worker's executor id.
        queue: The queue it dequeues from.
        concurrency: Runs it executes at once.
        adopt: Dead executor ids whose pending runs it resumes too.
        log: Where its output goes (default: a file next to nothing: discarded to a pipe reader).
    """

    def __init__(
        self,
        system_db: str,
        *,
        env: Mapping[str, str] | None = None,
        executor_id: str = "local",
        queue: str | None = None,
        concurrency: int | None = None,
        adopt: Sequence[str] = (),
        log: Path | None = None,
    ) -> None:
        command = [
            sys.executable,
            "-m",
            "harness_dbos",
            "worker",
            "--system-db",
            system_db,
            "--executor-id",
            executor_id,
            "--polling-interval",
            "0.1",
        ]
        if queue is not None:
            command += ["--queue", queue]
        if concurrency is not None:
            command += ["--concurrency", str(concurrency)]
        for dead in adopt:
            command += ["--adopt", dead]
        environment = {**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})}
        self.executor_id = executor_id
        self.lines: list[str] = []
        self._ready = threading.Event()
        self._log: IO[str] | None = log.open("a") if log is not None else None
        self.process = subprocess.Popen(
            command,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            if self._log is not None:
                self._log.write(line)
                self._log.flush()
            if line.startswith("harness-dbos worker") and "ready" in line:
                self._ready.set()

    @property
    def pid(self) -> int:
        """The process id."""
        return self.process.pid

    def wait_ready(self, timeout: float = 60.0) -> WorkerProcess:
        """Wait until the worker listens (returns itself).

        Raises:
            RuntimeError: It exited first, or did not get ready in ``timeout`` (with its output).
        """
        deadline = time.monotonic() + timeout
        while not self._ready.wait(0.05):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self._reader.join(timeout=2)
                raise RuntimeError(
                    f"worker {self.executor_id} did not get ready (exit code {self.process.poll()}):\n"
                    + "".join(self.lines[-40:])
                )
        return self

    def kill(self) -> None:
        """SIGKILL the worker and reap it."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        self._close()

    def _close(self) -> None:
        self._reader.join(timeout=5)
        if self.process.stdout is not None and not self._reader.is_alive():
            self.process.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM the worker, wait for it (SIGKILL after ``timeout``)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close()

    def output(self) -> str:
        """What the worker printed so far."""
        return "".join(self.lines)


def count_workflows(system_database: str, status: str, *, schema: str = "dbos") -> int:
    """How many workflows of ``system_database`` have ``status`` (``"SUCCESS"``, ``"PENDING"``...)."""
    url = system_database_url(system_database)
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    try:
        table = sa.Table(
            "workflow_status",
            sa.MetaData(schema=None if url.startswith("sqlite") else schema),
            sa.Column("status", sa.Text),
        )
        with engine.connect() as conn:
            query = sa.select(sa.func.count()).select_from(table).where(table.c.status == status)
            return int(conn.execute(query).scalar_one())
    finally:
        engine.dispose()
