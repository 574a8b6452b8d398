"""Properties of reading foreign formats: valid canonical histories, nothing lost, detection right.

Conversations are generated in the shapes real clients write (consecutive same-role
messages, parallel tool calls, per-block assistant lines, unmodelled keys), and the
corpus is sent through harness's own provider mappers and read back.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart
from harness.history import check_invariants
from harness.models.anthropic import to_anthropic_messages
from harness.models.openai import to_openai_messages
from harness.wire import (
    detect_format,
    dump_messages,
    load_history,
    load_messages,
    messages_from_anthropic,
    messages_from_openai,
)

PROPERTIES = settings(max_examples=150, deadline=None)

texts = st.text(min_size=1, max_size=12).filter(str.strip)
names = st.sampled_from(["bash", "read_file", "grep", "edit"])
extra_keys = st.dictionaries(st.sampled_from(["x_trace", "annotations", "meta"]), texts, max_size=2)


def _leaves(value: Any, key: str | None = None) -> Counter[Any]:
    """Every scalar of a JSON value, except the tags a reader consumes (roles and types)."""
    found: Counter[Any] = Counter()
    if isinstance(value, dict):
        for child_key, child in value.items():
            found += _leaves(child, child_key)
    elif isinstance(value, list):
        for child in value:
            found += _leaves(child, key)
    elif value is not None and key not in ("role", "type"):
        found[json.dumps(value)] += 1
    return found


SLOT_KEYS = frozenset({"id", "model", "stop_reason", "usage"})
"""Message-level keys with a slot: joined messages holding the same value fill it once."""


def _assert_nothing_lost(foreign: list[dict[str, Any]], messages: list[CanonicalMessage]) -> None:
    written = _leaves(json.loads(dump_messages(messages)))
    body = _leaves([{k: v for k, v in m.items() if k not in SLOT_KEYS} for m in foreign])
    slots = _leaves([{k: v for k, v in m.items() if k in SLOT_KEYS} for m in foreign])
    assert not body - written
    assert set(slots) <= set(written)


def _assert_answers_name_their_calls(messages: list[CanonicalMessage]) -> None:
    names = {p.tool_call_id: p.tool_name for m in messages for p in m.parts if isinstance(p, ToolCallPart)}
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolReturnPart):
                assert part.tool_name == names[part.tool_call_id]


# ---------------------------------------------------------------------------------------
# OpenAI Chat Completions
# ---------------------------------------------------------------------------------------


@st.composite
def openai_conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    counter = 0
    if draw(st.booleans()):
        messages.append({"role": draw(st.sampled_from(["system", "developer"])), "content": draw(texts)})
    for _ in range(draw(st.integers(1, 4))):
        for _ in range(draw(st.integers(1, 2))):
            content: Any = draw(
                texts | st.lists(texts.map(lambda t: {"type": "text", "text": t}), min_size=1)
            )
            user: dict[str, Any] = {"role": "user", "content": content, **draw(extra_keys)}
            if draw(st.booleans()):
                user["name"] = draw(texts)
            messages.append(user)
        for _ in range(draw(st.integers(1, 3))):
            calls: list[dict[str, Any]] = []
            for _ in range(draw(st.integers(0, 3))):
                counter += 1
                arguments = json.dumps({"arg": draw(texts)}) if draw(st.booleans()) else draw(texts)
                calls.append(
                    {
                        "id": f"call_{counter}",
                        "type": "function",
                        "function": {"name": draw(names), "arguments": arguments},
                    }
                )
            text = draw(texts) if not calls or draw(st.booleans()) else None
            assistant: dict[str, Any] = {
                "role": "assistant",
                "content": text,
                "refusal": None,
                **draw(extra_keys),
            }
            if calls:
                assistant["tool_calls"] = calls
            if draw(st.booleans()):
                assistant["reasoning_content"] = draw(texts)
            messages.append(assistant)
            for call in calls:
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": draw(texts)})
    return messages


@PROPERTIES
@given(openai_conversations())
def test_openai_conversations_become_valid_histories_and_lose_nothing(
    conversation: list[dict[str, Any]],
) -> None:
    messages = messages_from_openai(conversation)
    assert check_invariants(messages) == []
    calls = [call for m in conversation for call in m.get("tool_calls", [])]
    assert [p.tool_call_id for m in messages for p in m.tool_calls] == [call["id"] for call in calls]
    assert [p.args for m in messages for p in m.tool_calls] == [
        call["function"]["arguments"] for call in calls
    ]
    _assert_answers_name_their_calls(messages)
    _assert_nothing_lost(conversation, messages)
    assert load_messages(dump_messages(messages)) == messages


@PROPERTIES
@given(openai_conversations())
def test_openai_conversations_are_detected_as_json_and_as_json_lines(
    conversation: list[dict[str, Any]],
) -> None:
    expected = messages_from_openai(conversation)
    assert detect_format(conversation) == "openai"
    assert load_history(json.dumps(conversation)) == expected
    assert load_history("\n".join(json.dumps(m) for m in conversation)) == expected


# ---------------------------------------------------------------------------------------
# Anthropic Messages API
# ---------------------------------------------------------------------------------------


def _text_block(text: str, cached: bool) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if cached:
        block["cache_control"] = {"type": "ephemeral", "ttl": "5m"}
    return block


@st.composite
def anthropic_conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    counter = 0
    pending: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        results = [
            {
                "type": "tool_result",
                "tool_use_id": call_id,
                "content": draw(
                    texts | st.lists(texts.map(lambda t: {"type": "text", "text": t}), min_size=1)
                ),
                **({"is_error": True} if draw(st.booleans()) else {}),
            }
            for call_id in pending
        ]
        prompt = [_text_block(draw(texts), draw(st.booleans())) for _ in range(draw(st.integers(0, 2)))]
        if not results and not prompt:
            prompt = [_text_block(draw(texts), False)]
        content: Any = [*results, *prompt]
        if not results and len(prompt) == 1 and "cache_control" not in prompt[0] and draw(st.booleans()):
            content = prompt[0]["text"]
        messages.append({"role": "user", "content": content})
        blocks: list[dict[str, Any]] = []
        if draw(st.booleans()):
            blocks.append({"type": "thinking", "thinking": draw(texts), "signature": draw(texts)})
        if draw(st.booleans()):
            blocks.append(_text_block(draw(texts), False))
        pending = []
        for _ in range(draw(st.integers(0, 2))):
            counter += 1
            pending.append(f"toolu_{counter}")
            blocks.append(
                {"type": "tool_use", "id": pending[-1], "name": draw(names), "input": {"q": draw(texts)}}
            )
        if not any(block["type"] in ("text", "tool_use") for block in blocks):
            blocks.append(_text_block(draw(texts), False))
        response = {"id": f"msg_{counter}", "type": "message", "role": "assistant", "model": "claude"}
        if draw(st.booleans()):  # Claude Code: one line per block of the response
            messages.extend({**response, "content": [block]} for block in blocks)
        else:
            messages.append(
                {**response, "content": blocks, "stop_reason": "tool_use" if pending else "end_turn"}
            )
    if pending:
        results = [{"type": "tool_result", "tool_use_id": call_id, "content": "done"} for call_id in pending]
        messages.append({"role": "user", "content": results})
    return messages


@PROPERTIES
@given(anthropic_conversations())
def test_anthropic_conversations_become_valid_histories_and_lose_nothing(
    conversation: list[dict[str, Any]],
) -> None:
    messages = messages_from_anthropic(conversation)
    assert check_invariants(messages) == []
    uses = [
        b
        for m in conversation
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_use"
    ]
    assert [(p.tool_call_id, p.args) for m in messages for p in m.tool_calls] == [
        (u["id"], u["input"]) for u in uses
    ]
    _assert_answers_name_their_calls(messages)
    _assert_nothing_lost(conversation, messages)
    assert load_messages(dump_messages(messages)) == messages


@PROPERTIES
@given(anthropic_conversations())
def test_anthropic_conversations_are_read_right_whatever_is_detected(
    conversation: list[dict[str, Any]],
) -> None:
    # plain text turns carry no Anthropic trait, and read the same either way
    expected = messages_from_anthropic(conversation)
    assert load_history(json.dumps(conversation)) == expected
    assert load_history("\n".join(json.dumps(m) for m in conversation)) == expected
    if any(
        isinstance(m["content"], list) and any(b["type"] != "text" for b in m["content"])
        for m in conversation
    ):
        assert detect_format(conversation) == "anthropic"


# ---------------------------------------------------------------------------------------
# The corpus, through harness's own provider mappers and back
# ---------------------------------------------------------------------------------------


def _calls(messages: list[CanonicalMessage]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(p.tool_call_id, p.tool_name, p.args_as_dict()) for m in messages for p in m.tool_calls]


def _texts(messages: list[CanonicalMessage]) -> list[str]:
    return [
        "\n\n".join(p.content for p in m.parts if isinstance(p, TextPart) and p.content.strip())
        for m in messages
        if m.is_response
    ]


def test_corpus_sent_as_openai_messages_reads_back(corpus_file: Path) -> None:
    original = load_messages(corpus_file.read_bytes())
    messages = load_history(json.dumps(to_openai_messages(original)))
    assert check_invariants(messages) == []
    assert [m.kind for m in messages] == [m.kind for m in original]
    assert _calls(messages) == _calls(original)
    assert _texts(messages) == _texts(original)
    _assert_answers_name_their_calls(messages)


def test_corpus_sent_as_anthropic_messages_reads_back(corpus_file: Path) -> None:
    original = load_messages(corpus_file.read_bytes())
    payload = to_anthropic_messages(original)
    body = {"model": "claude", "max_tokens": 1024, "system": payload.system, "messages": payload.messages}
    messages = load_history(json.dumps(body))
    assert check_invariants(messages) == []
    assert [m.kind for m in messages] == [m.kind for m in original]
    assert _calls(messages) == _calls(original)
    assert _texts(messages) == _texts(original)
    _assert_answers_name_their_calls(messages)
