"""A tool's side effect is recorded as it happened: aborts, timeouts and kills never hide one.

Every test here uses real components: a real SQLite store (the ledger), real threads of the
agent's pool, real subprocesses killed with SIGKILL. The property: after any stop, no call
whose effect landed is answered "aborted" in the history or ledgered ``cancelled``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import Agent, Session, open_store
from harness.core.messages import (
    CanonicalMessage,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    harness_mark,
)
from harness.durable.resume import OUTCOME_UNKNOWN_CONTENT
from harness.errors import RequestTimeout, SessionConflictError, UserAbort
from harness.history import check_invariants
from harness.hooks import hookimpl
from harness.models.function import FunctionInfo, FunctionModel
from harness.run import ABORTED_TOOL_CONTENT, INTERRUPTED_UNKNOWN_CONTENT, ToolThreads
from harness.session import SessionStore
from harness.tokens import TokenCounter
from harness.tools import RunContext, ToolEvent
from harness.tools.tool import Tool

TokenCounter().load()  # a cold first run reads the tokenizer on a thread: time the runs of a warm one


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    opened = open_store(f"sqlite:///{tmp_path}/sessions.db")
    yield opened
    opened.close()


def calls_then(*calls: ToolCallPart, answer: str = "final") -> FunctionModel:
    """A model that sends ``calls`` in one response, then answers ``answer``."""
    sent: list[int] = []

    def respond(messages: Sequence[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        del messages, info
        sent.append(1)
        return (
            CanonicalMessage.response(*calls)
            if len(sent) == 1
            else CanonicalMessage.response(TextPart(answer))
        )

    return FunctionModel(respond)


def call(call_id: str, name: str, **args: object) -> ToolCallPart:
    return ToolCallPart(tool_name=name, args=dict(args), tool_call_id=call_id)


def answers_of(messages: Sequence[CanonicalMessage]) -> dict[str, ToolReturnPart]:
    found: dict[str, ToolReturnPart] = {}
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolReturnPart):
                assert part.tool_call_id not in found, f"{part.tool_call_id} answered twice"
                found[part.tool_call_id] = part
    return found


async def wait_until(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.002)


# ---------------------------------------------------------------- the pool


async def test_sync_tools_run_in_the_agents_bounded_pool() -> None:
    running: list[str] = []
    names: set[str] = set()
    peak = 0
    lock = threading.Lock()

    def work(key: str) -> str:
        """Work a little.

        Args:
            key: Which.
        """
        nonlocal peak
        with lock:
            running.append(key)
            peak = max(peak, len(running))
            names.add(threading.current_thread().name)
        time.sleep(0.03)
        with lock:
            running.remove(key)
        return key

    threads = ToolThreads(2)
    agent = Agent(
        calls_then(*(call(f"c{i}", "work", key=f"k{i}") for i in range(5))),
        tools=[work],
        tool_threads=threads,
    )
    result = await agent.run("go")
    assert result.output == "final"
    assert peak == 2  # bounded by the pool, though max_parallel_tools is 8
    assert all(name.startswith("harness-tool") for name in names)
    assert threads.unfinished == 0
    assert agent.run_settings.tool_threads is threads


def test_tool_threads_and_settle_timeout_are_validated() -> None:
    model = calls_then()
    with pytest.raises(ValueError, match="tool_threads must be at least 1, got 0"):
        Agent(model, tool_threads=0)
    with pytest.raises(TypeError, match="tool_threads must be an int"):
        Agent(model, tool_threads="4")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tool_settle_timeout must be >= 0"):
        Agent(model, tool_settle_timeout=-1)
    with pytest.raises(ValueError, match="tool_settle_timeout must be >= 0"):
        Agent(model, tool_settle_timeout=float("nan"))
    assert Agent(model).run_settings.tool_threads.max_workers == 16


# ---------------------------------------------------------------- a sync call the run stops


class Payment:
    """A sync, non-idempotent tool whose effect lands ``delay`` seconds after it starts."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.started = threading.Event()
        self.landed: list[str] = []

    def tool(self) -> Tool:
        def pay(key: str) -> str:
            """Pay.

            Args:
                key: The payment.
            """
            self.started.set()
            time.sleep(self.delay)
            self.landed.append(key)
            return f"paid {key}"

        return Tool.from_function(pay, idempotent=False)


