"""A stored session is checkpointed at every step of a run, and a stopped run resumes from its ledger."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from harness import Agent, Capability, CompactionEvent, RequestContext, hookimpl
from harness.core.messages import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart
from harness.durable.resume import OUTCOME_UNKNOWN_CONTENT
from harness.errors import SessionConflictError
from harness.history import check_invariants
from harness.models.function import FunctionInfo, FunctionModel
from harness.session import LedgerEntry, Session, SessionStore
from harness.session.tracking import encode_part
from harness.stores import open_store
from harness.tools.tool import Tool


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    opened = open_store(f"sqlite:///{tmp_path}/sessions.db")
    yield opened
    opened.close()


def scripted(*responses: CanonicalMessage) -> FunctionModel:
    queue = list(responses)

    def respond(messages: Sequence[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        del messages, info
        return queue.pop(0)

    return FunctionModel(respond)


def call(call_id: str, name: str = "probe", **args: object) -> CanonicalMessage:
    return CanonicalMessage.response(ToolCallPart(tool_call_id=call_id, tool_name=name, args=dict(args)))


async def test_every_step_is_in_the_store_while_the_run_goes_on(store: SessionStore) -> None:
    seen: list[tuple[int, list[str]]] = []
    session = Session.create(store=store)

    def probe() -> str:
        """Report what the store holds right now."""
        stored = Session.open(store, session.session_id)
        seen.append((stored.revision, [e.status for e in stored.ledger.values()]))
        return "probed"

    agent = Agent(scripted(call("c1"), CanonicalMessage.response(TextPart("done"))), tools=[probe])
    result = await agent.run("go", session=session)
    assert result.output == "done"
    # While the tool ran, the store already held the prompt, the response with the call, and
    # the ledger entry saying the call had started.
    revision, statuses = seen[0]
    assert revision >= 3
    assert statuses == ["started"]
    reopened = Session.open(store, session.session_id)
    assert reopened.messages == session.messages
    assert reopened.revision == session.revision
    assert reopened.ledger["c1"].status == "completed"
    assert reopened.usage == session.usage
    assert [m.kind for m in reopened.transcript()] == ["request", "response", "request", "response"]
    assert check_invariants(reopened.messages) == []


class ClearOldResults(Capability):
    """Replaces every tool result but the newest with a placeholder (a test capability)."""

    name = "clear_old_results"

    @hookimpl
    async def before_model_request(self, ctx: RequestContext) -> None:
        returns = [
            i for i, m in enumerate(ctx.messages) if any(isinstance(p, ToolReturnPart) for p in m.parts)
        ]
        cleared: list[str] = []
        for index in returns[:-1]:
            message = ctx.messages[index]
            parts = []
            for part in message.parts:
                if isinstance(part, ToolReturnPart) and part.content != "[cleared]":
                    cleared.append(part.tool_call_id)
                    part = ToolReturnPart(
                        tool_call_id=part.tool_call_id, tool_name=part.tool_name, content="[cleared]"
                    )
                parts.append(part)
            if cleared and parts != list(message.parts):
                ctx.messages[index] = message.replace(parts=tuple(parts))
        if cleared:
            ctx.report(
                CompactionEvent(
                    "clear_old_results",
                    "test",
                    len(ctx.messages),
                    len(ctx.messages),
                    0,
                    0,
                    cleared_tool_call_ids=tuple(cleared),
                )
            )


async def test_capability_edits_are_overlays_and_the_raw_log_keeps_the_originals(store: SessionStore) -> None:
    def probe(n: int) -> str:
        """Return a long result."""
        return f"original result {n} " * 20

    agent = Agent(
        scripted(
            call("c1", n=1), call("c2", n=2), call("c3", n=3), CanonicalMessage.response(TextPart("ok"))
        ),
        tools=[probe],
        capabilities=[ClearOldResults()],
    )
    session = Session.create(store=store)
    await agent.run("go", session=session)
    view = Session.open(store, session.session_id)
    contents = [p.content for m in view.messages for p in m.parts if isinstance(p, ToolReturnPart)]
    assert contents[:2] == ["[cleared]", "[cleared]"]
    assert contents[2].startswith("original result 3")
    raw = [p.content for m in view.transcript() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert len(raw) == 3  # each original once: placeholders never enter the log
    assert all(str(c).startswith("original result") for c in raw)
    edits = store.edits(session.session_id)
    assert edits, "each compaction is recorded as an edit"
    assert any(e.events and e.events[0]["strategy"] == "clear_old_results" for e in edits)
    replaced = {seq for e in edits for seq in e.replaced}
    logged = view.transcript()
    assert all(any(isinstance(p, ToolReturnPart) for p in logged[seq].parts) for seq in replaced)
    # A placeholder knows the log message it replaced.
    cleared_message = next(
        m
        for m in view.messages
        if any(isinstance(p, ToolReturnPart) and p.content == "[cleared]" for p in m.parts)
    )
    source = view.log_seq_of(cleared_message)
    assert source is not None
    assert "original result" in str(logged[source].parts[0].content)  # type: ignore[union-attr]


async def test_a_stale_session_gets_a_conflict_and_writes_nothing(store: SessionStore) -> None:
    session = Session.create(store=store)
    agent = Agent(
        scripted(CanonicalMessage.response(TextPart("one")), CanonicalMessage.response(TextPart("two")))
    )
    await agent.run("first", session=session)
    stale = Session.open(store, session.session_id)
    await agent.run("second", session=session)
    before = store.load(session.session_id)
    with pytest.raises(SessionConflictError) as info:
        await Agent(scripted(CanonicalMessage.response(TextPart("three")))).run("third", session=stale)
    assert info.value.session_id == session.session_id
    assert store.load(session.session_id) == before


def ledger_entry(call_id: str, name: str, status: str, result: str | None = None) -> LedgerEntry:
    from datetime import UTC, datetime

    answer = (
        encode_part(ToolReturnPart(tool_call_id=call_id, tool_name=name, content=result))
        if result is not None
        else None
    )
    return LedgerEntry(call_id, name, status, datetime.now(UTC), None, answer)  # type: ignore[arg-type]


async def test_resume_reuses_finished_calls_reruns_idempotent_ones_and_reports_unknown_outcomes(
    store: SessionStore,
) -> None:
    runs: list[str] = []

    def read(path: str) -> str:
        """Idempotent read."""
        runs.append(f"read {path}")
        return f"contents of {path}"

    def write(path: str) -> str:
        """A write: never repeated."""
        runs.append(f"write {path}")
        return "written"

    # The state a killed run leaves: the response with four calls is stored; the ledger says
    # c1 completed, c2 (a write) and c3 (a read) had started, c4 never started.
    session = Session.create(store=store)
    session.messages = [
        CanonicalMessage.user("do it"),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="c1", tool_name="read", args={"path": "a"}),
            ToolCallPart(tool_call_id="c2", tool_name="write", args={"path": "b"}),
            ToolCallPart(tool_call_id="c3", tool_name="read", args={"path": "c"}),
            ToolCallPart(tool_call_id="c4", tool_name="write", args={"path": "d"}),
        ),
    ]
    session.record_tool(ledger_entry("c1", "read", "completed", "contents of a (first run)"))
    session.record_tool(ledger_entry("c2", "write", "started"))
    session.record_tool(ledger_entry("c3", "read", "started"))
    session.checkpoint()

    resumed = Session.open(store, session.session_id)
    agent = Agent(
        scripted(CanonicalMessage.response(TextPart("finished"))),
        tools=[Tool.from_function(read), Tool.from_function(write, idempotent=False)],
    )
    result = await agent.run(None, session=resumed)
    assert result.output == "finished"
    assert sorted(runs) == ["read c", "write d"]  # c1 reused, c2 not repeated
    answers = {
        p.tool_call_id: p.content for m in resumed.messages for p in m.parts if isinstance(p, ToolReturnPart)
    }
    assert answers["c1"] == "contents of a (first run)"
    assert answers["c2"] == OUTCOME_UNKNOWN_CONTENT
    assert answers["c3"] == "contents of c"
    assert answers["c4"] == "written"
    final = Session.open(store, session.session_id)
    assert final.ledger["c2"].status == "unknown_after_crash"
    assert {final.ledger[c].status for c in ("c1", "c3", "c4")} == {"completed"}
    assert check_invariants(final.messages) == []


async def test_a_capability_can_provide_tools() -> None:
    class Provides(Capability):
        name = "provides"

        @property
        def tools(self) -> list[Tool]:
            def ping() -> str:
                """Answer pong."""
                return "pong"

            return [Tool.from_function(ping)]

    agent = Agent(scripted(CanonicalMessage.response(TextPart("x"))), capabilities=[Provides()])
    assert "ping" in agent.tools


async def test_an_abort_keeps_the_interrupted_marker_in_the_store(store: SessionStore) -> None:
    import asyncio

    from harness.errors import UserAbort
    from harness.run.recovery import INTERRUPTED_MARKER, INTERRUPTED_UNKNOWN_CONTENT

    agent_box: list[Agent] = []

    async def panic() -> str:
        """Asks the agent to abort."""
        agent_box[0].abort()
        await asyncio.sleep(0)
        return "never stored"

    agent = Agent(scripted(call("p", "panic")), tools=[panic])
    agent_box.append(agent)
    session = Session.create(store=store)
    with pytest.raises(UserAbort):
        await agent.run("go", session=session)
    stored = Session.open(store, session.session_id)
    assert stored.messages == session.messages
    returns = [p.content for m in stored.messages for p in m.parts if isinstance(p, ToolReturnPart)]
    assert returns == [INTERRUPTED_UNKNOWN_CONTENT]  # the tool had begun: it may have taken effect
    assert stored.messages[-1].parts[-1].content == INTERRUPTED_MARKER  # type: ignore[union-attr]
    assert stored.ledger["p"].status == "unknown"
    assert check_invariants(stored.messages, persisted=True) == []
    # Continuing the aborted session is an ordinary next turn.
    result = await Agent(scripted(CanonicalMessage.response(TextPart("back")))).run("again", session=stored)
    assert result.output == "back"


def test_an_unknown_outcome_is_recorded_so_a_second_stop_gives_the_same_answer() -> None:
    from harness.durable.resume import plan_resume
    from harness.session.tracking import decode_part

    def write(path: str) -> str:
        """A write: never repeated."""
        return path

    tools = {"write": Tool.from_function(write, idempotent=False)}
    calls = [ToolCallPart(tool_call_id="w1", tool_name="write", args={"path": "a"})]
    first = plan_resume(calls, {"w1": ledger_entry("w1", "write", "started")}, tools)
    assert first.rerun == ()
    (update,) = first.ledger
    assert update.status == "unknown_after_crash"
    assert update.result is not None
    assert decode_part(update.result).content == OUTCOME_UNKNOWN_CONTENT  # type: ignore[union-attr]
    # Stopped again before the answer reached the log: the recorded answer is reused as is.
    second = plan_resume(calls, {"w1": update}, tools)
    assert second.rerun == ()
    assert second.ledger == ()
    assert second.answers["w1"] == first.answers["w1"]
