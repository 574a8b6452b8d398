"""Two processes run turns on one stored session at the same time: one writer wins each revision.

Each process (``turn_agent.py`` beside this file) runs real ``Agent`` turns on the same
session, reloading it before every turn, and reports every commit attempt: the revision
and log messages of each commit that returned, and each ``SessionConflictError``. Then:

* every revision from the session's creation to its last was won by exactly one commit,
  each based on the revision before it, and a refused commit was based on a revision
  another process had already moved past;
* the raw log is exactly the messages the winning commits report (same seqs, same bodies):
  nothing lost, nothing written twice, nothing from a refused commit;
* the stored session is consistent and loads.

On SQLite (one file) and on PostgreSQL (``$HARNESS_TEST_POSTGRES_DSN``; skipped elsewhere
when missing, a failure under ``CI=true``; a schema of its own, dropped afterwards).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.config.store import open_store
from harness.core.messages import CanonicalMessage, UserPromptPart
from harness.history import check_invariants
from harness.session import Session
from harness.testing.store_workers import store_problems

HERE = Path(__file__).resolve().parent
TURNS = 5


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'sessions.db'}"


@pytest.fixture
def postgres_url() -> Iterator[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from harness_postgres.testing import require_server, schema_url, temporary_schema

    dsn = require_server()
    with temporary_schema(dsn, "harness_race") as schema:
        yield schema_url(dsn, schema)


def _read(report: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in report.read_text().splitlines() if line.strip()]


def race(url: str, folder: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = open_store(url)
    try:
        session = Session.create(store=store, session_id="raced", working_directory="/race")
        session.messages = [CanonicalMessage.user("the shared task")]
        session.checkpoint()
        start = folder / "start"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")]),
        }
        reports = {name: folder / f"{name}.jsonl" for name in ("alpha", "beta")}
        workers = {
            name: subprocess.Popen(
                [
                    sys.executable,
                    str(HERE / "turn_agent.py"),
                    url,
                    "raced",
                    name,
                    str(TURNS),
                    str(report),
                    str(start),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            for name, report in reports.items()
        }
        try:
            for name, worker in workers.items():
                assert worker.stdout is not None
                line = worker.stdout.readline().strip()
                assert line == "ready", f"{name}: {line} {worker.stderr.read() if worker.stderr else ''}"
            start.touch()
            for name, worker in workers.items():
                _, errors = worker.communicate(timeout=120)
                assert worker.returncode == 0, f"{name} failed: {errors[-4000:]}"
        finally:
            for worker in workers.values():
                if worker.poll() is None:
                    worker.kill()
                    worker.communicate()

        records = {name: _read(path) for name, path in reports.items()}
        for name, rows in records.items():
            assert rows[-1]["turns"] == TURNS, f"{name} did not finish its turns: {rows[-1]}"
        commits = [r for rows in records.values() for r in rows if "revision" in r]
        conflicts = [r for rows in records.values() for r in rows if "conflict" in r]
        leased = [r for rows in records.values() for r in rows if "lease" in r]

        head = store.head("raced")
        won = sorted(c["revision"] for c in commits)
        assert won == list(range(2, head.revision + 1)), "every revision after the creation won exactly once"
        assert all(c["base"] == c["revision"] - 1 for c in commits)
        assert conflicts or leased, "the two processes never raced; the test proves nothing"
        for conflict in conflicts:
            assert conflict["actual"] is not None, conflict
            assert conflict["actual"] > conflict["conflict"], conflict

        created = store.read_log("raced")[:1]
        expected = [(e.seq, e.body) for e in created]
        expected += sorted((seq, body) for c in commits for seq, body in c["appended"])
        log = [(e.seq, e.body) for e in store.read_log("raced")]
        assert [seq for seq, _ in log] == list(range(head.log_length))
        assert log == expected, "the log is exactly what the winning commits wrote"
        assert len({body for _, body in log}) == len(log), "no message is logged twice"

        assert store_problems(store, "raced", history=False) == []
        final = Session.open(store, "raced")
        unexpected = [
            v for v in check_invariants(final.messages) if v.message_index != len(final.messages) - 1
        ]
        assert unexpected == []
        prompts = [p.content for m in final.transcript() for p in m.parts if isinstance(p, UserPromptPart)]
        for name in ("alpha", "beta"):
            for turn in range(TURNS):
                assert f"{name} turn {turn}" in prompts, f"{name}'s turn {turn} left no prompt in the log"
    finally:
        store.close()


def test_two_processes_on_one_sqlite_session(sqlite_url: str, tmp_path: Path) -> None:
    race(sqlite_url, tmp_path)


def test_two_processes_on_one_postgresql_session(postgres_url: str, tmp_path: Path) -> None:
    race(postgres_url, tmp_path)
