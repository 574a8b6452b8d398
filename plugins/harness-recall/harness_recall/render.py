"""Plain-text renderings of logged messages and parts, as ``recall`` returns them.

Deterministic functions of the message, so a page offset into a rendering stays valid:
the log never changes, and neither does the text made from it.
"""

from __future__ import annotations

__all__ = ["describe_part", "page", "part_text", "render_message"]

import json
from collections.abc import Iterable
from typing import Any

from harness import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownPart,
    UserPromptPart,
)


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def describe_part(part: Part) -> str:
    """A short label: the part's kind and, for tool parts, the tool and the call id."""
    if isinstance(part, ToolReturnPart):
        return f"tool-return of {part.tool_name or '?'} (call {part.tool_call_id})"
    if isinstance(part, ToolCallPart):
        return f"tool-call {part.tool_name} (call {part.tool_call_id})"
    if isinstance(part, RetryPromptPart):
        named = f" for {part.tool_name or '?'} (call {part.tool_call_id})" if part.tool_call_id else ""
        return f"retry-prompt{named}"
    if isinstance(part, UnknownPart):
        return f"unknown part {part.kind!r}"
    return part.part_kind


def part_text(part: Part) -> str:
    """The part's content as text: prompts and answers verbatim, arguments and structures as JSON."""
    if isinstance(part, UserPromptPart):
        return part.text if isinstance(part.content, str) else _json(list(part.content))
    if isinstance(part, SystemPromptPart | TextPart | ThoughtPart):
        return part.content
    if isinstance(part, ToolReturnPart):
        return _json(part.content)
    if isinstance(part, ToolCallPart):
        args = part.args
        return "" if args is None else _json(args if isinstance(args, str) else dict(args))
    if isinstance(part, RetryPromptPart):
        return _json(part.content if isinstance(part.content, str) else list(part.content))
    return _json(dict(part.data))


def render_message(seq: int, message: CanonicalMessage) -> str:
    """One log message: a ``== r12 request ==`` line, then each part under its reference."""
    lines = [f"== r{seq} {message.kind} =="]
    for index, part in enumerate(message.parts):
        lines.append(f"-- r{seq}.{index} {describe_part(part)}:")
        lines.append(part_text(part))
    return "\n".join(lines) + "\n"


def page(chunks: Iterable[str], offset: int, size: int) -> tuple[str, int | None, int | None]:
    """Characters ``offset`` to ``offset + size`` of the concatenated ``chunks``, read lazily.

    Returns:
        ``(text, next_offset, total)``: ``next_offset`` is ``None`` when nothing follows;
        ``total`` is the whole length when every chunk was read (``None`` otherwise).
    """
    wanted = offset + size
    pieces: list[str] = []
    length = 0
    for chunk in chunks:
        pieces.append(chunk)
        length += len(chunk)
        if length > wanted:  # one character past the page proves more follows
            text = "".join(pieces)
            return text[offset:wanted], wanted, None
    text = "".join(pieces)
    return text[offset:wanted], None, length