async def test_a_sync_call_still_running_after_an_abort_is_answered_outcome_unknown(
    store: SessionStore,
) -> None:
    """The issue's case: the payment lands 0.6 s after the abort; the run never says it did not."""
    payment = Payment(0.6)
    threads = ToolThreads(4)
    agent = Agent(
        calls_then(call("p", "pay", key="k")),
        tools=[payment.tool()],
        tool_threads=threads,
        tool_settle_timeout=0.05,
    )
    session = Session.create(store=store)
    task = asyncio.create_task(agent.run("go", session=session))
    await wait_until(payment.started.is_set)
    agent.abort()
    with pytest.raises(UserAbort):
        await task
    assert payment.landed == []  # the run stopped before the effect landed ...
    stored = Session.open(store, session.session_id)
    answer = answers_of(stored.messages)["p"]
    assert answer.content == INTERRUPTED_UNKNOWN_CONTENT
    assert harness_mark(answer) == {"outcome_unknown": True}
    assert stored.ledger["p"].status == "unknown"
    assert check_invariants(stored.messages, persisted=True) == []
    await wait_until(lambda: threads.unfinished == 0)
    assert payment.landed == ["k"]  # ... and it landed after: the record never denied it


async def test_a_sync_call_finishing_within_the_settle_timeout_keeps_its_result(store: SessionStore) -> None:
    payment = Payment(0.15)
    agent = Agent(calls_then(call("p", "pay", key="k")), tools=[payment.tool()], tool_settle_timeout=5.0)
    session = Session.create(store=store)
    task = asyncio.create_task(agent.run("go", session=session))
    await wait_until(payment.started.is_set)
    agent.abort()
    with pytest.raises(UserAbort):
        await task
    assert payment.landed == ["k"]
    stored = Session.open(store, session.session_id)
    assert answers_of(stored.messages)["p"].content == "paid k"
    assert stored.ledger["p"].status == "completed"


async def test_a_timeout_waits_for_the_sync_call_and_records_its_failure(store: SessionStore) -> None:
    def charge(key: str) -> str:
        """Charge, and fail.

        Args:
            key: Which.
        """
        time.sleep(0.5)
        raise RuntimeError(f"card declined for {key}")

    agent = Agent(
        calls_then(call("c", "charge", key="k")),
        tools=[Tool.from_function(charge, idempotent=False)],
        request_timeout=0.25,
        tool_settle_timeout=5.0,
    )
    session = Session.create(store=store)
    with pytest.raises(RequestTimeout):
        await agent.run("go", session=session)
    stored = Session.open(store, session.session_id)
    assert "card declined for k" in str(answers_of(stored.messages)["c"].content)
    assert stored.ledger["c"].status == "failed"


async def test_queued_sync_calls_never_run_after_an_abort(store: SessionStore) -> None:
    release = threading.Event()
    ran: list[str] = []

    def job(key: str) -> str:
        """A job.

        Args:
            key: Which.
        """
        ran.append(key)
        release.wait(5)
        return key

    threads = ToolThreads(1)
    agent = Agent(
        calls_then(call("a", "job", key="a"), call("b", "job", key="b")),
        tools=[job],
        tool_threads=threads,
        tool_settle_timeout=0.02,
    )
    session = Session.create(store=store)
    task = asyncio.create_task(agent.run("go", session=session))
    await wait_until(lambda: ran == ["a"])
    agent.abort()
    with pytest.raises(UserAbort):
        await task
    release.set()
    await wait_until(lambda: threads.unfinished == 0)
    assert ran == ["a"]  # "b" waited in the queue and was cancelled: it never ran
    stored = Session.open(store, session.session_id)
    answers = answers_of(stored.messages)
    assert answers["a"].content == INTERRUPTED_UNKNOWN_CONTENT
    assert (answers["b"].content, harness_mark(answers["b"])) == (ABORTED_TOOL_CONTENT, {"aborted": True})
    assert {k: stored.ledger[k].status for k in "ab"} == {"a": "unknown", "b": "cancelled"}


