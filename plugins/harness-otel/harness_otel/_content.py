"""Messages, tool calls and tool definitions as the GenAI semantic conventions write them.

Only called when content capture is on. Each function returns the JSON string an
attribute holds: ``gen_ai.input.messages`` and ``gen_ai.output.messages`` are arrays of
``{"role", "parts"}`` messages (output messages add ``finish_reason``);
``gen_ai.system_instructions`` is an array of parts; ``gen_ai.tool.definitions`` an
array of function definitions. A harness request that mixes user text and tool returns
becomes one message per run of parts with the same role, in order.
"""

from __future__ import annotations

__all__ = [
    "content_json",
    "input_messages",
    "output_messages",
    "system_instructions",
    "tool_definitions",
]

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from harness.core import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolDefinition,
    ToolReturnPart,
    UserPromptPart,
)

_Json = dict[str, Any]


def content_json(value: object) -> str:
    """``value`` as compact JSON (non-ASCII kept; anything JSON cannot encode becomes its ``str``)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _prompt_parts(content: str | Sequence[Any]) -> list[_Json]:
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts: list[_Json] = []
    for item in content:
        if isinstance(item, str):
            parts.append({"type": "text", "content": item})
        elif isinstance(item, Mapping):
            fields = dict(cast(Mapping[str, Any], item))
            kind = fields.pop("type", None)
            parts.append({"type": kind if isinstance(kind, str) and kind else "unknown", **fields})
        else:
            parts.append({"type": "unknown", "content": item})
    return parts


def _part(part: Part) -> tuple[str, list[_Json]]:
    """The role a part speaks in and the convention's parts for it."""
    if isinstance(part, SystemPromptPart):
        return "system", [{"type": "text", "content": part.content}]
    if isinstance(part, UserPromptPart):
        return "user", _prompt_parts(part.content)
    if isinstance(part, ToolReturnPart):
        return "tool", [{"type": "tool_call_response", "id": part.tool_call_id, "response": part.content}]
    if isinstance(part, RetryPromptPart):
        if part.tool_call_id is not None:
            response = part.content if isinstance(part.content, str) else list(part.content)
            return "tool", [{"type": "tool_call_response", "id": part.tool_call_id, "response": response}]
        return "user", _prompt_parts(part.content)
    if isinstance(part, TextPart):
        return "assistant", [{"type": "text", "content": part.content}]
    if isinstance(part, ThoughtPart):
        return "assistant", [{"type": "reasoning", "content": part.content}]
    if isinstance(part, ToolCallPart):
        return "assistant", [
            {"type": "tool_call", "id": part.tool_call_id, "name": part.tool_name, "arguments": part.args}
        ]
    return "unknown", [{"type": part.kind}]


def _messages(messages: Sequence[CanonicalMessage], *, skip_system: bool) -> list[_Json]:
    out: list[_Json] = []
    for message in messages:
        default = "user" if message.kind == "request" else "assistant"
        current: _Json | None = None
        for part in message.parts:
            role, parts = _part(part)
            if role == "system" and skip_system:
                continue
            if role == "unknown":
                role = default
            if current is None or current["role"] != role:
                current = {"role": role, "parts": []}
                out.append(current)
            current["parts"].extend(parts)
    return out


def input_messages(messages: Sequence[CanonicalMessage]) -> str:
    """``gen_ai.input.messages``: what was sent, in order, system prompts left out."""
    return content_json(_messages(messages, skip_system=True))


def system_instructions(messages: Sequence[CanonicalMessage]) -> str | None:
    """``gen_ai.system_instructions``: the system prompts sent, or ``None`` when there were none."""
    parts = [
        {"type": "text", "content": part.content}
        for message in messages
        for part in message.parts
        if isinstance(part, SystemPromptPart)
    ]
    return content_json(parts) if parts else None


def output_messages(response: CanonicalMessage) -> str:
    """``gen_ai.output.messages``: the response, as one assistant message with its finish reason."""
    parts: list[_Json] = []
    for part in response.parts:
        parts.extend(_part(part)[1])
    finish = response.finish_reason or ("tool_call" if response.tool_calls else "stop")
    return content_json([{"role": "assistant", "parts": parts, "finish_reason": finish}])


def tool_definitions(tools: Sequence[ToolDefinition]) -> str | None:
    """``gen_ai.tool.definitions``: the tools offered, or ``None`` when there were none."""
    if not tools:
        return None
    return content_json(
        [
            {
                "type": "function",
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters_json_schema,
            }
            for tool in tools
        ]
    )
