"""Fallback parsing of tool calls written as text.

Some models (often local ones) write a tool call into their answer instead of using the
structured tool-call channel. When a response has no structured call, the loop looks
for calls to *registered* tools in these forms, first form that finds anything wins:

1. ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
2. ``<function=NAME>{...arguments...}</function>``
3. a fenced code block (optionally tagged ``json``) holding one call object
4. bare JSON objects, found with a balanced-brace scan (back-to-back objects split)

Call objects may be shaped ``{name, arguments}``, ``{tool, args}`` or ``{function,
parameters}``; string arguments are parsed as JSON. Calls naming a tool that is not
registered are ignored, so ordinary JSON in an answer does not become a call. The calls
found become real :class:`~harness.core.messages.ToolCallPart` objects (ids ``fallback_<hex>``)
appended to the stored response, so their returns pair up.
"""

from __future__ import annotations

__all__ = [
    "FALLBACK_ID_PREFIX",
    "extract_fallback_tool_calls",
    "with_fallback_tool_calls",
]

import json
import re
import uuid
from collections.abc import Callable, Collection, Iterator
from typing import Any

from harness.core.messages import CanonicalMessage, TextPart, ToolCallPart, with_harness_mark

FALLBACK_ID_PREFIX = "fallback_"

_PRECHECK = re.compile(
    r"<tool_call>|<function=|\"name\"\s*:|\"tool\"\s*:|\"function\"\s*:|```", re.IGNORECASE
)
_TOOL_CALL_TAG = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.IGNORECASE | re.DOTALL)
_FUNCTION_TAG = re.compile(r"<function=([^>\s]+)>\s*(.*?)\s*</function>", re.IGNORECASE | re.DOTALL)
_FENCE = re.compile(r"```[ \t]*(?:json)?[ \t]*\n?(.*?)```", re.IGNORECASE | re.DOTALL)

_SHAPES = (("name", "arguments"), ("tool", "args"), ("function", "parameters"))


def _new_id() -> str:
    return f"{FALLBACK_ID_PREFIX}{uuid.uuid4().hex}"


def _parse_args(raw: Any) -> dict[str, Any]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            return {}
    return dict(raw) if isinstance(raw, dict) else {}  # pyright: ignore[reportUnknownArgumentType]


def _call_from_object(obj: Any, tools: Collection[str], make_id: Callable[[], str]) -> ToolCallPart | None:
    if not isinstance(obj, dict):
        return None
    data: dict[str, Any] = obj  # pyright: ignore[reportUnknownVariableType]
    for name_key, args_key in _SHAPES:
        name = data.get(name_key)
        if isinstance(name, dict) and name_key == "function":
            # OpenAI style: {"function": {"name": ..., "arguments": ...}}
            return _call_from_object(name, tools, make_id)
        if isinstance(name, str) and name in tools:
            return ToolCallPart(tool_call_id=make_id(), tool_name=name, args=_parse_args(data.get(args_key)))
    return None


def _json_objects(text: str) -> Iterator[tuple[int, int]]:
    """Yield ``(start, end)`` spans of balanced ``{...}`` blocks, skipping string contents."""
    n = len(text)
    i = text.find("{")
    while 0 <= i < n:
        depth = 0
        in_string = False
        escape = False
        end = -1
        for j in range(i, n):
            ch = text[j]
            if in_string:
                if escape:
                    escape = False
                elif ch == "\\":
                    escape = True
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    end = j + 1
                    break
        if end < 0:
            return
        yield i, end
        i = text.find("{", i + 1)


def _scan_bare(text: str, tools: Collection[str], make_id: Callable[[], str]) -> list[ToolCallPart]:
    calls: list[ToolCallPart] = []
    covered_until = -1
    for start, end in _json_objects(text):
        if start < covered_until:
            continue
        try:
            obj = json.loads(text[start:end])
        except json.JSONDecodeError:
            continue
        call = _call_from_object(obj, tools, make_id)
        if call is not None:
            calls.append(call)
            covered_until = end
    return calls


def _loads(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return None


def extract_fallback_tool_calls(
    text: str, tools: Collection[str], *, make_id: Callable[[], str] = _new_id
) -> list[ToolCallPart]:
    """Find textual calls to the tools named in ``tools``; ``[]`` when there are none.

    Args:
        text: The response text (text parts joined by newlines).
        tools: Names of the registered tools; calls to other names are ignored.
        make_id: Produces the id of each call (default ``fallback_<uuid hex>``).
    """
    if not tools or not text or not _PRECHECK.search(text):
        return []
    # 1. <tool_call>{json}</tool_call>
    calls: list[ToolCallPart] = []
    for body in _TOOL_CALL_TAG.findall(text):
        obj = _loads(body)
        call = _call_from_object(obj, tools, make_id) if obj is not None else None
        if call is None:
            calls.extend(_scan_bare(body, tools, make_id))
        else:
            calls.append(call)
    if calls:
        return calls
    # 2. <function=name>{args}</function>
    for name, body in _FUNCTION_TAG.findall(text):
        if name in tools:
            calls.append(ToolCallPart(tool_call_id=make_id(), tool_name=name, args=_parse_args(body)))
    if calls:
        return calls
    # 3. fenced block
    for body in _FENCE.findall(text):
        obj = _loads(body.strip())
        if isinstance(obj, list):
            for item in obj:  # pyright: ignore[reportUnknownVariableType]
                call = _call_from_object(item, tools, make_id)
                if call is not None:
                    calls.append(call)
        else:
            call = _call_from_object(obj, tools, make_id)
            if call is not None:
                calls.append(call)
    if calls:
        return calls
    # 4. bare JSON objects
    return _scan_bare(text, tools, make_id)


def with_fallback_tool_calls(
    response: CanonicalMessage, tools: Collection[str], *, make_id: Callable[[], str] = _new_id
) -> CanonicalMessage | None:
    """Return ``response`` with textual tool calls appended as real calls, or ``None``.

    ``None`` means nothing was found (or the response already has structured calls).
    Each added part is marked ``{"fallback": True}`` in its harness metadata; the text
    is kept unchanged so nothing the model wrote is lost.
    """
    if response.kind != "response" or response.tool_calls:
        return None
    text = "\n".join(p.content for p in response.parts if isinstance(p, TextPart))
    calls = extract_fallback_tool_calls(text, tools, make_id=make_id)
    if not calls:
        return None
    marked = [with_harness_mark(call, fallback=True) for call in calls]
    return response.replace(parts=(*response.parts, *marked))