async def test_an_approved_call_aborted_while_it_runs_is_not_held_again(store: SessionStore) -> None:
    """A resumed approval that began is answered as it happened, so a later resume never runs it twice."""
    from harness_tool_approval import Approve, ToolApproval

    payment = Payment(0.5)
    tool = Tool.from_function(payment.tool().function, name="pay", idempotent=False, needs_approval=True)
    session = Session.create(store=store)

    def agent() -> Agent:
        return Agent(
            calls_then(call("p", "pay", key="k")),
            tools=[tool],
            capabilities=[ToolApproval()],
            tool_settle_timeout=0.05,
        )

    paused = await agent().run("go", session=session)
    assert paused.status == "awaiting_approval"
    resuming = agent()
    task = asyncio.create_task(resuming.run(None, session=session, approvals={"p": Approve()}))
    await wait_until(payment.started.is_set)
    resuming.abort()
    with pytest.raises(UserAbort):
        await task
    stored = Session.open(store, session.session_id)
    assert answers_of(stored.messages)["p"].content == INTERRUPTED_UNKNOWN_CONTENT
    assert stored.ledger["p"].status == "unknown"
    assert check_invariants(stored.messages, persisted=True) == []


# ---------------------------------------------------------------- events carry their answer


async def test_every_finished_tool_event_carries_the_answer_the_model_reads(store: SessionStore) -> None:
    seen: list[ToolEvent] = []

    class Observer:
        @hookimpl
        def on_tool(self, ctx: RunContext, event: ToolEvent) -> None:
            seen.append(event)

    def echo(text: str) -> str:
        """Echo.

        Args:
            text: What.
        """
        return f"echo {text}"

    agent = Agent(calls_then(call("e", "echo", text="x"), call("u", "nope")), tools=[echo])
    agent.plugin_manager.register(Observer(), name="observer")
    session = Session.create(store=store)
    result = await agent.run("go", session=session)
    finished = {e.record.tool_call_id: e for e in seen if e.kind in ("completed", "failed")}
    by_id = {
        p.tool_call_id: p
        for m in result.all_messages
        for p in m.parts
        if isinstance(p, ToolReturnPart | RetryPromptPart)
    }
    assert {k: e.answer for k, e in finished.items()} == {k: by_id[k] for k in finished}
    assert all(e.answer is None for e in seen if e.kind in ("registered", "started"))
    assert Session.open(store, session.session_id).ledger["e"].status == "completed"


# ---------------------------------------------------------------- recovery names what failed


async def test_a_ledger_conflict_while_recovering_is_named_as_the_ledger_not_the_hook(
    store: SessionStore,
) -> None:
    agent_box: list[Agent] = []
    session = Session.create(store=store)

    async def meddle() -> str:
        """Another writer commits to the session, then the user aborts."""
        other = Session.open(store, session.session_id)
        other.append_to_log([CanonicalMessage.request(UserPromptPart(content="elsewhere"))])
        other.checkpoint()
        agent_box[0].abort()
        await asyncio.sleep(1)
        return "never"

    agent = Agent(calls_then(call("m", "meddle")), tools=[meddle])
    agent_box.append(agent)
    with pytest.raises(UserAbort) as info:
        await agent.run("go", session=session)
    notes = getattr(info.value, "__notes__", [])
    ledger_notes = [n for n in notes if "tool-effect ledger failed" in n]
    assert ledger_notes, notes
    assert all("SessionConflictError" in n for n in ledger_notes)
    assert "'cancelled' event of tool call 'm'" in ledger_notes[0]
    assert not any("on_tool hook failed" in n for n in notes)
    with pytest.raises(SessionConflictError):
        session.checkpoint()  # the conflict was real


# ---------------------------------------------------------------- the property, randomised


CallPlan = tuple[str, float, float]  # ("sync" | "async", seconds before the effect, seconds after it)


