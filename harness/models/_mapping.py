"""Provider-neutral steps of mapping canonical messages to a provider's format.

Both providers require every tool call to be answered by exactly one tool result in the
message right after it. A canonical history may answer a call several requests later
(``check_invariants`` accepts that), answer it twice (a retry prompt, then a return), or
answer nothing the previous response asked. :func:`split_request` turns one request into
what the provider accepts, looking only at the response right before it:

* each call of that response gets exactly one tool result, in call order: its answers in
  this request (several are joined), or :data:`PENDING_RESULT` when it is answered later;
* every other answer (a late one, a second one, an orphan) becomes user text that names
  the call, so nothing the model should see is lost;
* general retry prompts and user prompts become user items, in their order;
* system prompt parts and unknown parts contribute nothing here (system prompts go to the
  provider's system field, see :func:`system_text`).
"""

from __future__ import annotations

__all__ = [
    "EMPTY_RESULT",
    "PENDING_RESULT",
    "ImageBase64",
    "ImageUrl",
    "RequestSplit",
    "ToolResult",
    "UserItem",
    "as_list",
    "as_mapping",
    "json_text",
    "parse_arguments",
    "split_request",
    "system_text",
    "user_items",
]

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias, cast

import attrs

from harness.core.messages import (
    CanonicalMessage,
    JsonValue,
    RetryPromptPart,
    SystemPromptPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

PENDING_RESULT = "(no result yet: this tool call is answered in a later message)"
"""Tool result sent for a call whose answer comes more than one request later."""

EMPTY_RESULT = "(empty)"
"""Tool result text sent in place of an empty or blank one (providers reject blank text)."""


@attrs.frozen
class ToolResult:
    """One tool result to send right after the response that made the call."""

    call_id: str
    tool_name: str | None
    text: str
    is_error: bool


@attrs.frozen
class ImageUrl:
    """An image given by URL in a user prompt."""

    url: str


@attrs.frozen
class ImageBase64:
    """An image given inline (base64) in a user prompt."""

    media_type: str
    data: str


UserItem: TypeAlias = str | ImageUrl | ImageBase64


@attrs.frozen
class RequestSplit:
    """A request mapped to tool results (sent first) and user items (sent after them)."""

    results: tuple[ToolResult, ...]
    items: tuple[UserItem, ...]


def as_mapping(value: object) -> Mapping[str, Any]:
    """``value`` when it is a mapping (a JSON object), else an empty mapping."""
    if isinstance(value, Mapping):
        return cast("Mapping[str, Any]", value)
    return {}


def as_list(value: object) -> list[Any]:
    """``value`` when it is a list (a JSON array), else an empty list."""
    if isinstance(value, list):
        return cast("list[Any]", value)
    return []


def json_text(content: JsonValue) -> str:
    """Render tool output or retry content as text (strings as they are, the rest as JSON)."""
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False, default=str)


def _non_blank(text: str) -> str:
    return text if text.strip() else EMPTY_RESULT


def parse_arguments(raw: str | None) -> Mapping[str, JsonValue] | str:
    """Parse tool-call arguments a provider sent as JSON text.

    Returns:
        The parsed object, or the raw string when it is not a JSON object (the loop's
        argument validation then asks the model to fix it). Blank text means ``{}``.
    """
    if raw is None or not raw.strip():
        return {}
    try:
        parsed: object = json.loads(raw)
    except ValueError:
        return raw
    if isinstance(parsed, dict):
        return parsed  # pyright: ignore[reportUnknownVariableType]
    return raw


def user_items(part: UserPromptPart) -> list[UserItem]:
    """The items of a user prompt: non-blank text, images, and other items as JSON text."""
    if isinstance(part.content, str):
        return [part.content] if part.content.strip() else []
    items: list[UserItem] = []
    for item in part.content:
        if isinstance(item, str):
            if item.strip():
                items.append(item)
            continue
        if isinstance(item, Mapping):
            data: Mapping[str, Any] = item  # pyright: ignore[reportUnknownVariableType]
            kind = data.get("kind")
            url = data.get("url")
            if kind == "image-url" and isinstance(url, str):
                items.append(ImageUrl(url))
                continue
            media_type = data.get("media_type")
            payload = data.get("data")
            if (
                kind == "binary"
                and isinstance(media_type, str)
                and media_type.startswith("image/")
                and isinstance(payload, str)
            ):
                items.append(ImageBase64(media_type, payload))
                continue
        items.append(json_text(item))
    return items


def _answer_text(part: ToolReturnPart | RetryPromptPart) -> str:
    return json_text(part.content)


def _late_answer_text(part: ToolReturnPart | RetryPromptPart) -> str:
    name = f" ({part.tool_name})" if part.tool_name else ""
    if isinstance(part, ToolReturnPart):
        header = f"[Result of tool call {part.tool_call_id}{name}]"
    else:
        header = f"[Tool call {part.tool_call_id or '?'}{name} needs a retry]"
    return f"{header}\n{_answer_text(part)}"


def split_request(message: CanonicalMessage, pending: Sequence[ToolCallPart]) -> RequestSplit:
    """Map one request given the calls of the response right before it.

    Args:
        message: The request.
        pending: Tool calls of the previous message (``()`` when it is not a response).

    Returns:
        One result per pending call (call order) and the remaining user items (part order).
    """
    pending_ids = {call.tool_call_id for call in pending}
    answers: dict[str, list[ToolReturnPart | RetryPromptPart]] = {}
    items: list[UserItem] = []
    for part in message.parts:
        if isinstance(part, ToolReturnPart) or (
            isinstance(part, RetryPromptPart) and part.tool_name is not None
        ):
            call_id = part.tool_call_id or ""
            if call_id in pending_ids:
                answers.setdefault(call_id, []).append(part)
            else:
                items.append(_late_answer_text(part))
        elif isinstance(part, RetryPromptPart):
            text = _answer_text(part)
            if text.strip():
                items.append(text)
        elif isinstance(part, UserPromptPart):
            items.extend(user_items(part))
        # SystemPromptPart: collected by system_text; UnknownPart: not sendable.
    results: list[ToolResult] = []
    seen: set[str] = set()
    for call in pending:
        call_id = call.tool_call_id
        if call_id in seen:  # a duplicate id (an invalid history): answer it once
            continue
        seen.add(call_id)
        found = answers.get(call_id)
        if not found:
            results.append(ToolResult(call_id, call.tool_name, PENDING_RESULT, False))
            continue
        text = "\n\n".join(_answer_text(p) for p in found)
        results.append(
            ToolResult(call_id, call.tool_name, _non_blank(text), isinstance(found[-1], RetryPromptPart))
        )
    return RequestSplit(tuple(results), tuple(items))


def system_text(messages: Sequence[CanonicalMessage]) -> str | None:
    """Every system prompt part in order, then the newest request's ``instructions``.

    Returns:
        The text joined by blank lines, or ``None`` when there is none.
    """
    chunks: list[str] = []
    instructions: str | None = None
    for message in messages:
        if message.kind != "request":
            continue
        for part in message.parts:
            if isinstance(part, SystemPromptPart) and part.content.strip():
                chunks.append(part.content)
        if message.instructions is not None:
            instructions = message.instructions
    if instructions and instructions.strip():
        chunks.append(instructions)
    return "\n\n".join(chunks) if chunks else None
