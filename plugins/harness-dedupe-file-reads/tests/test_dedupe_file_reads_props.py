"""Property tests of DeduplicateFileReads over generated histories full of file reads."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import attrs
from harness_dedupe_file_reads import DeduplicateFileReads
from harness_dedupe_file_reads.keys import changes_directory, selection_covers
from hypothesis import event, given, settings
from hypothesis import strategies as st

from harness.capabilities import RequestContext
from harness.core import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    SystemPromptPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    harness_mark,
)
from harness.history import check_invariants
from harness.testing import assert_memo_matches_fresh, clearable_returns
from harness.testing.strategies import histories
from harness.tokens import TokenCounter

SPECS: list[tuple[str, dict[str, Any]]] = [
    ("read_file", {"path": "a.py"}),
    ("read_file", {"path": "./a.py"}),
    ("read_file", {"path": "b.py"}),
    ("read_file", {"path": "a.py", "offset": 10}),
    ("Read", {"file_path": "src/{x}.py"}),
    ("bash", {"command": "cat a.py"}),
    ("bash", {"command": "sed -n '1,5p' a.py"}),
    ("bash", {"command": "head -n 5 a.py"}),
    ("bash", {"command": "sed -n '2,4p' a.py"}),
    ("bash", {"command": "cd /w && sed -n '1,30p' a.py"}),
    ("bash", {"command": "tail -n 3 a.py"}),
    ("bash", {"command": "cat a.py | grep x"}),
    ("bash", {"command": "ls"}),
    ("bash", {"command": "cd src"}),
    ("grep", {"pattern": "x"}),
]
CONTENTS: list[Any] = [
    "line of the file\n" * 20,
    "another version of the file\n" * 15,
    "x",
    {"lines": ["l"] * 40},
]


@st.composite
def read_histories(draw: st.DrawFn, end_with_request: bool = True) -> list[CanonicalMessage]:
    messages = draw(histories(min_messages=1, max_messages=30, end_with_request=end_with_request))
    spec_of: dict[str, tuple[str, dict[str, Any]]] = {}
    out: list[CanonicalMessage] = []
    for message in messages:
        parts: list[Part] = []
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                tool, args = spec_of[part.tool_call_id] = draw(st.sampled_from(SPECS))
                parts.append(attrs.evolve(part, tool_name=tool, args=args))
            elif isinstance(part, ToolReturnPart) and part.tool_call_id in spec_of:
                content = draw(st.sampled_from(CONTENTS))
                parts.append(attrs.evolve(part, tool_name=spec_of[part.tool_call_id][0], content=content))
            elif isinstance(part, RetryPromptPart) and part.tool_call_id in spec_of:
                parts.append(attrs.evolve(part, tool_name=spec_of[part.tool_call_id][0]))
            else:
                parts.append(part)
        out.append(message.replace(parts=tuple(parts)))
    return out


@st.composite
def configs(draw: st.DrawFn) -> DeduplicateFileReads:
    file_key = draw(st.sampled_from(["auto", "read_tool", "shell_cat"]))
    placeholder = draw(st.sampled_from(["[superseded file read: see {path} ({call_id})]", "[old]", "{key}"]))
    covered = file_key != "read_tool" and draw(st.booleans())
    return DeduplicateFileReads(
        file_key,
        placeholder=placeholder,
        supersede_covered_ranges=covered,
        shell_keeps_directory=draw(st.booleans()),
    )


def compact(cap: DeduplicateFileReads, messages: list[CanonicalMessage]) -> RequestContext:
    ctx = RequestContext(messages=list(messages), token_counter=TokenCounter())
    asyncio.run(cap.compact(ctx, reason="property"))
    return ctx


def reads(cap: DeduplicateFileReads, messages: list[CanonicalMessage]) -> list[tuple[int, int, str, str]]:
    """(message index, part index, call id, key) of every paired return with a key, in order."""
    calls: dict[str, ToolCallPart] = {}
    found: list[tuple[int, int, str, str]] = []
    for mi, message in enumerate(messages):
        for pi, part in enumerate(message.parts):
            if isinstance(part, ToolCallPart):
                calls[part.tool_call_id] = part
            elif isinstance(part, ToolReturnPart) and part.tool_call_id in calls:
                key = cap.key_of(calls[part.tool_call_id])
                if key is not None:
                    found.append((mi, pi, part.tool_call_id, key))
    return found


def directory_changes(messages: list[CanonicalMessage]) -> list[tuple[int, int]]:
    """Positions of the returns of shell calls that may change the shell's directory."""
    calls = {p.tool_call_id: p for m in messages for p in m.parts if isinstance(p, ToolCallPart)}
    return [
        (mi, pi)
        for mi, m in enumerate(messages)
        for pi, p in enumerate(m.parts)
        if isinstance(p, ToolReturnPart)
        and p.tool_call_id in calls
        and changes_directory(calls[p.tool_call_id])
    ]


