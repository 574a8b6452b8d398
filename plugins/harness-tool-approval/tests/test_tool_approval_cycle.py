"""The whole pause/resume cycle with real components: FunctionModel agents, SQLite, another process.

The helpers at the top (the planned model, the recording tools) are also imported by the
resuming subprocess, which loads this file by path.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from harness_tool_approval import Approve, DecisionError, Edit, Reject, ToolApproval
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import Agent, Session
from harness.core import CanonicalMessage, RetryPromptPart, ToolCallPart, ToolReturnPart, harness_mark
from harness.errors import ApprovalError, ApprovalPendingError
from harness.history import check_invariants
from harness.models.function import FunctionInfo, FunctionModel
from harness.run.approvals import held_calls, is_placeholder
from harness.run.events import ApprovalNeeded, RunFinished
from harness.run.executor import AWAITING_APPROVAL_CONTENT
from harness.session import SessionStore
from harness.stores import open_store
from harness.tools import Tool

HERE = Path(__file__).resolve()

# ------------------------------------------------------------------------------ helpers


def calls(*specs: tuple[str, str, dict[str, Any]]) -> list[ToolCallPart]:
    """One response's tool calls, from ``(call_id, tool_name, args)``."""
    return [
        ToolCallPart(tool_call_id=call_id, tool_name=name, args=dict(args)) for call_id, name, args in specs
    ]


def answers_in(message: CanonicalMessage) -> list[str]:
    """What a request answers, as ``"<tool>: <content>"`` lines."""
    lines: list[str] = []
    for part in message.parts:
        if isinstance(part, ToolReturnPart):
            lines.append(f"{part.tool_name}: {part.content}")
        elif isinstance(part, RetryPromptPart):
            lines.append(f"{part.tool_name}: retry: {part.content}")
    return lines


