"""Every sendable history maps to a payload each provider's structural rules accept.

The validators below encode the rules the providers enforce (and document) on the
messages they receive; ``check_invariants(history) == []`` must imply they hold.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import HealthCheck, assume, given, settings

from harness.core import CanonicalMessage, ToolCallPart, ToolReturnPart, UserPromptPart
from harness.history import check_invariants
from harness.models._mapping import json_text
from harness.models.anthropic import anthropic_tool_id, to_anthropic_messages
from harness.models.openai import to_openai_messages
from harness.testing.strategies import histories, messy_histories

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def openai_violations(messages: list[dict[str, Any]]) -> list[str]:
    """Rules of the Chat Completions API for ``messages`` (plus strict alternation)."""
    problems: list[str] = []
    expected: set[str] = set()  # ids of the last assistant tool_calls not answered yet
    in_tool_block = False
    previous_role: str | None = None
    for index, message in enumerate(messages):
        role = message["role"]
        if role in ("system", "developer"):
            if index != 0:
                problems.append(f"{index}: system message not first")
            if not message["content"].strip():
                problems.append(f"{index}: blank system message")
        if role != "tool":
            if expected:
                problems.append(f"{index}: tool calls {sorted(expected)} unanswered before a {role} message")
            in_tool_block = False
            expected = set()
        if role == "user":
            content = message["content"]
            if isinstance(content, str):
                if not content.strip():
                    problems.append(f"{index}: blank user message")
            elif not content or any(b["type"] == "text" and not b["text"].strip() for b in content):
                problems.append(f"{index}: empty user content list or blank text")
        elif role == "assistant":
            calls = message.get("tool_calls") or []
            text = message.get("content")
            if not calls and not (isinstance(text, str) and text.strip()):
                problems.append(f"{index}: empty assistant message")
            ids = [c["id"] for c in calls]
            if len(set(ids)) != len(ids) or not all(ids):
                problems.append(f"{index}: bad tool call ids {ids}")
            if not all(isinstance(c["function"]["arguments"], str) for c in calls):
                problems.append(f"{index}: arguments must be strings")
            expected = set(ids)
            in_tool_block = bool(calls)
        elif role == "tool":
            if not in_tool_block:
                problems.append(f"{index}: tool message not after an assistant message with tool_calls")
            elif message["tool_call_id"] not in expected:
                problems.append(f"{index}: tool message answers {message['tool_call_id']!r}, not pending")
            else:
                expected.discard(message["tool_call_id"])
            if not message["content"].strip():
                problems.append(f"{index}: blank tool message")
        if role in ("user", "assistant") and role == previous_role:
            problems.append(f"{index}: two {role} messages in a row")
        previous_role = role
    if expected:
        problems.append(f"end: tool calls {sorted(expected)} unanswered")
    return problems


def anthropic_violations(turns: list[dict[str, Any]]) -> list[str]:
    """Rules of the Messages API for ``messages``."""
    problems: list[str] = []
    seen_ids: set[str] = set()
    pending: set[str] = set()
    for index, turn in enumerate(turns):
        role = turn["role"]
        expected_role = "user" if index % 2 == 0 else "assistant"
        if role != expected_role:
            problems.append(f"{index}: expected a {expected_role} turn, got {role}")
        blocks = turn["content"]
        if not blocks:
            problems.append(f"{index}: empty turn")
        for block in blocks:
            if block["type"] == "text" and not block["text"].strip():
                problems.append(f"{index}: blank text block")
        if role == "user":
            kinds = [b["type"] for b in blocks]
            results = [b for b in blocks if b["type"] == "tool_result"]
            if kinds[: len(results)] != ["tool_result"] * len(results):
                problems.append(f"{index}: tool_result blocks are not first")
            answered = [b["tool_use_id"] for b in results]
            if sorted(answered) != sorted(pending):
                problems.append(f"{index}: results {answered} do not answer exactly {sorted(pending)}")
            for block in results:
                content = block.get("content")
                if not isinstance(content, str) or not content.strip():
                    problems.append(f"{index}: blank tool_result")
            pending = set()
        else:
            if pending:
                problems.append(f"{index}: assistant turn while {sorted(pending)} pending")
            uses = [b for b in blocks if b["type"] == "tool_use"]
            for block in uses:
                if not _ANTHROPIC_ID.match(block["id"]) or block["id"] in seen_ids:
                    problems.append(f"{index}: bad or repeated tool_use id {block['id']!r}")
                seen_ids.add(block["id"])
                if not isinstance(block["input"], dict):
                    problems.append(f"{index}: tool_use input is not an object")
            for block in blocks:
                if block["type"] == "thinking" and not block.get("signature"):
                    problems.append(f"{index}: thinking block without signature")
            pending = {b["id"] for b in uses}
    if pending:
        problems.append(f"end: {sorted(pending)} unanswered")
    return problems


def _prompts_and_returns(history: list[CanonicalMessage]) -> list[str]:
    texts: list[str] = []
    for message in history:
        for part in message.parts:
            if isinstance(part, UserPromptPart) and part.text.strip():
                texts.append(part.text)
            elif isinstance(part, ToolReturnPart):
                text = json_text(part.content)
                if text.strip():
                    texts.append(text)
    return texts


def _call_ids(history: list[CanonicalMessage]) -> list[str]:
    return [p.tool_call_id for m in history for p in m.parts if isinstance(p, ToolCallPart)]


@SETTINGS
@given(histories(max_messages=30))
def test_openai_accepts_every_sendable_history(history: list[CanonicalMessage]) -> None:
    assert check_invariants(history) == []
    mapped = to_openai_messages(history)
    assert openai_violations(mapped) == []
    # Nothing the model should see is lost: prompts and tool output are all in the payload.
    contents = [m.get("content") for m in mapped]
    flat = "\n".join(c if isinstance(c, str) else json.dumps(c, ensure_ascii=False) for c in contents if c)
    for text in _prompts_and_returns(history):
        assert text in flat
    sent_ids = [c["id"] for m in mapped for c in m.get("tool_calls", [])]
    assert sent_ids == _call_ids(history)


@SETTINGS
@given(histories(max_messages=30))
def test_anthropic_accepts_every_sendable_history(history: list[CanonicalMessage]) -> None:
    payload = to_anthropic_messages(history)
    assert anthropic_violations(payload.messages) == []
    texts: list[str] = []
    for turn in payload.messages:
        for block in turn["content"]:
            if block["type"] in ("text", "tool_result"):
                texts.append(block["text"] if block["type"] == "text" else block["content"])
    flat = "\n".join(texts)
    for text in _prompts_and_returns(history):
        assert text in flat
    sent_ids = [b["id"] for t in payload.messages for b in t["content"] if b["type"] == "tool_use"]
    assert sent_ids == [anthropic_tool_id(i) for i in _call_ids(history)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messy_histories(max_messages=20))
def test_even_broken_histories_map_to_accepted_payloads(history: list[CanonicalMessage]) -> None:
    """Best effort beyond the guarantee: invalid histories still produce acceptable payloads
    as long as their call ids are unique (duplicates are a repair for ``history``)."""
    ids = _call_ids(history)
    assume(len(ids) == len(set(ids)))
    assert openai_violations(to_openai_messages(history)) == []
    assert anthropic_violations(to_anthropic_messages(history).messages) == []


def test_validators_catch_broken_payloads() -> None:
    """The validators are not vacuous: they flag the classic provider rejections."""
    call = {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}
    assert openai_violations(
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": [call]}]
    )
    assert openai_violations(
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "user", "content": "x"},
            {"role": "tool", "tool_call_id": "c1", "content": "late"},
        ]
    )
    assert openai_violations([{"role": "user", "content": "a"}, {"role": "assistant", "content": ""}])
    use = {"type": "tool_use", "id": "t1", "name": "t", "input": {}}
    assert anthropic_violations([{"role": "assistant", "content": [{"type": "text", "text": "x"}]}])
    assert anthropic_violations(
        [
            {"role": "user", "content": [{"type": "text", "text": "q"}]},
            {"role": "assistant", "content": [use]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "first"},
                    {"type": "tool_result", "tool_use_id": "t1", "content": "r"},
                ],
            },
        ]
    )
    assert anthropic_violations(
        [
            {"role": "user", "content": [{"type": "text", "text": "q"}]},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [{"type": "text", "text": "no result"}]},
        ]
    )
