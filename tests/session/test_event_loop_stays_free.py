"""A store waiting on another process's write lock never stops the event loop (issue 24's goal, SQLite)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from harness import Agent, Session
from harness.models.test import TestModel
from harness.stores import SqliteStore
from harness.testing import longest_stall

HOLD = 2.0

_HOLDER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
db.execute("COMMIT")
"""


async def test_a_run_waiting_two_seconds_on_sqlites_write_lock_keeps_a_50_ms_heartbeat_within_100_ms(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sessions.db"
    store = SqliteStore(path)
    agent = Agent(TestModel())
    await agent.run("warm up", Session.create(store=store))  # a running agent's process: tokenizer loaded
    session = Session.create(store=store)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path), str(HOLD)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        started = time.perf_counter()
        result, stall = await longest_stall(agent.run("hello", session), interval=0.05)
        waited = time.perf_counter() - started
    finally:
        holder.wait(10)
        if holder.stdout is not None:
            holder.stdout.close()
        store.close()
    assert result.status == "completed"
    assert waited >= HOLD * 0.75  # the first checkpoint really waited for the other process
    assert stall <= 0.1, f"the event loop stalled for {stall:.3f} s"
    reopened = SqliteStore(path)
    assert Session.open(reopened, session.session_id).revision >= 2
    reopened.close()
