"""Fixtures of the harness-dbos tests: SQLite and PostgreSQL system databases, stores, worker processes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harness_dbos.testing import WorkerProcess, temporary_database
from harness_postgres.testing import require_server, schema_url, temporary_schema


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """The PostgreSQL test server; fails under CI=true and skips elsewhere when none answers."""
    return require_server()


@pytest.fixture
def pg_system_db(pg_dsn: str) -> Iterator[str]:
    """A fresh PostgreSQL database for this test's DBOS system tables, dropped afterwards."""
    with temporary_database(pg_dsn) as url:
        yield url


@pytest.fixture
def pg_store_url(pg_dsn: str) -> Iterator[str]:
    """A session store in a schema of this test's own on the test server, dropped afterwards."""
    with temporary_schema(pg_dsn, prefix="harness_dbos_store") as schema:
        yield schema_url(pg_dsn, schema)


@pytest.fixture
def record_dir(tmp_path: Path) -> Path:
    """Where the scenario's model and tools record."""
    folder = tmp_path / "records"
    folder.mkdir()
    return folder


@pytest.fixture
def sqlite_system_db(tmp_path: Path) -> str:
    """An SQLite file for the DBOS system tables."""
    return f"sqlite:///{tmp_path / 'dbos.sqlite'}"


@pytest.fixture
def sqlite_store_url(tmp_path: Path) -> str:
    """An SQLite session store."""
    return f"sqlite:///{tmp_path / 'sessions.db'}"


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    """Start worker processes (``spawn(system_db, env=..., executor_id=...)``); all stopped afterwards."""
    started: list[WorkerProcess] = []

    def start(system_db: str, **kwargs: Any) -> WorkerProcess:
        name = kwargs.get("executor_id", "local")
        worker = WorkerProcess(system_db, log=tmp_path / f"worker-{name}-{len(started)}.log", **kwargs)
        started.append(worker)
        return worker.wait_ready()

    yield start
    for worker in started:
        worker.stop(timeout=10)