async def _stop_at_random(
    plans: Sequence[CallPlan], stop: str, stop_at: float, settle: float, pool: int, url: str
) -> dict[str, int]:
    landed: set[str] = set()
    lock = threading.Lock()

    def sync_work(key: str, before: float, after: float) -> str:
        """Sync work with an effect in the middle.

        Args:
            key: Which.
            before: Seconds before the effect.
            after: Seconds after it.
        """
        time.sleep(before)
        with lock:
            landed.add(key)
        time.sleep(after)
        return f"done {key}"

    async def async_work(key: str, before: float, after: float) -> str:
        """Async work with an effect in the middle.

        Args:
            key: Which.
            before: Seconds before the effect.
            after: Seconds after it.
        """
        await asyncio.sleep(before)
        with lock:
            landed.add(key)
        await asyncio.sleep(after)
        return f"done {key}"

    calls = [
        call(f"c{i}", f"{kind}_work", key=f"c{i}", before=before, after=after)
        for i, (kind, before, after) in enumerate(plans)
    ]
    threads = ToolThreads(pool)
    tools = [
        Tool.from_function(sync_work, idempotent=False),
        Tool.from_function(async_work, idempotent=False),
    ]
    timeout = stop_at if stop == "timeout" else None
    agent = Agent(
        calls_then(*calls),
        tools=tools,
        tool_threads=threads,
        tool_settle_timeout=settle,
        request_timeout=timeout,
    )
    store = open_store(url)
    try:
        session = Session.create(store=store)
        if stop == "abort":
            asyncio.get_running_loop().call_later(stop_at, agent.abort)
        with contextlib.suppress(UserAbort, RequestTimeout):
            await agent.run("go", session=session)
        await wait_until(lambda: threads.unfinished == 0)  # every effect that will land has landed
        stored = Session.open(store, session.session_id)
        answers = answers_of(stored.messages)
        assert check_invariants(stored.messages, persisted=True) == []
        tally = {"landed": 0, "denied": 0, "result": 0, "unknown": 0, "aborted": 0}
        expected_status = {ABORTED_TOOL_CONTENT: "cancelled", INTERRUPTED_UNKNOWN_CONTENT: "unknown"}
        for part in calls:
            key = part.tool_call_id
            if key not in answers:  # the run stopped before the response was recorded
                assert key not in landed
                continue
            entry = stored.ledger.get(key)  # none: stopped before the call was registered
            content, status = answers[key].content, entry.status if entry is not None else "cancelled"
            said_not = content == ABORTED_TOOL_CONTENT or status == "cancelled"
            if key in landed:
                tally["landed"] += 1
                tally["denied"] += said_not
            assert not (key in landed and said_not), (key, content, status)
            assert status == expected_status.get(str(content), "completed"), (key, content, status)
            if content == f"done {key}":
                assert key in landed
                tally["result"] += 1
            else:
                tally["unknown" if content == INTERRUPTED_UNKNOWN_CONTENT else "aborted"] += 1
        return tally
    finally:
        store.close()
        threads.shutdown()


_plans = st.lists(
    st.tuples(
        st.sampled_from(["sync", "async"]),
        st.floats(0, 0.03).map(lambda s: round(s, 3)),
        st.floats(0, 0.03).map(lambda s: round(s, 3)),
    ),
    min_size=1,
    max_size=3,
)
_stops = st.tuples(
    st.sampled_from(["abort", "timeout"]),
    st.floats(0.001, 0.06).map(lambda s: round(s, 3)),
    st.sampled_from([0.0, 0.005, 0.02, 0.2]),
    st.integers(1, 3),
)


def _check_random_stop(plans: list[CallPlan], stop: tuple[str, float, float, int]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/sessions.db"
        tally = asyncio.run(_stop_at_random(plans, *stop, url=url))
    assert tally["denied"] == 0


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans=_plans, stop=_stops)
def test_no_effect_that_landed_is_recorded_as_not_happened(
    plans: list[CallPlan], stop: tuple[str, float, float, int]
) -> None:
    _check_random_stop(plans, stop)


def _skip_unless_slow(request: pytest.FixtureRequest) -> None:
    markexpr = str(request.config.getoption("markexpr", "") or "")
    if os.environ.get("HARNESS_SLOW") != "1" and ("slow" not in markexpr or "not slow" in markexpr):
        pytest.skip("a slow fault-injection suite: run it with -m slow (or HARNESS_SLOW=1)")


@pytest.mark.slow
def test_no_effect_that_landed_is_recorded_as_not_happened_many(request: pytest.FixtureRequest) -> None:
    _skip_unless_slow(request)

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(plans=_plans, stop=_stops)
    def check(plans: list[CallPlan], stop: tuple[str, float, float, int]) -> None:
        _check_random_stop(plans, stop)

    check()


# ---------------------------------------------------------------- a real process, killed


