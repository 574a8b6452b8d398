"""Continuity across compaction in real runs: the receipt, anchors, pausing, pins, on_compaction."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harness_clear_tool_results import ClearToolResults
from harness_recall import Recall, read_reference
from harness_sliding_window import SlidingWindow

from harness import Agent, CanonicalMessage, Session, TextPart, ToolCallPart, UserPromptPart
from harness.capabilities import Capability, CompactionEvent, RequestContext
from harness.core import harness_mark, is_pinned
from harness.errors import CapabilityError
from harness.hooks import hookimpl
from harness.models.function import FunctionInfo, FunctionModel
from harness.run.continuity import ANCHORS_KEY, PAUSED_NOTE_KEY
from harness.stores import open_store

RECEIPT = "[harness] The conversation was compacted before this request:"


def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: The file.
    """
    return f"contents of {path}\n" + "line\n" * 60


class Reader:
    """Reads ``reads`` files, one call per response, then answers "done"; records what it was sent."""

    def __init__(self, reads: int) -> None:
        self.reads = reads
        self.sent: list[list[CanonicalMessage]] = []

    def __call__(self, messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage | str:
        self.sent.append(list(messages))
        done = sum(1 for m in messages if m.kind == "response" and m.tool_calls)
        step = len(self.sent)
        if done >= self.reads or step > self.reads:
            return "done"
        return CanonicalMessage.response(
            ToolCallPart(tool_call_id=f"c{step}", tool_name="read_file", args={"path": f"f{step}.py"})
        )


def notes(messages: list[CanonicalMessage]) -> list[str]:
    """The continuity notes of one sent request."""
    found: list[str] = []
    for part in messages[-1].parts:
        mark = harness_mark(part)
        if mark is not None and mark.get("source") == "continuity" and isinstance(part, UserPromptPart):
            assert mark.get("request_scoped") is True
            found.append(str(part.content))
    return found


def agent(script: Reader, *capabilities: object, **options: Any) -> Agent:
    return Agent(FunctionModel(script), tools=[read_file], capabilities=list(capabilities), **options)


async def test_the_request_after_a_compaction_carries_a_receipt_that_is_never_stored() -> None:
    script = Reader(6)
    session = Session()
    result = await agent(script, SlidingWindow(max_messages=6, keep_messages=3)).run(
        "read all", session=session
    )
    assert result.output == "done"
    with_notes = [i for i, sent in enumerate(script.sent) if notes(sent)]
    compacted = [i for i, sent in enumerate(script.sent) if len(sent) < 2 * i + 1]
    assert with_notes
    assert with_notes == compacted
    (note,) = notes(script.sent[with_notes[0]])
    lines = note.splitlines()
    assert lines[0] == RECEIPT
    assert lines[1].startswith("- sliding_window: ")
    assert "messages removed or merged" in lines[1]
    assert lines[2] == (
        "What was removed is no longer in this context; re-run a tool if you need its output again."
    )
    stored = [p for m in session.messages for p in m.parts if RECEIPT in str(getattr(p, "content", ""))]
    assert stored == []


async def test_options_turn_the_receipt_and_anchors_off() -> None:
    script = Reader(6)
    window = SlidingWindow(max_messages=6, keep_messages=3)
    await agent(script, window, compaction_receipt=False, anchors=False).run("read all", session=Session())
    assert all(notes(sent) == [] for sent in script.sent)


async def test_a_constraint_the_window_dropped_is_re_sent_verbatim_and_the_task_is_not() -> None:
    store_session = Session()
    first = Reader(0)
    await agent(first).run("Fix the parser in src/parse.py.", session=store_session)
    script = Reader(6)
    window = SlidingWindow(max_messages=6, keep_messages=3)
    constraint = "You must keep the public API unchanged."
    await agent(script, window).run(f"Carry on. {constraint}", session=store_session)
    compacting = [sent for sent in script.sent if notes(sent)]
    assert compacting
    (note,) = notes(compacting[0])
    assert f"Constraint: {constraint}" in note.splitlines()
    assert "Task:" not in note  # the window keeps the first request: the task is still there
    assert store_session.metadata[ANCHORS_KEY][0] == ["task", "Fix the parser in src/parse.py."]


async def test_the_latest_plan_is_re_sent_when_its_call_was_dropped() -> None:
    class Planner(Reader):
        def __call__(self, messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage | str:
            if not self.sent:
                self.sent.append(list(messages))
                return CanonicalMessage.response(
                    ToolCallPart(
                        tool_call_id="plan1", tool_name="update_plan", args={"steps": ["read", "fix"]}
                    )
                )
            return super().__call__(messages, info)

    def update_plan(steps: list[str]) -> str:
        """Write the plan.

        Args:
            steps: The steps.
        """
        return "ok"

    script = Planner(6)
    model = FunctionModel(script)
    window = SlidingWindow(max_messages=6, keep_messages=3)
    await Agent(model, tools=[read_file, update_plan], capabilities=[window]).run("go", session=Session())
    with_notes = [n for sent in script.sent for n in notes(sent)]
    assert any('Latest plan: update_plan: {"steps": ["read", "fix"]}' in n for n in with_notes)


async def test_the_receipt_names_recall_references_that_resolve(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/s.db")
    try:
        session = Session.create(store=store)
        script = Reader(6)
        await agent(script, ClearToolResults(max_messages=6, keep_pairs=1), Recall()).run(
            "read", session=session
        )
        (note,) = next(notes(sent) for sent in script.sent if notes(sent))
        assert "- clear_tool_results: " in note
        assert "tool result" in note
        recovery = note.splitlines()[-1]
        assert recovery.startswith("Originals are kept: call the recall tool with a reference")
        ref = recovery.split("for example ")[1].split(",")[0].rstrip(".")
        assert read_reference(session, ref, max_chars=10_000).endswith(read_file("f1.py"))
    finally:
        store.close()


async def test_pause_after_compaction_ends_the_run_and_a_new_process_continues(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    store = open_store(url)
    script = Reader(6)
    window = SlidingWindow(max_messages=6, keep_messages=3)
    try:
        session = Session.create(store=store)
        paused = await agent(script, window, pause_after_compaction=True).run("read all", session=session)
        assert paused.status == "paused_after_compaction"
        assert paused.output is None
        assert paused.all_messages[-1].is_request  # the compacted request, not sent yet
        sent_before = len(script.sent)
        session_id = session.session_id
    finally:
        store.close()
    reopened_store = open_store(url)
    try:
        reopened = Session.open(reopened_store, session_id)
        assert isinstance(reopened.metadata[PAUSED_NOTE_KEY], str)
        assert reopened.messages == paused.all_messages
        resumed = await agent(script, SlidingWindow(max_messages=6, keep_messages=3)).run(
            None, session=reopened
        )
        assert resumed.status == "completed"
        assert resumed.output == "done"
        (note,) = notes(script.sent[sent_before])  # the note of the paused request is sent on resume
        assert note.startswith(RECEIPT)
        assert PAUSED_NOTE_KEY not in reopened.metadata
    finally:
        reopened_store.close()


async def test_pausing_can_name_the_capabilities_whose_compactions_pause() -> None:
    clear = ClearToolResults(max_messages=4, keep_pairs=1)
    window = SlidingWindow(max_messages=12, keep_messages=6)
    only_window = await agent(Reader(8), clear, window, pause_after_compaction=["sliding_window"]).run(
        "read all", session=Session()
    )
    first_clear = await agent(Reader(8), clear, window, pause_after_compaction=["clear_tool_results"]).run(
        "read all", session=Session()
    )
    assert only_window.status == first_clear.status == "paused_after_compaction"
    assert only_window.iterations > first_clear.iterations  # clearing fires before the window does


async def test_a_capability_can_ask_to_pause_after_its_own_compactions() -> None:
    class PausingWindow(SlidingWindow):
        pause_after_compaction = True

    result = await agent(Reader(6), PausingWindow(max_messages=6, keep_messages=3)).run(
        "go", session=Session()
    )
    assert result.status == "paused_after_compaction"


def test_bad_pause_settings_are_refused() -> None:
    with pytest.raises(TypeError, match="pause_after_compaction"):
        Agent(FunctionModel(Reader(0)), pause_after_compaction="sliding_window")
    with pytest.raises(TypeError, match="plan_tools"):
        Agent(FunctionModel(Reader(0)), plan_tools="todo")


async def test_on_compaction_can_add_request_scoped_content_for_the_next_request() -> None:
    class Announcer:
        @hookimpl
        def on_compaction(self, ctx: RequestContext, event: CompactionEvent) -> None:
            ctx.add_request_scoped(UserPromptPart(f"note: {event.strategy} ran"), source="announcer")

    script = Reader(6)
    ag = agent(script, SlidingWindow(max_messages=6, keep_messages=3))
    ag.plugin_manager.register(Announcer())
    session = Session()
    await ag.run("go", session=session)
    scoped = [p for sent in script.sent for p in sent[-1].parts if "note: sliding_window ran" in str(p)]
    assert scoped
    assert all("note:" not in str(p) for m in session.messages for p in m.parts)


class DropFirst(Capability):
    name = "drop_first"

    @hookimpl
    async def before_model_request(self, ctx: RequestContext) -> None:
        first = ctx.messages[0]
        if len(ctx.messages) > 3 and first.parts[0] != UserPromptPart("(dropped)"):
            edited = CanonicalMessage.request(UserPromptPart("(dropped)"), *first.parts[1:])
            ctx.replace_messages([edited, *ctx.messages[1:]], strategy=self.name, reason="test")


async def test_pin_anchors_makes_the_guard_refuse_a_capability_that_drops_the_task() -> None:
    session = Session()
    with pytest.raises(CapabilityError, match="lost_pinned_part") as info:
        await agent(Reader(4), DropFirst(), pin_anchors=True).run("the task", session=session)
    assert info.value.capability == "drop_first"
    first = session.messages[0].parts[0]
    assert isinstance(first, UserPromptPart)
    assert first.content == "the task"
    assert is_pinned(first)


async def test_without_pins_the_same_capability_may_drop_the_task() -> None:
    result = await agent(Reader(4), DropFirst()).run("the task", session=Session())
    assert result.output == "done"
    assert not any(
        isinstance(p, UserPromptPart) and p.content == "the task" for p in result.all_messages[0].parts
    )
    assert isinstance(result.all_messages[-1].parts[0], TextPart)


async def test_saved_anchors_are_bounded_so_a_pasted_log_is_not_kept_whole(tmp_path: Path) -> None:
    """A 256 kB prompt is saved in the session's metadata as its head and tail, not verbatim."""
    pasted = "Fix the failure in this log:\n" + "".join(
        f"line {i} of the pasted log\n" for i in range(10_000)
    )
    assert len(pasted) > 256_000
    store = open_store(f"sqlite:///{tmp_path}/sessions.db")
    session = Session.create(store=store, session_id="pasted")
    await agent(Reader(6), SlidingWindow(max_messages=6, keep_messages=3)).run(pasted, session=session)
    saved = Session.open(store, "pasted").metadata[ANCHORS_KEY]
    assert saved[0][0] == "task"
    assert saved[0][1].startswith("Fix the failure in this log:\nline 0 of")
    assert "characters not repeated" in saved[0][1]
    assert all(len(text) <= 4_064 for _, text in saved)
    assert store.head("pasted").metadata[ANCHORS_KEY] == saved
    store.close()
