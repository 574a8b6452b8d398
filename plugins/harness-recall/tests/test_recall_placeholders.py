"""Placeholders with and without recall, through harness.compact on stored sessions."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import pytest
from harness_clear_tool_results import DEFAULT_PLACEHOLDER, ClearToolResults
from harness_dedupe_file_reads import DeduplicateFileReads
from harness_recall import COMPACTION_CAPABILITIES, Recall, SessionReferences, read_reference
from harness_sliding_window import SlidingWindow
from harness_summarizing import SummarizingCompaction, find_summary_parts
from harness_tiered import TieredCompaction

from harness import (
    Agent,
    CanonicalMessage,
    PluginManager,
    RequestContext,
    Session,
    TextPart,
    TokenCounter,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    compact,
    dump_messages,
    load_messages,
)
from harness.history import check_invariants
from harness.models.function import FunctionModel
from harness.testing import assert_plugin_valid

Stored = Callable[[Sequence[CanonicalMessage]], Session]
HINT = re.compile(r" \[recall: ([^\]]+)\]$")


def content(i: int) -> str:
    return f"output {i} marker-{i}-kumquat\n" + "row of data\n" * 40


def steps(count: int, *, path: Callable[[int], str] = lambda i: f"f{i}.py") -> list[CanonicalMessage]:
    messages = [CanonicalMessage.user("task")]
    for i in range(count):
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"c{i}", tool_name="read_file", args={"path": path(i)})
            )
        )
        messages.append(
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=f"c{i}", tool_name="read_file", content=content(i))
            )
        )
    messages.append(CanonicalMessage.response(TextPart("ok")))
    messages.append(CanonicalMessage.user("next"))
    return messages


def context(messages: Sequence[CanonicalMessage], session: Session | None) -> RequestContext:
    return RequestContext(messages=list(messages), token_counter=TokenCounter(), session=session)


async def compacted(
    messages: Sequence[CanonicalMessage], capabilities: Sequence[object], session: Session | None
) -> list[CanonicalMessage]:
    result = await compact(messages, capabilities, context=context(messages, session), force=True)
    assert check_invariants(result.messages) == []
    return result.messages


def returns(messages: Sequence[CanonicalMessage]) -> list[ToolReturnPart]:
    return [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]


def original(session: Session, placeholder: object) -> str:
    """What recall answers for the reference at the end of a placeholder, without its header."""
    match = HINT.search(str(placeholder))
    assert match is not None, placeholder
    return read_reference(session, match.group(1), max_chars=100_000).split("\n", 1)[1]


async def test_cleared_results_name_their_original_and_recall_returns_it(stored: Stored) -> None:
    messages = steps(4)
    session = stored(messages)
    after = await compacted(messages, [Recall(), ClearToolResults(max_messages=2, keep_pairs=1)], session)
    cleared = returns(after)[:3]
    assert [r.content for r in cleared] == [
        f"{DEFAULT_PLACEHOLDER} [recall: r{2 * i + 2}.0]" for i in range(3)
    ]
    assert [original(session, r.content) for r in cleared] == [content(i) for i in range(3)]


async def test_superseded_reads_name_the_older_read(stored: Stored) -> None:
    messages = steps(3, path=lambda i: "same.py")
    session = stored(messages)
    after = await compacted(messages, [Recall(), DeduplicateFileReads()], session)
    pointers = returns(after)[:2]
    assert pointers[0].content == (
        "[superseded file read: see the later read of same.py (call c2)] [recall: r2.0]"
    )
    assert [original(session, p.content) for p in pointers] == [content(0), content(1)]


async def test_a_summary_names_the_summarized_range(stored: Stored) -> None:
    messages = steps(6)
    session = stored(messages)
    after = await compacted(
        messages, [Recall(), SummarizingCompaction(keep_messages=4, summarizer="digest")], session
    )
    ((mi, pi),) = find_summary_parts(after)
    summary = after[mi].parts[pi]
    assert isinstance(summary, UserPromptPart)
    header = summary.text.split("\n", 1)[0]
    match = re.search(r" \[recall: (r0-r(\d+))\]$", header)
    assert match is not None, header
    recalled = read_reference(session, match.group(1), max_chars=100_000)
    for i in range(int(match.group(2)) // 2):  # every summarized result is in the range's text
        assert f"marker-{i}-kumquat" in recalled


async def test_a_tier_of_tiered_compaction_gets_references_too(stored: Stored) -> None:
    messages = steps(4)
    session = stored(messages)
    tiered = TieredCompaction([ClearToolResults(max_messages=2, keep_pairs=1)], target_tokens=50)
    after = await compacted(messages, [tiered, Recall()], session)  # listed last, runs first
    assert returns(after)[0].content == f"{DEFAULT_PLACEHOLDER} [recall: r2.0]"


def stacks() -> list[Callable[[], list[object]]]:
    return [
        lambda: [ClearToolResults(max_messages=2, keep_pairs=1, clear_tool_inputs=True)],
        lambda: [DeduplicateFileReads()],
        lambda: [SummarizingCompaction(keep_messages=4, summarizer="digest")],
        lambda: [
            DeduplicateFileReads(),
            ClearToolResults(max_messages=2, keep_pairs=0),
            SlidingWindow(max_messages=6, keep_messages=4),
        ],
    ]


@pytest.mark.parametrize("stack", stacks())
async def test_without_recall_placeholders_are_byte_for_byte_unchanged(
    stored: Stored, stack: Callable[[], list[object]]
) -> None:
    messages = steps(5, path=lambda i: f"f{i % 2}.py")
    bare = await compacted(messages, stack(), None)
    on_stored_session = await compacted(messages, stack(), stored(messages))
    with_recall_without_store = await compacted(messages, [Recall(), *stack()], Session())
    assert bare != messages
    assert on_stored_session == bare
    assert with_recall_without_store == bare
    assert "[recall:" not in repr(bare)


async def test_recall_sets_no_references_without_a_store_and_one_object_per_stored_session(
    stored: Stored,
) -> None:
    recall = Recall()
    bare = context(steps(1), Session())
    await recall.before_model_request(bare)
    assert bare.references is None
    none = context(steps(1), None)
    await recall.before_model_request(none)
    assert none.references is None
    session = stored(steps(1))
    first, second = context(steps(1), session), context(steps(1), session)
    await recall.before_model_request(first)
    await recall.before_model_request(second)
    assert isinstance(first.references, SessionReferences)
    assert first.references is second.references
    other = context(steps(1), stored(steps(1)))
    await recall.before_model_request(other)
    assert other.references is not first.references


async def test_a_part_another_capability_rewrote_in_the_same_request_keeps_its_log_reference(
    stored: Stored,
) -> None:
    messages = [
        CanonicalMessage.user("task"),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="a", tool_name="read_file", args={"path": "x.py"}),
            ToolCallPart(tool_call_id="b", tool_name="bash", args={"command": "make"}),
        ),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="a", tool_name="read_file", content=content(0)),
            ToolReturnPart(tool_call_id="b", tool_name="bash", content=content(1)),
        ),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="c", tool_name="read_file", args={"path": "x.py"})
        ),
        CanonicalMessage.request(ToolReturnPart(tool_call_id="c", tool_name="read_file", content=content(2))),
        CanonicalMessage.response(TextPart("ok")),
        CanonicalMessage.user("next"),
    ]
    session = stored(messages)
    stack = [Recall(), DeduplicateFileReads(), ClearToolResults(max_messages=2, keep_pairs=1)]
    after = await compacted(messages, stack, session)
    superseded, cleared = after[2].parts
    assert isinstance(superseded, ToolReturnPart)
    assert isinstance(cleared, ToolReturnPart)
    assert str(superseded.content).endswith(" [recall: r2.0]")
    # the message is dedupe's rewrite (no seq of its own); the part still gets its log place
    assert cleared.content == f"{DEFAULT_PLACEHOLDER} [recall: r2.1]"
    assert original(session, cleared.content) == content(1)


async def test_without_a_known_seq_a_result_is_named_by_its_call_id(stored: Stored) -> None:
    messages = steps(3)
    session = stored(messages)
    copies = load_messages(dump_messages(messages))  # equal messages, not the logged objects
    after = await compacted(copies, [Recall(), ClearToolResults(max_messages=2, keep_pairs=1)], session)
    assert [r.content for r in returns(after)[:2]] == [
        f"{DEFAULT_PLACEHOLDER} [recall: c0]",
        f"{DEFAULT_PLACEHOLDER} [recall: c1]",
    ]
    assert original(session, returns(after)[1].content) == content(1)


def test_recall_is_a_valid_plugin_that_runs_before_every_compaction_capability() -> None:
    assert_plugin_valid(Recall, known_capabilities=COMPACTION_CAPABILITIES)
    manager = PluginManager()
    manager.load_entrypoint_plugins()
    available = manager.available_capabilities()
    assert available["recall"] is Recall
    assert set(COMPACTION_CAPABILITIES) <= set(available)  # the names are the real ones
    for name in COMPACTION_CAPABILITIES:
        assert getattr(available[name], "name", None) == name


def test_a_stack_string_builds_recall_first_with_its_tools() -> None:
    agent = Agent(
        FunctionModel(lambda m, i: "x"), capabilities="clear_tool_results:keep_pairs=3 recall:max_chars=2000"
    )
    assert [type(c).__name__ for c in agent.plugin_manager.capabilities] == ["Recall", "ClearToolResults"]
    assert {"recall", "search_history"} <= set(agent.tools)
    assert [
        t.name
        for t in Agent(FunctionModel(lambda m, i: "x"), capabilities="recall:search=false").tools.values()
    ] == ["recall"]


async def test_a_part_of_an_overlay_is_named_by_its_place_in_the_log_message(stored: Stored) -> None:
    messages = [
        CanonicalMessage.user("task"),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="a", tool_name="bash", args={"command": "one"}),
            ToolCallPart(tool_call_id="b", tool_name="bash", args={}),
        ),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="a", tool_name="bash", content=content(0)),
            ToolReturnPart(tool_call_id="b", tool_name="bash", content=content(1)),
        ),
        CanonicalMessage.response(TextPart("ok")),
        CanonicalMessage.user("next"),
    ]
    session = stored(messages)
    # an earlier edit put a part in front of the results: the overlay's parts moved by one
    overlay = messages[2].replace(parts=(UserPromptPart("(note)"), *messages[2].parts))
    session.note_overlays([overlay])
    session.messages = [*messages[:2], overlay, *messages[3:]]
    session.checkpoint()
    assert session.log_seq_of(overlay) == 2
    after = await compacted(
        session.messages, [Recall(), ClearToolResults(max_messages=2, keep_pairs=0)], session
    )
    cleared = returns(after[2:3])
    assert [p.content for p in cleared] == [
        f"{DEFAULT_PLACEHOLDER} [recall: r2.0]",
        f"{DEFAULT_PLACEHOLDER} [recall: r2.1]",
    ]
    assert original(session, cleared[1].content) == content(1)
