"""The marker names the recall reference (real harness-recall, real SQLite session store)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness_clamp_oversized import ClampOversizedMessages
from harness_recall import Recall, read_reference

from harness import Agent, CanonicalMessage, Part, Session, ToolCallPart, ToolReturnPart, UserPromptPart
from harness.core import harness_mark
from harness.models.function import FunctionInfo, FunctionModel
from harness.session import SessionStore
from harness.stores import open_store

BIG = "".join(f"test_{i:04d} ... {'FAILED' if i == 900 else 'ok'}\n" for i in range(5000))
MARKER = re.compile(r'recall\("([^"]+)", offset=(\d+)\) reads them\]')


def run_tests() -> str:
    """Run the test suite."""
    return BIG


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    opened = open_store(f"sqlite:///{tmp_path}/sessions.db")
    yield opened
    opened.close()


class Script:
    """Runs the tests, recalls what the marker names, then answers with what recall returned."""

    def __init__(self) -> None:
        self.markers: list[str] = []
        self.recalled: list[str] = []

    def __call__(self, messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage | str:
        last = last_part(messages)
        if isinstance(last, UserPromptPart):
            return CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"t{len(messages)}", tool_name="run_tests", args={})
            )
        assert isinstance(last, ToolReturnPart)
        if last.tool_name == "run_tests":
            assert isinstance(last.content, str)
            self.markers.append(last.content)
            found = MARKER.search(last.content)
            assert found is not None, last.content[-300:]
            args = {"ref": found[1], "offset": int(found[2])}
            return CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"r{len(messages)}", tool_name="recall", args=args)
            )
        assert isinstance(last.content, str)
        self.recalled.append(last.content)
        return "done"


def last_part(messages: list[CanonicalMessage]) -> Part:
    """The newest part of the history (request-scoped notes, sent with this request only, skipped)."""
    return [p for p in messages[-1].parts if not (harness_mark(p) or {}).get("request_scoped")][-1]


def returns(messages: list[CanonicalMessage], tool: str) -> list[ToolReturnPart]:
    return [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart) and p.tool_name == tool]


async def test_the_marker_names_the_reference_and_recall_reads_the_cut_text(store: SessionStore) -> None:
    script = Script()
    recall = Recall(max_chars=4000)
    agent = Agent(
        FunctionModel(script),
        tools=[run_tests],
        capabilities=[recall, ClampOversizedMessages(max_tokens=1000)],
    )
    session = Session.create(store=store)
    result = await agent.run("run the tests", session=session)
    assert result.output == "done"
    [marker] = script.markers
    found = MARKER.search(marker)
    assert found is not None
    ref, offset = found[1], int(found[2])
    assert re.fullmatch(r"r\d+\.0", ref), ref
    head = marker[: marker.index("[... ")]
    assert offset == len(head.rstrip("\n")) or BIG.startswith(head)
    assert BIG[:offset] == head  # the head is the original up to the offset
    # recall("r..", offset=...) reads the original from exactly where the cut starts
    [recalled] = script.recalled
    assert BIG[offset : offset + 2000] in recalled
    assert (
        read_reference(result.session, ref, offset, max_chars=4000)
        .split(":\n", 1)[1]
        .startswith(BIG[offset : offset + 3000])
    )
    # the stored view holds the clamped result; the log the original
    [stored] = returns(Session.open(store, result.session.session_id).messages, "run_tests")
    assert stored.content == marker


async def test_without_recall_a_stored_session_says_its_log_keeps_the_text(store: SessionStore) -> None:
    seen: list[str] = []

    def model(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage | str:
        last = last_part(messages)
        if isinstance(last, ToolReturnPart):
            seen.append(str(last.content))
            return "done"
        return CanonicalMessage.response(ToolCallPart(tool_call_id="t1", tool_name="run_tests", args={}))

    agent = Agent(
        FunctionModel(model), tools=[run_tests], capabilities=[ClampOversizedMessages(max_tokens=1000)]
    )
    await agent.run("go", session=Session.create(store=store))
    await agent.run("go")  # no store: the original is not kept anywhere
    stored, unstored = seen
    assert "cut from the middle of this tool result; the full text is in this session's stored log]" in stored
    assert "cut from the middle of this tool result; the full text was not kept]" in unstored


async def test_an_old_prompt_is_clamped_with_its_own_reference(store: SessionStore) -> None:
    def model(messages: list[CanonicalMessage], info: FunctionInfo) -> str:
        return "noted"

    agent = Agent(FunctionModel(model), capabilities=[Recall(), ClampOversizedMessages(max_tokens=500)])
    session = Session.create(store=store)
    pasted = "Here is the log:\n" + BIG[:30_000]
    first = await agent.run(pasted, session=session)
    second = await agent.run("what failed?", session=first.session)
    prompt = next(p for p in second.all_messages[0].parts if isinstance(p, UserPromptPart))
    assert isinstance(prompt.content, str)
    found = MARKER.search(prompt.content)
    assert found is not None, prompt.content
    assert found[1] == "r0.0"  # the first message of the log, its first part
    offset = int(found[2])
    assert pasted[:offset] == prompt.content[:offset]
    assert "test_0900 ... FAILED" not in prompt.content
    page = read_reference(second.session, found[1], offset, max_chars=200_000)
    assert "test_0900 ... FAILED" in page
