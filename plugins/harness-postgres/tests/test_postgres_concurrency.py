"""Revision checks across connections and processes: exactly one writer wins each revision."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from harness_postgres import PostgresStore
from harness_postgres.testing import Admin

from harness import CanonicalMessage, Session
from harness.errors import SessionConflictError, SessionStoreError
from harness.session.records import StoredSession

WORKER = Path(__file__).with_name("postgres_race_worker.py")


def _prompts(messages: list[CanonicalMessage]) -> list[str]:
    return [str(getattr(m.parts[0], "content", "")) for m in messages]


def _state(store: PostgresStore, session_id: str) -> tuple[StoredSession, list[Any]]:
    return store.load(session_id), store.read_log(session_id)


def _together(*calls: Callable[[], object]) -> list[object]:
    """Run the calls in threads released at the same moment; each result or the exception raised."""
    barrier = threading.Barrier(len(calls))
    results: list[object] = [None] * len(calls)

    def run(index: int, call: Callable[[], object]) -> None:
        barrier.wait()
        try:
            results[index] = call()
        except Exception as exc:
            results[index] = exc

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def test_a_stale_second_connection_conflicts_and_writes_nothing(pg_dsn: str, pg_schema: str) -> None:
    first = PostgresStore(pg_dsn, schema=pg_schema)
    second = PostgresStore(pg_dsn, schema=pg_schema)
    try:
        session = Session.create(store=first, messages=[CanonicalMessage.user("one")])
        session.checkpoint()
        stale = Session.open(second, session.session_id)
        session.messages = [*session.messages, CanonicalMessage.user("two")]
        assert session.checkpoint() == 2
        before = _state(first, session.session_id)
        stale.messages = [*stale.messages, CanonicalMessage.user("lost")]
        stale.thoughts.append("lost too")
        with pytest.raises(SessionConflictError) as caught:
            stale.checkpoint()
        assert (caught.value.expected, caught.value.actual) == (1, 2)
        assert caught.value.store == second.url
        assert _state(first, session.session_id) == before
    finally:
        first.close()
        second.close()


def test_a_writer_waits_for_the_row_lock_and_then_sees_the_newer_revision(
    pg_store: PostgresStore, pg_admin: Admin, pg_schema: str
) -> None:
    session = Session.create(store=pg_store, messages=[CanonicalMessage.user("one")])
    session.checkpoint()
    session.messages = [*session.messages, CanonicalMessage.user("two")]
    pg_admin.execute("BEGIN")
    pg_admin.execute(
        f"UPDATE {pg_schema}.sessions SET revision = revision + 1 WHERE session_id = %s",
        (session.session_id,),
    )
    outcome: list[BaseException | int] = []
    writer = threading.Thread(target=lambda: outcome.append(_attempt(session.checkpoint)))
    writer.start()
    time.sleep(0.3)
    assert writer.is_alive(), "the write did not wait for the other transaction's row lock"
    pg_admin.execute("COMMIT")
    writer.join(timeout=30)
    assert len(outcome) == 1
    conflict = outcome[0]
    assert isinstance(conflict, SessionConflictError)
    assert (conflict.expected, conflict.actual) == (1, 2)
    assert [e.seq for e in pg_store.read_log(session.session_id)] == [0]


def _attempt(call: Callable[[], int]) -> BaseException | int:
    try:
        return call()
    except BaseException as exc:
        return exc


def test_a_read_waits_for_a_commit_in_flight_and_sees_it(
    pg_store: PostgresStore, pg_admin: Admin, pg_schema: str
) -> None:
    """What a process killed after sending COMMIT leaves: its backend still commits; reads must see that."""
    session = Session.create(store=pg_store, messages=[CanonicalMessage.user("one")])
    session.checkpoint()
    sid = session.session_id
    pg_admin.execute("BEGIN")
    pg_admin.execute(pg_store._sql.lock_session.decode(), (sid,))  # as every writer does first
    pg_admin.execute(
        f"UPDATE {pg_schema}.sessions SET revision = 2, view_length = 0 WHERE session_id = %s", (sid,)
    )
    pg_admin.execute(f"DELETE FROM {pg_schema}.view WHERE session_id = %s", (sid,))
    seen: list[tuple[int, int]] = []

    def read() -> None:
        head = pg_store.head(sid)
        stored = pg_store.load(sid)
        seen.append((head.revision, len(stored.view)))

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(0.3)
    assert reader.is_alive(), "the read did not wait for the commit in flight"
    pg_admin.execute("COMMIT")
    reader.join(timeout=30)
    assert seen == [(2, 0)]


def test_a_lock_held_too_long_times_out_with_a_typed_error(
    pg_dsn: str, pg_schema: str, pg_admin: Admin
) -> None:
    store = PostgresStore(pg_dsn, schema=pg_schema, lock_timeout=0.2)
    try:
        session = Session.create(store=store, messages=[CanonicalMessage.user("one")])
        session.checkpoint()
        pg_admin.execute("BEGIN")
        pg_admin.execute(
            f"SELECT 1 FROM {pg_schema}.sessions WHERE session_id = %s FOR UPDATE", (session.session_id,)
        )
        session.messages = [*session.messages, CanonicalMessage.user("two")]
        with pytest.raises(SessionStoreError, match="waiting for another writer") as caught:
            session.checkpoint()
        assert caught.value.session_id == session.session_id
        pg_admin.execute("ROLLBACK")
        assert store.head(session.session_id).revision == 1
        assert session.checkpoint() == 2  # nothing was half-written: the same checkpoint goes through now
    finally:
        store.close()


def test_threads_on_two_connections_exactly_one_wins_each_revision(pg_dsn: str, pg_schema: str) -> None:
    stores = [PostgresStore(pg_dsn, schema=pg_schema) for _ in range(2)]
    try:
        sid = uuid.uuid4().hex
        creators = [
            Session.create(store=s, session_id=sid, messages=[CanonicalMessage.user(f"created by {i}")])
            for i, s in enumerate(stores)
        ]
        results = _together(*(c.checkpoint for c in creators))
        assert sorted(type(r).__name__ for r in results) == ["SessionConflictError", "int"]
        winner = next(i for i, r in enumerate(results) if r == 1)
        assert _prompts(Session.open(stores[0], sid).messages) == [f"created by {winner}"]
        expected = [f"created by {winner}"]
        for round_number in range(12):
            racers = [Session.open(s, sid) for s in stores]
            assert racers[0].revision == racers[1].revision == round_number + 1
            for i, racer in enumerate(racers):
                racer.messages = [*racer.messages, CanonicalMessage.user(f"round {round_number} by {i}")]
            results = _together(*(r.checkpoint for r in racers))
            wins = [i for i, r in enumerate(results) if r == round_number + 2]
            losses = [i for i, r in enumerate(results) if isinstance(r, SessionConflictError)]
            assert (len(wins), len(losses)) == (1, 1), results
            expected.append(f"round {round_number} by {wins[0]}")
        reopened = Session.open(stores[1], sid)
        assert _prompts(reopened.messages) == expected
        assert _prompts(reopened.transcript()) == expected  # nothing lost, nothing duplicated
        assert reopened.revision == 13
    finally:
        for store in stores:
            store.close()


class _Racer:
    """One worker process, spoken to a line at a time."""

    def __init__(self, url: str, session_id: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), url, session_id],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def answer(self) -> list[str]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            assert self.process.stderr is not None
            raise AssertionError(f"the worker stopped: {self.process.stderr.read()[-2000:]}")
        return line.split()

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                self.send("quit")
                self.process.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


def test_two_processes_racing_exactly_one_wins_each_revision(
    pg_url: str, pg_dsn: str, pg_schema: str
) -> None:
    sid = uuid.uuid4().hex
    racers = [_Racer(pg_url, sid) for _ in range(2)]
    try:
        expected: list[str] = []
        for round_number in range(10):
            for index, racer in enumerate(racers):
                racer.send(f"create created-by-{index}" if round_number == 0 else "load")
            readiness = [racer.answer() for racer in racers]
            assert readiness == [["ready", str(round_number)]] * 2  # both hold the same revision
            for index, racer in enumerate(racers):
                racer.send(f"commit round-{round_number}-by-{index}")
            answers = [racer.answer() for racer in racers]
            winners = [i for i, a in enumerate(answers) if a == ["won", str(round_number + 1)]]
            losers = [i for i, a in enumerate(answers) if a[0] == "conflict"]
            assert (len(winners), len(losers)) == (1, 1), answers
            assert answers[losers[0]][1:] == [str(round_number), str(round_number + 1)]
            expected.append(
                f"created-by-{winners[0]}" if round_number == 0 else f"round-{round_number}-by-{winners[0]}"
            )
    finally:
        for racer in racers:
            racer.stop()
    store = PostgresStore(pg_dsn, schema=pg_schema)
    try:
        session = Session.open(store, sid)
        assert session.revision == 10
        assert _prompts(session.transcript()) == expected
        assert [e.seq for e in store.read_log(sid)] == list(range(10))
    finally:
        store.close()


def test_load_sees_one_state_while_another_connection_writes(pg_dsn: str, pg_schema: str) -> None:
    writer_store = PostgresStore(pg_dsn, schema=pg_schema)
    reader = PostgresStore(pg_dsn, schema=pg_schema)
    try:
        session = Session.create(store=writer_store, messages=[CanonicalMessage.user("start")], thoughts=[])
        session.checkpoint()
        stop = threading.Event()

        def write() -> None:
            step = 0
            while not stop.is_set() and step < 150:
                session.messages = [*session.messages, CanonicalMessage.user(f"step {step}")]
                session.thoughts.append(f"thought {step}")
                session.checkpoint()
                step += 1

        thread = threading.Thread(target=write)
        thread.start()
        try:
            loads = 0
            while thread.is_alive() or loads < 50:
                loads += 1
                stored = reader.load(session.session_id)
                assert stored.head.view_length == len(stored.view)
                assert len(stored.thoughts) == stored.head.revision - 1
        finally:
            stop.set()
            thread.join(timeout=60)
    finally:
        writer_store.close()
        reader.close()
