"""Does a store waiting on another writer stop the event loop? The longest heartbeat gap, measured.

Another process holds the store's write lock (SQLite's ``BEGIN IMMEDIATE``; a PostgreSQL row
lock on the session's head, when the server of ``HARNESS_TEST_POSTGRES_DSN`` answers) for
``--hold`` seconds while an agent's run checkpoints its session. A heartbeat every 50 ms runs
beside it; the figure is its longest gap:

* ``awaited``: the run as it is (``Session.acheckpoint()``: the commit on the store's thread);
* ``in the loop``: the same checkpoint made synchronously from a coroutine
  (``Session.checkpoint()``), what every run did before the async seam.

``python benchmarks/event_loop.py`` prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from harness import Agent, CanonicalMessage, Session
from harness.session import SessionStore
from harness.stores import SqliteStore
from harness.testing import longest_stall

_SQLITE_HOLDER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
db.execute("COMMIT")
"""

_POSTGRES_HOLDER = """
import sys, time
import psycopg
with psycopg.connect(sys.argv[1]) as conn:
    conn.execute(f"SELECT 1 FROM {sys.argv[2]}.sessions WHERE session_id = %s FOR UPDATE", (sys.argv[3],))
    print("locked", flush=True)
    time.sleep(float(sys.argv[4]))
"""


def _hold(args: list[str]) -> subprocess.Popen[str]:
    holder = subprocess.Popen([sys.executable, "-c", *args], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "locked"
    return holder


async def _measure(
    store: SessionStore, hold: Callable[[Session], subprocess.Popen[str]], seconds: float
) -> tuple[float, float]:
    """``(awaited gap, in-the-loop gap)`` in seconds."""
    from harness.models.test import TestModel

    agent = Agent(TestModel())
    await agent.run("warm up", Session.create(store=store))  # tokenizer loaded: a running agent's process
    session = Session.create(store=store)
    await session.acheckpoint()
    holder = hold(session)
    try:
        _, awaited = await longest_stall(agent.run("hello", session), interval=0.05)
    finally:
        holder.wait(seconds + 10)
    session.messages.append(CanonicalMessage.user("again"))
    holder = hold(session)

    async def blocking() -> None:
        session.checkpoint()  # synchronous store I/O inside a coroutine

    work: Awaitable[None] = blocking()
    try:
        _, in_loop = await longest_stall(work, interval=0.05)
    finally:
        holder.wait(seconds + 10)
    return awaited, in_loop


async def main_async(seconds: float) -> list[tuple[str, float, float]]:
    rows: list[tuple[str, float, float]] = []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "sessions.db"
        store = SqliteStore(path)
        try:
            awaited, in_loop = await _measure(
                store, lambda s: _hold([_SQLITE_HOLDER, str(path), str(seconds)]), seconds
            )
            rows.append(("SQLite", awaited, in_loop))
        finally:
            store.close()
    try:
        from harness_postgres import PostgresStore
        from harness_postgres.testing import temporary_schema, test_dsn
    except ImportError:
        return rows
    dsn = test_dsn()
    try:
        with temporary_schema(dsn) as schema:
            pg = PostgresStore(dsn, schema=schema)
            try:
                awaited, in_loop = await _measure(
                    pg,
                    lambda s: _hold([_POSTGRES_HOLDER, dsn, schema, s.session_id, str(seconds)]),
                    seconds,
                )
                rows.append(("PostgreSQL", awaited, in_loop))
            finally:
                pg.close()
    except Exception as exc:  # no server: SQLite only
        print(f"PostgreSQL skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hold", type=float, default=2.0, help="seconds the other process holds the lock")
    args = parser.parse_args(argv)
    os.environ.setdefault("HARNESS_LOAD_PLUGINS", "")
    started = time.perf_counter()
    rows = asyncio.run(main_async(args.hold))
    print(
        f"Longest gap of a 50 ms heartbeat while another process holds the store's lock for {args.hold:g} s\n"
    )
    print("| store | awaited checkpoint (now) | checkpoint in the loop (before) | ratio |")
    print("|---|---:|---:|---:|")
    for name, awaited, in_loop in rows:
        print(f"| {name} | {awaited * 1000:.0f} ms | {in_loop * 1000:.0f} ms | {in_loop / awaited:.0f}x |")
    print(f"\n({time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