@settings(max_examples=150, deadline=None)
@given(read_histories(), configs())
def test_dedupe_keeps_the_history_valid_and_the_latest_reads(
    messages: list[CanonicalMessage], cap: DeduplicateFileReads
) -> None:
    ctx = compact(cap, messages)
    result = ctx.messages
    assert check_invariants(result) == []
    assert len(result) == len(messages)
    assert result[-1] is messages[-1]
    for before, after in zip(messages, result, strict=True):
        assert len(before.parts) == len(after.parts)
        for old, new in zip(before.parts, after.parts, strict=True):
            if isinstance(old, (UserPromptPart, SystemPromptPart, RetryPromptPart, ToolCallPart)):
                assert new is old
            if new is not old:
                assert isinstance(old, ToolReturnPart)
                assert isinstance(new, ToolReturnPart)
                assert new.tool_call_id == old.tool_call_id
    found = reads(cap, messages)
    position = {call_id: (mi, pi) for mi, pi, call_id, _ in found}
    key_of = {call_id: key for _, _, call_id, key in found}
    latest: dict[str, str] = {}
    for _mi, _pi, call_id, key in found:
        latest[key] = call_id
    barriers = directory_changes(messages)
    changed: list[str] = []
    for mi, pi, call_id, key in found:
        new = result[mi].parts[pi]
        if new is messages[mi].parts[pi]:
            continue
        if not cap.supersede_covered_ranges:
            assert call_id != latest[key]  # the latest read of every key is intact
        changed.append(call_id)
        mark = harness_mark(new)
        assert mark is not None
        assert mark["cleared"] == "dedupe_file_reads"
        assert mark["file_key"] == key
        target = mark["superseded_by"]
        assert position[target] > (mi, pi)  # only ever superseded by a later read
        target_mi, target_pi = position[target]
        assert result[target_mi].parts[target_pi] is messages[target_mi].parts[target_pi]  # target intact
        relative_shell = json.loads(key)[0] == "shell" and not json.loads(key)[3].startswith("/")
        if relative_shell and cap.shell_keeps_directory:
            # No directory change between a relative shell read and the read it points to.
            assert not any((mi, pi) < where < position[target] for where in barriers)
        if key_of[target] == key:
            if not relative_shell or not cap.shell_keeps_directory:
                assert target == latest[key]
        else:
            assert cap.supersede_covered_ranges
            assert mark["covering_key"] == key_of[target]
            earlier, later = json.loads(key), json.loads(key_of[target])
            assert earlier[0] == later[0] == "shell"
            assert (earlier[1], earlier[3]) == (later[1], later[3])  # same presentation, same file
            assert selection_covers(later[2], earlier[2])
        assert isinstance(new, ToolReturnPart)
        assert isinstance(new.content, str)
    event("superseded some reads" if changed else "nothing superseded")
    if changed:
        [reported] = ctx.events
        assert list(reported.cleared_tool_call_ids) == changed
        assert reported.tokens_after < reported.tokens_before
    else:
        assert ctx.events == []


@settings(max_examples=150, deadline=None)
@given(read_histories(), configs())
def test_dedupe_is_idempotent(messages: list[CanonicalMessage], cap: DeduplicateFileReads) -> None:
    first = compact(cap, messages).messages
    again = compact(cap, first)
    assert again.events == []
    assert all(a is b for a, b in zip(again.messages, first, strict=True))


@settings(max_examples=100, deadline=None)
@given(read_histories(end_with_request=False), configs())
def test_histories_ending_with_a_response_stay_valid(
    messages: list[CanonicalMessage], cap: DeduplicateFileReads
) -> None:
    result = compact(cap, messages).messages
    assert check_invariants(result) == []
    assert len(result) == len(messages)


@settings(max_examples=100, deadline=None)
@given(histories(min_messages=1, max_messages=30))
def test_plain_generated_histories_are_valid_after_dedupe(messages: list[CanonicalMessage]) -> None:
    result = compact(DeduplicateFileReads(), messages).messages
    assert check_invariants(result) == []
    assert result[-1] is messages[-1]


@settings(max_examples=120, deadline=None)
@given(read_histories(), configs(), st.data())
def test_incremental_passes_match_full_passes(
    messages: list[CanonicalMessage], cap: DeduplicateFileReads, data: st.DataObject
) -> None:
    """Replaying a run request by request, the remembered state changes no outcome.

    ``cap`` keeps its memo between requests (and usually checks only appended messages);
    a fresh copy of it per request always scans everything. Now and then another
    strategy clears a return in between, which must invalidate the memo.
    """

    def interfere(history: list[CanonicalMessage]) -> tuple[int, int] | None:
        spots = clearable_returns(history)
        if spots and data.draw(st.integers(0, 3)) == 0:
            return data.draw(st.sampled_from(spots))
        return None

    assert_memo_matches_fresh(cap, messages, interfere=interfere)
