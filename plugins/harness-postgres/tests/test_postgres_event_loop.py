"""A run waiting on another process's row lock never stops the event loop (issue 24's goal, on PostgreSQL)."""

from __future__ import annotations

import subprocess
import sys
import time

from harness_postgres import PostgresStore

from harness import Agent, Session
from harness.models.test import TestModel
from harness.testing import longest_stall

HOLD = 2.0

_HOLDER = """
import sys, time
import psycopg
with psycopg.connect(sys.argv[1]) as conn:
    conn.execute(f"SELECT 1 FROM {sys.argv[2]}.sessions WHERE session_id = %s FOR UPDATE", (sys.argv[3],))
    print("locked", flush=True)
    time.sleep(float(sys.argv[4]))
"""


async def test_a_run_waiting_two_seconds_on_a_row_lock_keeps_a_50_ms_heartbeat_within_100_ms(
    pg_dsn: str, pg_schema: str
) -> None:
    store = PostgresStore(pg_dsn, schema=pg_schema)
    agent = Agent(TestModel())
    await agent.run("warm up", Session.create(store=store))  # a running agent's process: tokenizer loaded
    session = Session.create(store=store)
    await session.acheckpoint()  # the session exists: the next checkpoint locks its row
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, pg_dsn, pg_schema, session.session_id, str(HOLD)],
        stdout=subprocess.PIPE,
        text=True,
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
