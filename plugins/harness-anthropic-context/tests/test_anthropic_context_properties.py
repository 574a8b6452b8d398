"""Properties of what the capability sends: compaction blocks, their portable form, and the wire.

Histories come from ``harness.testing.strategies.histories`` with compaction blocks (with or
without a summary) put into random responses, some of them compaction-only responses carrying
the pause text. Whatever the history, the request sent to another provider is valid, keeps
every tool pair, user prompt and pinned part, carries every summary, and the request to
Anthropic holds every block exactly as received, also after a wire-format round trip.
"""

from __future__ import annotations

import itertools
from typing import Any

from harness_anthropic_context import (
    COMPACTION_KIND,
    PAUSE_TEXT,
    SUMMARY_PREFIX,
    compaction_parts,
    portable_messages,
    sendable_messages,
    with_pause_text,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import dump_messages, load_messages, pin
from harness.core import CanonicalMessage, TextPart, UnknownPart, lost_pins
from harness.history import check_invariants
from harness.models.anthropic import to_anthropic_messages
from harness.models.openai import to_openai_messages
from harness.testing import assert_transformation_safe
from harness.testing.strategies import histories

SUMMARIES = st.one_of(st.none(), st.text(min_size=1, max_size=40).filter(str.strip))


def block(summary: str | None, number: int) -> dict[str, Any]:
    return {
        "type": "compaction",
        "content": summary,
        "encrypted_content": f"opaque-{number}==",
        "signature": f"sig-{number}",
    }


@st.composite
def with_compactions(draw: st.DrawFn) -> tuple[list[CanonicalMessage], list[dict[str, Any]]]:
    """A valid history with compaction blocks at the front of some responses; the blocks put in."""
    messages = draw(histories(min_messages=3, max_messages=24))
    blocks: list[dict[str, Any]] = []
    result: list[CanonicalMessage] = []
    for index, message in enumerate(messages):
        if message.kind == "response" and draw(st.booleans()):
            data = block(draw(SUMMARIES), index)
            blocks.append(data)
            part = UnknownPart(COMPACTION_KIND, data={**data, "part_kind": COMPACTION_KIND})
            if not message.tool_calls and draw(st.booleans()):  # a pause: the block alone
                paused = with_pause_text(CanonicalMessage.response(part))
                assert paused is not None
                message = paused
            else:
                message = message.replace(parts=(part, *message.parts))
        if index == 0 and draw(st.booleans()):
            message = pin(message, "task")
        result.append(message)
    return result, blocks


@settings(max_examples=150, deadline=None)
@given(with_compactions())
def test_another_provider_gets_a_valid_request_with_every_summary(
    case: tuple[list[CanonicalMessage], list[dict[str, Any]]],
) -> None:
    messages, blocks = case
    assert check_invariants(messages) == []
    sent = portable_messages(messages)
    assert_transformation_safe(messages, sent)
    assert check_invariants(sent) == []
    assert lost_pins(messages, sent) == []
    assert not any(compaction_parts(m) for m in sent)
    texts = [p.content for m in sent for p in m.parts if isinstance(p, TextPart)]
    assert PAUSE_TEXT not in texts
    for data in blocks:
        if data["content"] is not None:
            assert f"{SUMMARY_PREFIX}\n{data['content']}" in texts
    assert all(new is old for new, old in zip(sent, messages, strict=True) if not compaction_parts(old))
    to_openai_messages(sent)  # maps without raising


@settings(max_examples=150, deadline=None)
@given(with_compactions())
def test_anthropic_gets_every_block_verbatim_also_after_a_wire_round_trip(
    case: tuple[list[CanonicalMessage], list[dict[str, Any]]],
) -> None:
    messages, blocks = case
    loaded = load_messages(dump_messages(messages))
    assert loaded == messages
    for history in (messages, loaded):
        sent = sendable_messages(history, anthropic=True)
        assert_transformation_safe(history, sent)
        payload = to_anthropic_messages(sent)
        found = [b for turn in payload.messages for b in turn["content"] if b["type"] == "compaction"]
        assert found == blocks
        assert [list(b) for b in found] == [list(b) for b in blocks]  # key order too
        texts = [b.get("text") for turn in payload.messages for b in turn["content"]]
        assert PAUSE_TEXT not in texts
        roles = [turn["role"] for turn in payload.messages]
        assert all(a != b for a, b in itertools.pairwise(roles))