def planned_model(*steps: Sequence[ToolCallPart]) -> FunctionModel:
    """A model making ``steps[i]`` as its response to the i-th request of the conversation.

    The step is the number of responses already in the request (deterministic, so another
    process resuming the session gets the same plan); after the last step it answers with
    the tool results it read, one ``<tool>: <content>`` line each.
    """

    def respond(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage | str:
        del info
        step = sum(1 for message in messages if message.kind == "response")
        if step < len(steps):
            return CanonicalMessage.response(*steps[step])
        return "\n".join(answers_in(messages[-1])) or "nothing to report"

    return FunctionModel(respond)


class Desk:
    """Tools that record every call that really ran: ``delete_file`` needs approval, the others not."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []

    def delete_file(self, path: str) -> str:
        """Delete a file.

        Args:
            path: The file.
        """
        self.ran.append(("delete_file", {"path": path}))
        return f"deleted {path}"

    def send_email(self, to: str, body: str = "") -> str:
        """Send an email.

        Args:
            to: The address.
            body: The text.
        """
        self.ran.append(("send_email", {"to": to, "body": body}))
        return f"sent to {to}"

    def read_file(self, path: str) -> str:
        """Read a file.

        Args:
            path: The file.
        """
        self.ran.append(("read_file", {"path": path}))
        return f"contents of {path}"

    def tools(self) -> list[Tool]:
        """``delete_file`` (needs approval), ``send_email`` (unless to ``@corp``), ``read_file``."""
        return [
            Tool.from_function(self.delete_file, needs_approval=True),
            Tool.from_function(
                self.send_email, needs_approval=lambda args: not str(args.get("to", "")).endswith("@corp")
            ),
            Tool.from_function(self.read_file),
        ]


def placeholders_in(messages: Sequence[CanonicalMessage]) -> list[str]:
    """The call ids whose answers are ``awaiting_approval`` placeholders."""
    return [
        part.tool_call_id
        for message in messages
        for part in message.parts
        if is_placeholder(part) and isinstance(part, ToolReturnPart)
    ]


def answer_counts(messages: Sequence[CanonicalMessage]) -> dict[str, int]:
    """How many answers (tool returns and retry prompts) each call id has."""
    counts: dict[str, int] = {}
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolReturnPart | RetryPromptPart) and part.tool_call_id:
                counts[part.tool_call_id] = counts.get(part.tool_call_id, 0) + 1
    return counts


def sent_placeholders(model: FunctionModel) -> list[str]:
    """Anything of a placeholder the model was ever sent: marked parts, or the placeholder text."""
    found: list[str] = []
    for request in model.requests:
        for message in request:
            for part in message.parts:
                if is_placeholder(part) or (
                    isinstance(part, ToolReturnPart) and part.content == AWAITING_APPROVAL_CONTENT
                ):
                    found.append(getattr(part, "tool_call_id", "?"))
    return found


CLEANUP_PLAN: tuple[list[ToolCallPart], ...] = (
    calls(
        ("c1", "delete_file", {"path": "old.log"}),
        ("c2", "read_file", {"path": "notes.txt"}),
        ("c3", "send_email", {"to": "boss@ext", "body": "done"}),
    ),
)
"""The plan the other-process test shares with its subprocess: two calls need approval, one not."""


def cleanup_agent(desk: Desk) -> tuple[Agent, FunctionModel]:
    """The agent both processes build: the desk's tools, the cleanup plan, ToolApproval."""
    model = planned_model(*CLEANUP_PLAN)
    return Agent(model, tools=desk.tools(), capabilities=[ToolApproval()]), model


@pytest.fixture
def desk() -> Desk:
    return Desk()


@pytest.fixture
def store(tmp_path: Path) -> Any:
    opened = open_store(f"sqlite:///{tmp_path}/s.db")
    yield opened
    opened.close()


def one_delete(desk: Desk, *more: Sequence[ToolCallPart]) -> tuple[Agent, FunctionModel]:
    model = planned_model(calls(("c1", "delete_file", {"path": "a.txt"})), *more)
    return Agent(model, tools=desk.tools(), capabilities=[ToolApproval()]), model


# ------------------------------------------------------------------------------ pausing


async def test_a_call_needing_approval_pauses_the_run_and_does_not_run(desk: Desk) -> None:
    agent, model = one_delete(desk)
    result = await agent.run("clean up")
    assert result.status == "awaiting_approval"
    assert result.output is None
    assert [c.tool_call_id for c in result.pending_approvals] == ["c1"]
    assert result.pending_approvals[0].args_as_dict() == {"path": "a.txt"}
    assert desk.ran == []
    assert len(model.requests) == 1
    # the history holds a placeholder answer, marked, with the plugin's reason
    last = result.session.messages[-1]
    assert last.kind == "request"
    [placeholder] = last.parts
    assert isinstance(placeholder, ToolReturnPart)
    assert is_placeholder(placeholder)
    mark = harness_mark(placeholder)
    assert mark is not None
    assert mark["reason"] == "awaiting approval: delete_file is marked needs_approval"
    assert check_invariants(result.session.messages) == []


async def test_approve_runs_the_call_and_the_run_goes_on(desk: Desk) -> None:
    agent, model = one_delete(desk)
    paused = await agent.run("clean up")
    result = await agent.run(None, session=paused.session, approvals={"c1": Approve()})
    assert result.status == "completed"
    assert result.pending_approvals == ()
    assert result.output == "delete_file: deleted a.txt"
    assert desk.ran == [("delete_file", {"path": "a.txt"})]
    assert placeholders_in(result.session.messages) == []
    assert sent_placeholders(model) == []
    assert check_invariants(result.session.messages) == []


async def test_reject_answers_the_call_with_the_rejection_and_never_runs_it(desk: Desk) -> None:
    agent, model = one_delete(desk)
    paused = await agent.run("clean up")
    result = await agent.run(None, session=paused.session, approvals={"c1": Reject("keep the logs")})
    assert result.status == "completed"
    assert result.output == "delete_file: The user rejected this call: keep the logs"
    assert desk.ran == []
    # the model read the rejection as the call's result
    returns = [p for p in model.requests[-1][-1].parts if isinstance(p, ToolReturnPart)]
    assert [(p.tool_call_id, p.content) for p in returns] == [
        ("c1", "The user rejected this call: keep the logs")
    ]


async def test_reject_without_a_reason_says_none_was_given(desk: Desk) -> None:
    agent, _ = one_delete(desk)
    paused = await agent.run("clean up")
    result = await agent.run(None, session=paused.session, approvals={"c1": Reject()})
    assert result.output == "delete_file: The user rejected this call: no reason given"


async def test_edit_runs_the_call_with_the_edited_arguments(desk: Desk) -> None:
    agent, model = one_delete(desk)
    paused = await agent.run("clean up")
    result = await agent.run(None, session=paused.session, approvals={"c1": Edit({"path": "b.txt"})})
    assert result.output == "delete_file: deleted b.txt"
    assert desk.ran == [("delete_file", {"path": "b.txt"})]
    # the model's call stays as it made it; its answer is the edited call's result
    response = next(m for m in result.session.messages if m.tool_calls)
    assert response.tool_calls[0].args_as_dict() == {"path": "a.txt"}
    assert sent_placeholders(model) == []


async def test_edited_arguments_are_validated_like_the_models(desk: Desk) -> None:
    agent, _ = one_delete(desk)
    paused = await agent.run("clean up")
    result = await agent.run(None, session=paused.session, approvals={"c1": Edit({"file": "b.txt"})})
    assert desk.ran == []
    assert result.output is not None
    assert result.output.startswith("delete_file: retry: ")
    assert "path" in result.output


async def test_in_a_mixed_batch_the_call_not_needing_approval_runs_at_once(desk: Desk) -> None:
    model = planned_model(
        calls(("c1", "delete_file", {"path": "a.txt"}), ("c2", "read_file", {"path": "b.txt"}))
    )
    agent = Agent(model, tools=desk.tools(), capabilities=[ToolApproval()])
    paused = await agent.run("tidy")
    assert paused.status == "awaiting_approval"
    assert [c.tool_call_id for c in paused.pending_approvals] == ["c1"]
    assert desk.ran == [("read_file", {"path": "b.txt"})]
    stored = {p.tool_call_id: p for p in paused.session.messages[-1].parts if isinstance(p, ToolReturnPart)}
    assert stored["c2"].content == "contents of b.txt"
    assert is_placeholder(stored["c1"])

    result = await agent.run(None, session=paused.session, approvals={"c1": Approve()})
    assert result.output == "delete_file: deleted a.txt\nread_file: contents of b.txt"
    # the result kept from the pause is reused: read_file ran once
    assert desk.ran == [("read_file", {"path": "b.txt"}), ("delete_file", {"path": "a.txt"})]
    assert sent_placeholders(model) == []


async def test_two_pauses_in_a_row(desk: Desk) -> None:
    agent, model = one_delete(desk, calls(("c2", "delete_file", {"path": "b.txt"})))
    first = await agent.run("clean up")
    assert [c.tool_call_id for c in first.pending_approvals] == ["c1"]
    second = await agent.run(None, session=first.session, approvals={"c1": Approve()})
    assert second.status == "awaiting_approval"
    assert [c.tool_call_id for c in second.pending_approvals] == ["c2"]
    assert desk.ran == [("delete_file", {"path": "a.txt"})]
    assert placeholders_in(second.session.messages) == ["c2"]
    assert check_invariants(second.session.messages) == []
    third = await agent.run(None, session=second.session, approvals={"c2": Reject("not that one")})
    assert third.status == "completed"
    assert third.output == "delete_file: The user rejected this call: not that one"
    assert desk.ran == [("delete_file", {"path": "a.txt"})]
    assert sent_placeholders(model) == []


async def test_a_call_left_without_a_decision_stays_pending(desk: Desk) -> None:
    model = planned_model(
        calls(("c1", "delete_file", {"path": "a.txt"}), ("c2", "delete_file", {"path": "b.txt"}))
    )
    agent = Agent(model, tools=desk.tools(), capabilities=[ToolApproval()])
    paused = await agent.run("clean up")
    assert [c.tool_call_id for c in paused.pending_approvals] == ["c1", "c2"]
    again = await agent.run(None, session=paused.session, approvals={"c2": Approve()})
    assert again.status == "awaiting_approval"
    assert [c.tool_call_id for c in again.pending_approvals] == ["c1"]
    assert desk.ran == [("delete_file", {"path": "b.txt"})]
    assert len(model.requests) == 1, "no request is sent while a call is still held"
    done = await agent.run(None, session=again.session, approvals={"c1": Approve()})
    assert done.output == "delete_file: deleted a.txt\ndelete_file: deleted b.txt"
    assert desk.ran == [("delete_file", {"path": "b.txt"}), ("delete_file", {"path": "a.txt"})]


async def test_resuming_without_approvals_pauses_again_on_the_same_calls(desk: Desk) -> None:
    agent, model = one_delete(desk)
    paused = await agent.run("clean up")
    before = list(paused.session.messages)
    again = await agent.run(None, session=paused.session)
    assert again.status == "awaiting_approval"
    assert [c.tool_call_id for c in again.pending_approvals] == ["c1"]
    assert placeholders_in(again.session.messages) == ["c1"]
    assert len(again.session.messages) == len(before)
    assert desk.ran == []
    assert len(model.requests) == 1


# ------------------------------------------------------------------------------ errors


async def test_a_new_prompt_while_calls_are_pending_raises(desk: Desk) -> None:
    agent, model = one_delete(desk)
    paused = await agent.run("clean up")
    before = list(paused.session.messages)
    with pytest.raises(ApprovalPendingError, match="c1") as caught:
        await agent.run("something else", session=paused.session)
    assert caught.value.tool_call_ids == ("c1",)
    assert paused.session.messages == before
    assert desk.ran == []
    assert len(model.requests) == 1


async def test_approvals_naming_an_unknown_call_raise(desk: Desk) -> None:
    agent, _ = one_delete(desk)
    paused = await agent.run("clean up")
    with pytest.raises(ApprovalError, match=r"'nope'.*waiting: c1"):
        await agent.run(None, session=paused.session, approvals={"nope": Approve()})
    assert desk.ran == []
    assert [c.tool_call_id for c in held_calls(paused.session.messages)] == ["c1"]


async def test_a_decision_of_another_type_raises_naming_the_call_and_the_type(desk: Desk) -> None:
    agent, _ = one_delete(desk)
    paused = await agent.run("clean up")
    with pytest.raises(DecisionError, match=r"tool call 'c1' is a str \('yes'\)") as caught:
        await agent.run(None, session=paused.session, approvals={"c1": "yes"})
    assert caught.value.tool_call_id == "c1"
    assert caught.value.decision_type == "str"
    assert isinstance(caught.value, ApprovalError)
    assert caught.value.session is paused.session
    # nothing ran and the session is still paused: a right decision resumes it
    assert desk.ran == []
    assert placeholders_in(paused.session.messages) == ["c1"]
    result = await agent.run(None, session=paused.session, approvals={"c1": Approve()})
    assert result.output == "delete_file: deleted a.txt"


# ------------------------------------------------------------------------------ stored sessions


async def test_the_stored_history_is_valid_while_paused_and_resumes_from_the_store(
    desk: Desk, store: SessionStore
) -> None:
    agent, model = one_delete(desk)
    session = Session.create(store=store)
    paused = await agent.run("clean up", session=session)
    assert paused.status == "awaiting_approval"
    reopened = Session.open(store, session.session_id)
    assert check_invariants(reopened.messages) == []
    assert check_invariants(reopened.messages, persisted=True) == []
    assert placeholders_in(reopened.messages) == ["c1"]
    assert [c.tool_call_id for c in held_calls(reopened.messages)] == ["c1"]

    other_desk = Desk()
    other, other_model = one_delete(other_desk)
    result = await other.run(None, session=reopened, approvals={"c1": Edit({"path": "b.txt"})})
    assert result.output == "delete_file: deleted b.txt"
    assert other_desk.ran == [("delete_file", {"path": "b.txt"})]
    assert desk.ran == []
    final = Session.open(store, session.session_id)
    assert placeholders_in(final.messages) == []
    assert check_invariants(final.messages, persisted=True) == []
    assert sent_placeholders(model) == []
    assert sent_placeholders(other_model) == []


RESUMER = textwrap.dedent(
    """
    import asyncio, importlib.util, json, sys, warnings

    warnings.simplefilter("ignore")
    spec = importlib.util.spec_from_file_location("approval_cycle", sys.argv[1])
    cycle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cycle)

    from harness import Session
    from harness.stores import open_store
    from harness_tool_approval import Approve, Edit, Reject

    def decision(spec):
        kind = spec[0]
        if kind == "approve":
            return Approve()
        if kind == "reject":
            return Reject(spec[1])
        return Edit(spec[1])

    store = open_store(sys.argv[2])
    session = Session.open(store, sys.argv[3])
    approvals = {key: decision(value) for key, value in json.loads(sys.argv[4]).items()}
    desk = cycle.Desk()
    agent, model = cycle.cleanup_agent(desk)
    result = asyncio.run(agent.run(None, session=session, approvals=approvals))
    store.close()
    print(json.dumps({
        "status": result.status,
        "output": result.output,
        "pending": [c.tool_call_id for c in result.pending_approvals],
        "ran": desk.ran,
        "sent_placeholders": cycle.sent_placeholders(model),
    }))
    """
)


def resume_elsewhere(tmp_path: Path, url: str, session_id: str, approvals: dict[str, Any]) -> dict[str, Any]:
    script = tmp_path / "resume.py"
    script.write_text(RESUMER)
    done = subprocess.run(
        [sys.executable, str(script), str(HERE), url, session_id, json.dumps(approvals)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


async def test_another_process_resumes_the_paused_run_from_the_store(tmp_path: Path, desk: Desk) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    store = open_store(url)
    agent, _ = cleanup_agent(desk)
    session = Session.create(store=store)
    paused = await agent.run("clean up and report", session=session)
    store.close()
    assert [c.tool_call_id for c in paused.pending_approvals] == ["c1", "c3"]
    assert desk.ran == [("read_file", {"path": "notes.txt"})]

    # first another process decides one call only: the run stays paused on the other
    partial = resume_elsewhere(tmp_path, url, session.session_id, {"c3": ["reject", "too early"]})
    assert partial["status"] == "awaiting_approval"
    assert partial["pending"] == ["c1"]
    assert partial["ran"] == []

    # another day, a third process approves the last one with an edit
    done = resume_elsewhere(tmp_path, url, session.session_id, {"c1": ["edit", {"path": "older.log"}]})
    assert done["status"] == "completed"
    assert done["pending"] == []
    assert done["ran"] == [["delete_file", {"path": "older.log"}]]
    assert done["output"] == (
        "delete_file: deleted older.log\n"
        "read_file: contents of notes.txt\n"
        "send_email: The user rejected this call: too early"
    )
    assert done["sent_placeholders"] == []

    reopened = open_store(url)
    try:
        final = Session.open(reopened, session.session_id)
        assert placeholders_in(final.messages) == []
        assert check_invariants(final.messages, persisted=True) == []
        assert answer_counts(final.messages) == {"c1": 1, "c2": 1, "c3": 1}
    finally:
        reopened.close()


# ------------------------------------------------------------------------------ streaming


async def test_a_streamed_run_announces_the_pause(desk: Desk) -> None:
    agent, _ = one_delete(desk)
    events: list[object] = []
    async with agent.run_stream("clean up") as stream:
        async for event in stream:
            events.append(event)
    needed = [e for e in events if isinstance(e, ApprovalNeeded)]
    assert [[c.tool_call_id for c in e.calls] for e in needed] == [["c1"]]
    assert isinstance(events[-1], RunFinished)
    assert stream.result.status == "awaiting_approval"
    resumed = await agent.run(None, session=stream.result.session, approvals={"c1": Approve()})
    assert resumed.output == "delete_file: deleted a.txt"


# ------------------------------------------------------------------------------ the property

_TOOLS = ("delete_file", "read_file", "send_email_corp", "send_email_ext")
_DECISIONS = ("approve", "reject", "edit", "later")


def _call_for(call_id: str, kind: str) -> ToolCallPart:
    if kind == "delete_file":
        return ToolCallPart(tool_call_id=call_id, tool_name="delete_file", args={"path": f"{call_id}.txt"})
    if kind == "read_file":
        return ToolCallPart(tool_call_id=call_id, tool_name="read_file", args={"path": f"{call_id}.txt"})
    domain = "corp" if kind == "send_email_corp" else "ext"
    return ToolCallPart(tool_call_id=call_id, tool_name="send_email", args={"to": f"{call_id}@{domain}"})


def _key(name: str, args: dict[str, Any]) -> str:
    """The call id a recorded run belongs to (every argument starts with it)."""
    value = str(args.get("path") or args.get("to"))
    return value.split("@")[0].split(".")[0].removesuffix("-edited")


def _edited(call: ToolCallPart) -> Edit:
    if call.tool_name == "send_email":
        return Edit({"to": f"{call.tool_call_id}-edited@ext"})
    return Edit({"path": f"{call.tool_call_id}-edited.txt"})


plans = st.lists(st.lists(st.sampled_from(_TOOLS), min_size=1, max_size=4), min_size=1, max_size=3)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans, data=st.data())
def test_every_call_ends_with_one_answer_and_no_rejected_tool_ever_runs(
    plan: list[list[str]], data: st.DataObject
) -> None:
    steps = [[_call_for(f"s{i}c{j}", kind) for j, kind in enumerate(step)] for i, step in enumerate(plan)]
    every = {call.tool_call_id: call for step in steps for call in step}
    needs = {
        cid for cid, call in every.items() if call.tool_name == "delete_file" or "@ext" in str(call.args)
    }
    chosen = {cid: data.draw(st.sampled_from(_DECISIONS), label=cid) for cid in sorted(needs)}
    desk = Desk()
    model = planned_model(*steps)
    agent = Agent(model, tools=desk.tools(), capabilities=[ToolApproval()])

    async def drive() -> Any:
        result = await agent.run("go")
        asked: set[str] = set()
        for _ in range(3 * len(every) + 2):
            if result.status == "completed":
                return result
            pending = [c.tool_call_id for c in result.pending_approvals]
            assert set(pending) <= needs
            assert placeholders_in(result.session.messages) == pending
            assert check_invariants(result.session.messages) == []
            approvals: dict[str, object] = {}
            for cid in pending:
                wanted = chosen[cid]
                if wanted == "later" and cid not in asked:
                    continue  # left undecided once: it must stay pending
                approvals[cid] = {
                    "approve": Approve(),
                    "later": Approve(),
                    "reject": Reject(f"no {cid}"),
                    "edit": _edited(every[cid]),
                }[wanted]
            asked.update(pending)
            result = await agent.run(None, session=result.session, approvals=approvals)
        raise AssertionError("the run never completed")

    result = asyncio.run(drive())
    history = result.session.messages
    assert placeholders_in(history) == []
    assert check_invariants(history) == []
    assert answer_counts(history) == dict.fromkeys(every, 1)
    assert sent_placeholders(model) == []
    runs: dict[str, list[dict[str, Any]]] = {}
    for name, args in desk.ran:
        runs.setdefault(_key(name, args), []).append(args)
    for cid, call in every.items():
        decision = chosen.get(cid, "none")
        if decision == "reject":
            assert cid not in runs, f"{cid} was rejected but ran"
        elif decision == "edit":
            assert runs[cid] == [
                dict(_edited(call).args) | ({"body": ""} if "to" in call.args_as_dict() else {})
            ]
        else:
            expected = call.args_as_dict() | ({"body": ""} if call.tool_name == "send_email" else {})
            assert runs[cid] == [expected]
