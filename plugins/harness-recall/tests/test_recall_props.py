"""Properties of placeholders with recall on, over generated histories in real (in-memory) SQLite stores."""

from __future__ import annotations

import re
from collections.abc import Mapping

from harness_clear_tool_results import CLEARED_ARGS_KEY, ClearToolResults
from harness_dedupe_file_reads import DeduplicateFileReads
from harness_recall import Recall, read_reference
from harness_recall.render import part_text
from harness_summarizing import SummarizingCompaction, find_summary_parts
from hypothesis import event, given, settings
from hypothesis import strategies as st

from harness import (
    CanonicalMessage,
    RequestContext,
    Session,
    TokenCounter,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    compact_sync,
)
from harness.history import check_invariants
from harness.stores import SqliteStore, open_store
from harness.testing import assert_no_split_tool_pairs, assert_request_kept, assert_transformation_safe
from harness.testing.strategies import histories

HINT = re.compile(r" \[recall: ([^\]]+)\]$")


def run(messages: list[CanonicalMessage], stack: list[object]) -> tuple[list[CanonicalMessage], Session]:
    store = open_store("sqlite:///:memory:")
    session = Session.create(store=store)
    session.messages = list(messages)
    session.checkpoint()
    ctx = RequestContext(messages=list(messages), token_counter=TokenCounter(), session=session)
    after = compact_sync(messages, [Recall(), *stack], context=ctx, force=True).messages
    return after, session


@settings(max_examples=60, deadline=None)
@given(
    histories(min_messages=3, max_messages=31, max_output_chars=400),
    st.integers(0, 3),
    st.booleans(),
)
def test_references_never_split_a_call_from_its_result_and_name_the_original(
    messages: list[CanonicalMessage], keep_pairs: int, inputs: bool
) -> None:
    stack: list[object] = [
        DeduplicateFileReads(),
        ClearToolResults(max_messages=1, keep_pairs=keep_pairs, clear_tool_inputs=inputs),
    ]
    after, session = run(messages, stack)
    store = session.store
    assert isinstance(store, SqliteStore)
    try:
        assert check_invariants(after) == []
        assert_transformation_safe(messages, after)
        originals = {
            (type(p), p.tool_call_id): p
            for m in messages
            for p in m.parts
            if isinstance(p, ToolReturnPart | ToolCallPart)
        }
        named = 0
        for message in after:
            for part in message.parts:
                if isinstance(part, ToolReturnPart):
                    placeholder = str(part.content)
                elif isinstance(part, ToolCallPart) and isinstance(part.args, Mapping):
                    placeholder = str(part.args.get(CLEARED_ARGS_KEY, ""))
                else:
                    continue
                match = HINT.search(placeholder)
                if match is None:
                    continue
                named += 1
                answer = read_reference(session, match.group(1), max_chars=100_000)
                assert answer.split("\n", 1)[1] == part_text(originals[type(part), part.tool_call_id])
        event(f"placeholders with a reference: {min(named, 3)}{'+' if named >= 3 else ''}")
    finally:
        store.close()


@settings(max_examples=40, deadline=None)
@given(histories(min_messages=7, max_messages=31, max_output_chars=200), st.integers(1, 6))
def test_a_summary_keeps_pairs_and_its_range_reads_back(messages: list[CanonicalMessage], keep: int) -> None:
    stack: list[object] = [
        ClearToolResults(max_messages=1, keep_pairs=1),
        SummarizingCompaction(keep_messages=keep, summarizer="digest"),
    ]
    after, session = run(messages, stack)
    store = session.store
    assert isinstance(store, SqliteStore)
    try:
        assert check_invariants(after) == []
        assert_no_split_tool_pairs(messages, after)
        assert_request_kept(messages, after)
        for mi, pi in find_summary_parts(after):
            summary = after[mi].parts[pi]
            assert isinstance(summary, UserPromptPart)
            header = summary.text.split("\n", 1)[0]
            match = re.search(r" \[recall: (r0-r\d+|r0)\]$", header)
            assert match is not None, header
            assert read_reference(session, match.group(1), max_chars=500).startswith(match.group(1))
    finally:
        store.close()
