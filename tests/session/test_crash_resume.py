"""SIGKILL a process running a real ``Agent`` on a stored session, at random moments, and resume it.

``crash_agent.py`` (beside this file) is a zygote that forks one child per run: the child
opens the store, runs or resumes the session (a scripted ``FunctionModel`` making tool
calls, some of them ``idempotent=False``, checkpointed by the loop at every step), and is
SIGKILLed after a random delay. After every kill this test checks, in its own process:

* the store holds a consistent session (``harness.testing.store_workers.store_problems``),
  and the raw log of the last check is a prefix of the log now (append-only across kills);
* the session loads and passes ``check_invariants``, except for calls of the trailing
  response that the run had not answered yet, which the ledger-aware resume answers: each
  such call is unknown to the ledger, ``started``, or finished with its answer recorded;
* no finished call runs again: a call the ledger held as ``completed``, ``failed`` or
  ``cancelled`` (or ``unknown_after_crash`` for a non-idempotent tool) when a child
  started is never executed by it.

The next child resumes the same session (and may be killed again); a session that
reaches its final answer is checked whole and the campaign goes on with a new one. At
the end: a non-idempotent call never executed twice, and a completed call executed more
than once only when a kill had caught it running each extra time.

The quick test kills a few times on SQLite. The ``slow`` tests kill
``$HARNESS_CRASH_KILLS`` times (default 50) on SQLite and on PostgreSQL (the server of
``$HARNESS_TEST_POSTGRES_DSN``; skipped elsewhere when it is missing, a failure under
``CI=true``), in a schema of their own dropped afterwards. Run them with ``-m slow`` or
``HARNESS_SLOW=1``.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from harness.config.store import open_store
from harness.core.messages import ToolReturnPart
from harness.errors import SessionNotFoundError
from harness.history import check_invariants
from harness.session import LogEntry, Session, SessionStore
from harness.testing.store_workers import store_problems

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from crash_agent import calls_of_step, finished, side_file  # noqa: E402

KILLS_ENV = "HARNESS_CRASH_KILLS"
DEFAULT_KILLS = 50
"""Kills per store in the slow profile (two stores: 100 in all)."""
QUICK_KILLS = 4
STEPS = 60
"""Tool steps of one session (a second or so of work: a session is killed a few times)."""
MAX_DELAY = 0.45
"""The longest wait before a kill, for ``STEPS`` steps (scaled for shorter scripts)."""

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the crash zygote needs fork()")


def _slow_selected(request: pytest.FixtureRequest) -> bool:
    markexpr = str(request.config.getoption("markexpr", "") or "")
    return os.environ.get("HARNESS_SLOW") == "1" or ("slow" in markexpr and "not slow" not in markexpr)


def _kills() -> int:
    raw = os.environ.get(KILLS_ENV, "").strip()
    if not raw:
        return DEFAULT_KILLS
    try:
        kills = int(raw)
    except ValueError:
        raise ValueError(f"{KILLS_ENV} must be a whole number of kills, got {raw!r}") from None
    if kills < 1:
        raise ValueError(f"{KILLS_ENV} must be at least 1, got {kills}")
    return kills


class Zygote:
    """The forking parent of the killed children (see ``crash_agent.py``)."""

    def __init__(self, url: str, folder: Path, steps: int) -> None:
        self.errors = folder / "zygote.stderr"
        self._stderr = self.errors.open("w")
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")]),
        }
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "crash_agent.py"), url, str(folder), str(steps)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=env,
        )
        assert self._line() == "ready", self.errors.read_text()

    def _line(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line:
            raise AssertionError(f"the crash zygote stopped: {self.errors.read_text()[-4000:]}")
        return line

    def run(self, session_id: str, delay: float | None) -> str:
        """``killed`` or ``exited <code>``."""
        assert self.process.stdin is not None
        self.process.stdin.write(f"run {session_id} {'none' if delay is None else f'{delay:.4f}'}\n")
        self.process.stdin.flush()
        return self._line()

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=30)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._stderr.close()


@attrs.define
class SessionWatch:
    """What the checks learned about one session across its kills."""

    session_id: str
    side: Path
    steps: int
    log: list[LogEntry] = attrs.field(factory=list[LogEntry])
    protected: set[str] = attrs.field(factory=set[str])
    """Calls that must never run again (finished, or of unknown outcome and not idempotent)."""
    caught_running: Counter[str] = attrs.field(factory=Counter[str])
    """How often a kill found a call ``started``."""
    executed: int = 0
    """Side-file lines seen so far."""

    def executions(self) -> list[str]:
        return self.side.read_text().split() if self.side.exists() else []

    def calls(self) -> dict[str, str]:
        """Every call id of the script and its tool."""
        return {call_id: tool for step in range(self.steps) for call_id, tool in calls_of_step(step)}

    def writes(self) -> set[str]:
        """The calls of the non-idempotent tool."""
        return {call_id for call_id, tool in self.calls().items() if tool == "write"}


def _pending(session: Session) -> list[str]:
    last = session.messages[-1] if session.messages else None
    if last is None or last.kind != "response":
        return []
    return [call.tool_call_id for call in last.tool_calls]


def check_after_kill(store: SessionStore, watch: SessionWatch, kill: int) -> str:
    """Everything a killed run must leave; returns a one-line description of the state."""
    sid = watch.session_id
    try:
        session = Session.open(store, sid)
    except SessionNotFoundError:
        assert watch.log == [], f"kill {kill}: session {sid} vanished"
        assert watch.executions() == [], f"kill {kill}: tools ran before the session was first written"
        return "not created yet"
    problems = store_problems(store, sid, history=False)  # the history is checked below, pending calls aside
    assert problems == [], f"kill {kill}: {problems}"
    log = store.read_log(sid)
    assert log[: len(watch.log)] == watch.log, f"kill {kill}: the raw log changed under an earlier entry"
    watch.log = log
    pending = _pending(session)
    violations = check_invariants(session.messages)
    unexpected = [
        v
        for v in violations
        if not (v.kind == "dangling_call" and v.message_index == len(session.messages) - 1)
    ]
    assert unexpected == [], f"kill {kill}: invariants broken: {unexpected}"
    for call_id in pending:
        entry = session.ledger.get(call_id)
        assert entry is None or entry.status == "started" or entry.result is not None, (
            f"kill {kill}: pending call {call_id} is {entry.status} without the answer to reuse"
        )
    writes = watch.writes()
    for call_id, entry in session.ledger.items():
        if entry.status in ("completed", "failed", "cancelled") or (
            entry.status == "unknown_after_crash" and call_id in writes
        ):
            watch.protected.add(call_id)
        elif entry.status == "started":
            watch.caught_running[call_id] += 1
    return f"{len(session.messages)} messages, pending {pending}, revision {session.revision}"


def check_finished(store: SessionStore, watch: SessionWatch) -> None:
    """A session that reached its final answer: whole, sendable, every call answered once."""
    sid = watch.session_id
    session = Session.open(store, sid)
    assert finished(session.messages)
    assert store_problems(store, sid) == []
    assert check_invariants(session.messages) == []
    expected = set(watch.calls())
    assert set(session.ledger) == expected
    counts = Counter(watch.executions())
    writes = watch.writes()
    for call_id, entry in session.ledger.items():
        if call_id in writes:
            assert counts[call_id] <= 1, f"{sid}: non-idempotent {call_id} ran {counts[call_id]} times"
            assert entry.status in ("completed", "unknown_after_crash"), (call_id, entry)
        else:
            assert entry.status == "completed", (call_id, entry)
            caught = watch.caught_running[call_id]
            assert 1 <= counts[call_id] <= 1 + caught, (
                f"{sid}: {call_id} ran {counts[call_id]}x, caught {caught}x"
            )
        if entry.status == "completed" and call_id not in watch.caught_running:
            assert counts[call_id] == 1, f"{sid}: completed {call_id} ran {counts[call_id]} times"
    # The raw log holds every call and every answer exactly once: nothing lost, nothing
    # written twice by a resumed run.
    transcript = session.transcript()
    calls = Counter(c.tool_call_id for m in transcript for c in m.tool_calls)
    answers = Counter(p.tool_call_id for m in transcript for p in m.parts if isinstance(p, ToolReturnPart))
    assert calls == Counter(expected), f"{sid}: calls in the log {calls}"
    assert answers == Counter(expected), f"{sid}: answers in the log {answers}"


def campaign(url: str, folder: Path, kills: int, seed: int, steps: int = STEPS) -> dict[str, int]:
    """Kill ``kills`` times, resuming each time; every session run to its end. Returns counts."""
    rng = random.Random(seed)
    zygote = Zygote(url, folder, steps)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = open_store(url)
    stats = {"kills": 0, "sessions": 0, "finished_between_kills": 0}
    try:

        def watch_for(number: int) -> SessionWatch:
            sid = f"crash-{seed}-{number}"
            return SessionWatch(sid, Path(side_file(str(folder), sid)), steps)

        watch = watch_for(0)
        history: list[str] = []
        while stats["kills"] < kills:
            delay = rng.uniform(0.005, MAX_DELAY * steps / STEPS)
            outcome = zygote.run(watch.session_id, delay)
            executions = watch.executions()
            fresh = executions[watch.executed :]
            watch.executed = len(executions)
            again = sorted(set(fresh) & watch.protected)
            assert not again, f"after {history[-3:]}: finished calls ran again: {again}"
            if outcome == "killed":
                stats["kills"] += 1
                state = check_after_kill(store, watch, stats["kills"])
                history.append(f"kill {stats['kills']} after {delay:.3f}s: {state}")
            else:
                assert outcome == "exited 0", f"{outcome}: {zygote.errors.read_text()[-4000:]}"
                check_finished(store, watch)
                stats["sessions"] += 1
                stats["finished_between_kills"] += 1
                watch = watch_for(stats["sessions"])
        outcome = zygote.run(watch.session_id, None)
        assert outcome == "exited 0", f"{outcome}: {zygote.errors.read_text()[-4000:]}"
        fresh = watch.executions()[watch.executed :]
        assert not set(fresh) & watch.protected
        check_finished(store, watch)
        stats["sessions"] += 1
    finally:
        store.close()
        zygote.close()
    return stats


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'sessions.db'}"


@pytest.fixture
def postgres_url() -> Iterator[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from harness_postgres.testing import require_server, schema_url, temporary_schema

    dsn = require_server()
    with temporary_schema(dsn, "harness_crash") as schema:
        yield schema_url(dsn, schema)


def test_a_few_kills_on_sqlite_resume_to_finished_runs(sqlite_url: str, tmp_path: Path) -> None:
    stats = campaign(sqlite_url, tmp_path, QUICK_KILLS, seed=7, steps=12)
    assert stats["kills"] == QUICK_KILLS
    assert stats["sessions"] >= 1


@pytest.mark.slow
def test_many_kills_on_sqlite(sqlite_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if not _slow_selected(request):
        pytest.skip("a slow fault-injection suite: run it with -m slow (or HARNESS_SLOW=1)")
    kills = _kills()
    stats = campaign(sqlite_url, tmp_path, kills, seed=11)
    assert stats["kills"] == kills


@pytest.mark.slow
def test_many_kills_on_postgresql(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if not _slow_selected(request):
        pytest.skip("a slow fault-injection suite: run it with -m slow (or HARNESS_SLOW=1)")
    url = request.getfixturevalue("postgres_url")
    kills = _kills()
    stats = campaign(url, tmp_path, kills, seed=13)
    assert stats["kills"] == kills