_CHILD = '''
import asyncio, os, sys, time
from harness import Agent, Session, open_store
from harness.core.messages import CanonicalMessage, TextPart, ToolCallPart
from harness.models.function import FunctionModel
from harness.tokens import TokenCounter
from harness.tools.tool import Tool

url, effects, id_file = sys.argv[1:4]

def land(key):
    with open(effects, "a") as f:
        f.write(key + "\\n"); f.flush(); os.fsync(f.fileno())

def sync_pay(key: str) -> str:
    """Pay (sync)."""
    time.sleep(0.04); land(key); time.sleep(0.04)
    return "paid " + key

async def async_pay(key: str) -> str:
    """Pay (async)."""
    await asyncio.sleep(0.04); land(key); await asyncio.sleep(0.04)
    return "paid " + key

calls = [ToolCallPart(tool_name=n, args={"key": k}, tool_call_id=k) for n, k in
         [("sync_pay", "s1"), ("async_pay", "a1"), ("sync_pay", "s2")]]
model = FunctionModel.from_responses(CanonicalMessage.response(*calls), "final")
tools = [Tool.from_function(sync_pay, idempotent=False), Tool.from_function(async_pay, idempotent=False)]
TokenCounter().load()
store = open_store(url)
session = Session.create(store=store)
with open(id_file, "w") as f:
    f.write(session.session_id)
print("ready", flush=True)
asyncio.run(Agent(model, tools=tools, tool_settle_timeout=0.01).run("go", session=session))
print("finished", flush=True)
'''


def _kill_and_resume(kill_at: float, folder: Path) -> None:
    url = f"sqlite:///{folder}/sessions.db"
    effects, id_file, script = folder / "effects.txt", folder / "session_id", folder / "child.py"
    script.write_text(_CHILD)
    child = subprocess.Popen(
        [sys.executable, str(script), url, str(effects), str(id_file)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        time.sleep(kill_at)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(10)
        if child.stdout is not None:
            child.stdout.close()
    landed = set(effects.read_text().split()) if effects.exists() else set()
    store = open_store(url)
    try:
        session_id = id_file.read_text()
        if session_id not in {head.session_id for head in store.list_sessions()}:
            assert landed == set()  # killed before the session's first checkpoint
            return
        session = Session.open(store, session_id)

        rerun: list[str] = []

        def pay(key: str) -> str:
            """Pay (a call that never started runs now).

            Args:
                key: Which.
            """
            rerun.append(key)
            return f"paid {key}"

        resume_tools = [
            Tool.from_function(pay, name=name, idempotent=False) for name in ("sync_pay", "async_pay")
        ]
        began = {k for k, e in session.ledger.items() if e.status != "cancelled"}
        last = session.messages[-1] if session.messages else None
        if last is not None and (last.kind == "request" or last.tool_calls):  # the child stopped part way
            asyncio.run(Agent(calls_then(answer="resumed"), tools=resume_tools).run(None, session=session))
        assert not set(rerun) & began  # a non-idempotent call that began never runs twice
        stored = Session.open(store, session_id)
        answers = answers_of(stored.messages)
        for key in landed:
            assert key in began
            content, status = answers[key].content, stored.ledger[key].status
            assert content != ABORTED_TOOL_CONTENT, (key, content, status)
            assert status != "cancelled", (key, content, status)
            assert content in (f"paid {key}", OUTCOME_UNKNOWN_CONTENT, INTERRUPTED_UNKNOWN_CONTENT), content
        assert check_invariants(stored.messages, persisted=True) == []
    finally:
        store.close()


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kill_at=st.floats(0.0, 0.25))
def test_a_killed_process_never_records_a_landed_effect_as_not_happened(kill_at: float) -> None:
    with tempfile.TemporaryDirectory() as folder:
        _kill_and_resume(kill_at, Path(folder))


@pytest.mark.slow
def test_a_killed_process_never_records_a_landed_effect_as_not_happened_many(
    request: pytest.FixtureRequest,
) -> None:
    _skip_unless_slow(request)

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(kill_at=st.floats(0.0, 0.3))
    def check(kill_at: float) -> None:
        with tempfile.TemporaryDirectory() as folder:
            _kill_and_resume(kill_at, Path(folder))

    check()
