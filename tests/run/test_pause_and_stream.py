"""Pausing on held-back tool calls and resuming with decisions; ``Agent.run_stream`` events and aborts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Generator
from pathlib import Path
from typing import Any

import pytest

from harness import Agent, CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart
from harness.capabilities.calls import ToolCall
from harness.core.effects import ToolOutcome
from harness.core.streaming import TextDelta
from harness.errors import ApprovalError, ApprovalPendingError, CapabilityError, UserAbort
from harness.history import check_invariants
from harness.hooks import PluginManager, hookimpl
from harness.models.function import FunctionInfo, FunctionModel
from harness.run import events as ev
from harness.run.approvals import is_placeholder
from harness.session import Session
from harness.stores import open_store

ran: list[str] = []


def send_mail(to: str) -> str:
    """Send a mail.

    Args:
        to: The recipient.
    """
    ran.append(to)
    return f"sent to {to}"


class HoldMail:
    """Holds send_mail back until a decision says "yes" (a minimal approval wrapper)."""

    @hookimpl(wrapper=True)
    def wrap_tool_call(self, call: ToolCall) -> Generator[None, ToolOutcome, object]:
        if call.tool_name != "send_mail":
            return (yield)
        if call.decision is None:
            return ToolOutcome("deferred", error="needs a human")
        if call.decision == "no":
            return "The user rejected this call."
        return (yield)


def mail_model(sent: list[list[CanonicalMessage]]) -> FunctionModel:
    def respond(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        del info
        sent.append(messages)
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not returns:
            return CanonicalMessage.response(
                ToolCallPart(tool_call_id="m1", tool_name="send_mail", args={"to": "ann"}),
                ToolCallPart(tool_call_id="m2", tool_name="send_mail", args={"to": "bob"}),
            )
        return CanonicalMessage.response(TextPart(" / ".join(str(p.content) for p in returns)))

    return FunctionModel(respond)


def mail_agent(sent: list[list[CanonicalMessage]]) -> Agent:
    pm = PluginManager()
    pm.register(HoldMail())
    return Agent(mail_model(sent), tools=[send_mail], plugin_manager=pm)


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


async def test_a_held_call_pauses_the_run_and_resumes_from_the_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    sent: list[list[CanonicalMessage]] = []
    store = open_store(url)
    session = Session.create(store=store)
    paused = await mail_agent(sent).run("mail them", session=session)
    assert paused.status == "awaiting_approval"
    assert [c.tool_call_id for c in paused.pending_approvals] == ["m1", "m2"]
    assert ran == []
    assert check_invariants(session.messages) == []
    assert sum(is_placeholder(p) for p in session.messages[-1].parts) == 2

    # Another agent, the session loaded back from the store: the pending calls were stored.
    other = open_store(url)
    reloaded = Session.open(other, session.session_id)
    with pytest.raises(ApprovalPendingError) as pending:
        await mail_agent(sent).run("something else", session=reloaded)
    assert pending.value.tool_call_ids == ("m1", "m2")
    with pytest.raises(ApprovalError, match="zzz"):
        await mail_agent(sent).run(None, session=reloaded, approvals={"zzz": "yes"})

    result = await mail_agent(sent).run(None, session=reloaded, approvals={"m1": "yes", "m2": "no"})
    assert result.status == "completed"
    assert ran == ["ann"]
    assert result.output == "sent to ann / The user rejected this call."
    assert not any(is_placeholder(p) for m in sent[-1] for p in m.parts)
    assert check_invariants(reloaded.messages) == []
    store.close()
    other.close()


async def test_a_partial_decision_pauses_again_on_the_rest() -> None:
    sent: list[list[CanonicalMessage]] = []
    agent = mail_agent(sent)
    paused = await agent.run("mail them")
    again = await agent.run(None, session=paused.session, approvals={"m1": "yes"})
    assert again.status == "awaiting_approval"
    assert [c.tool_call_id for c in again.pending_approvals] == ["m2"]
    assert ran == ["ann"]
    assert len(sent) == 1  # no model request while a call is still held
    done = await agent.run(None, session=paused.session, approvals={"m2": "yes"})
    assert done.output == "sent to ann / sent to bob"
    assert ran == ["ann", "bob"]


async def test_run_stream_yields_the_events_in_order_and_the_same_result() -> None:
    sent: list[list[CanonicalMessage]] = []
    agent = mail_agent(sent)
    kinds: list[str] = []
    async with agent.run_stream("mail them") as stream:
        async for event in stream:
            kinds.append(type(event).__name__)
    assert kinds[0] == "RequestStarted"
    assert kinds[-2:] == ["ApprovalNeeded", "RunFinished"]
    assert "ToolCallReady" in kinds
    assert stream.result.status == "awaiting_approval"

    approvals = {"m1": "yes", "m2": "yes"}
    async with agent.run_stream(None, session=stream.result.session, approvals=approvals) as s2:
        events = [event async for event in s2]
    results = [e for e in events if isinstance(e, ev.ToolResult)]
    assert [r.tool_call_id for r in results] == ["m1", "m2"]
    assert isinstance(events[-1], ev.RunFinished)
    assert s2.result.output == "sent to ann / sent to bob"


def slow_stream_model(started: asyncio.Event) -> FunctionModel:
    async def stream(messages: list[CanonicalMessage], info: FunctionInfo) -> AsyncIterator[Any]:
        del messages, info
        yield "partial "
        yield "answer"
        started.set()
        await asyncio.sleep(30)
        yield "never"

    def respond(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        return CanonicalMessage.response(TextPart("partial answer never"))

    return FunctionModel(respond, stream_function=stream)


async def test_leaving_the_block_early_aborts_and_keeps_the_partial_text(tmp_path: Path) -> None:
    started = asyncio.Event()
    session = Session(path=tmp_path / "s.json")
    agent = Agent(slow_stream_model(started))
    texts: list[str] = []
    async with agent.run_stream("hi", session=session) as stream:
        async for event in stream:
            if isinstance(event, TextDelta):
                texts.append(event.text)
                if len(texts) == 2:
                    break
    assert texts == ["partial ", "answer"]
    saved = Session.load(tmp_path / "s.json")
    last = saved.messages[-1]
    assert last.kind == "response"
    assert [p.content for p in last.parts if isinstance(p, TextPart)] == ["partial answer", "[INTERRUPTED]"]
    assert check_invariants(saved.messages) == []


async def test_abort_inside_the_block_raises_user_abort_from_the_iteration() -> None:
    started = asyncio.Event()
    agent = Agent(slow_stream_model(started))

    async def consume() -> None:
        async with agent.run_stream("hi") as stream:
            async for event in stream:
                if isinstance(event, TextDelta) and event.text == "answer":
                    stream.abort()

    with pytest.raises(UserAbort):
        await consume()


async def test_resuming_without_the_plugin_that_held_the_calls_is_refused() -> None:
    sent: list[list[CanonicalMessage]] = []
    paused = await mail_agent(sent).run("mail them")
    bare = Agent(mail_model(sent), tools=[send_mail])
    with pytest.raises(ApprovalError, match="HoldMail"):
        await bare.run(None, session=paused.session, approvals={"m1": "no", "m2": "no"})
    assert ran == []
    assert sum(is_placeholder(p) for p in paused.session.messages[-1].parts) == 2


async def test_a_failure_while_resuming_keeps_the_answers_of_calls_that_ran() -> None:
    class Picky(HoldMail):
        @hookimpl(wrapper=True)
        def wrap_tool_call(self, call: ToolCall) -> Generator[None, ToolOutcome, object]:
            if call.decision == "boom":
                raise ApprovalError("bad decision")
            return (yield from HoldMail.wrap_tool_call(self, call))

    sent: list[list[CanonicalMessage]] = []
    pm = PluginManager()
    pm.register(Picky(), name="HoldMail")
    agent = Agent(mail_model(sent), tools=[send_mail], plugin_manager=pm, max_parallel_tools=1)
    paused = await agent.run("mail them")
    with pytest.raises(CapabilityError, match="bad decision"):
        await agent.run(None, session=paused.session, approvals={"m1": "yes", "m2": "boom"})
    assert ran == ["ann"]
    assert check_invariants(paused.session.messages) == []
    held = [
        p.tool_call_id
        for p in paused.session.messages[-1].parts
        if isinstance(p, ToolReturnPart) and is_placeholder(p)
    ]
    assert held == ["m2"]
    done = await agent.run(None, session=paused.session, approvals={"m2": "yes"})
    assert ran == ["ann", "bob"]
    assert done.output == "sent to ann / sent to bob"
