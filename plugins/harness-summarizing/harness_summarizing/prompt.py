"""Safe prompt templating and the transcript shown to a summarizer.

Templates use ``{name}`` placeholders, but are **not** rendered with :meth:`str.format`:
a single regular-expression pass over the template replaces the known placeholders and
leaves every other brace alone. Values are inserted verbatim and never re-scanned, so
braces in the conversation (JSON, code, format strings) or in a custom prompt can never
break rendering or inject a placeholder.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "DEFAULT_SUMMARY_PROMPT",
    "PLACEHOLDERS",
    "bound_text",
    "render_template",
    "render_transcript",
    "validate_template",
]

import json
import re
from collections.abc import Mapping, Sequence

from harness.core import (
    CanonicalMessage,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownPart,
    UserPromptPart,
)

PLACEHOLDERS = frozenset({"messages", "previous_summary", "message_count"})
"""Placeholders a summary prompt may use.

* ``{messages}`` (required): the rendered transcript of the messages being summarized.
* ``{previous_summary}``: the summary being updated, or ``(none)`` on the first compaction.
* ``{message_count}``: how many messages are being summarized.
"""

DEFAULT_INSTRUCTIONS = (
    "You are a context summarization assistant. You compress the earlier part of an agent's "
    "conversation into a faithful, dense summary that lets the agent continue its task without the "
    "original messages. Never invent facts; keep exact file paths, commands, identifiers and error "
    "messages."
)
"""System instructions sent to a model summarizer."""

DEFAULT_SUMMARY_PROMPT = """\
The earlier part of a conversation between a user and an AI agent must be compacted.

The summary written at the previous compaction ("(none)" if this is the first one):
<previous_summary>
{previous_summary}
</previous_summary>

The {message_count} messages that followed it:
<messages>
{messages}
</messages>

Write ONE updated summary that replaces the previous summary: keep every fact from it that still \
matters and merge in what the new messages add. Use exactly these sections:

## Intent
What the user asked for, in their own words where possible, including constraints and preferences.
## Key decisions
Decisions made and why; approaches tried and rejected.
## Artifacts
Files read, created or modified (exact paths), commands run and their outcomes, identifiers \
(functions, classes, URLs, ids) that matter.
## Current state
What is done, what is in progress, and the last known state of the work.
## Next steps
What remains to be done, in order.
## Open questions
Unresolved problems, errors not yet fixed, questions for the user.

Respond only with the summary."""
"""The default summary prompt: six headed sections, incremental update of the previous summary."""

_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)
"""One shared encoder: ``json.dumps`` with non-default options builds a new one per call."""

_TOKEN = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


def validate_template(template: str, *, parameter: str = "summary_prompt") -> None:
    """Check that ``template`` contains the ``{messages}`` placeholder.

    Args:
        template: The template to check.
        parameter: Parameter name used in the error message.

    Raises:
        ValueError: ``template`` is not a string or has no ``{messages}`` placeholder.
    """
    if not isinstance(template, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ValueError(f"{parameter} must be a string, got {type(template).__name__}.")
    if not any(m.group(1) == "messages" for m in _TOKEN.finditer(template)):
        raise ValueError(f"{parameter} must contain the {{messages}} placeholder.")


def render_template(template: str, values: Mapping[str, str]) -> str:
    """Render ``template`` in one pass: known ``{name}`` placeholders are substituted.

    ``{{`` and ``}}`` become single braces (compatible with :meth:`str.format` templates);
    ``{name}`` with an unknown name and every other brace are kept literally. Substituted
    values are never scanned again, so braces inside them are inert.

    Args:
        template: The template text.
        values: Placeholder values by name.

    Returns:
        The rendered text.
    """

    def substitute(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        name = match.group(1)
        return values.get(name, token)

    return _TOKEN.sub(substitute, template)


def bound_text(text: str, max_chars: int | None) -> str:
    """Keep the head of ``text``: at most ``max_chars`` characters plus an omission note.

    Args:
        text: The text to bound.
        max_chars: Characters kept, or ``None`` for no bound.

    Returns:
        ``text`` unchanged when short enough, else its head followed by
        ``"…[N chars omitted]"``.
    """
    if max_chars is None or len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}…[{len(text) - max_chars} chars omitted]"


def _json_text(value: object) -> str:
    if isinstance(value, str):
        return value
    return _ENCODER.encode(value)


def _call_args(part: ToolCallPart) -> str:
    if part.args is None:
        return "{}"
    args = part.args
    if isinstance(args, str):
        return args
    return _ENCODER.encode(args if isinstance(args, dict) else dict(args))


def render_transcript(messages: Sequence[CanonicalMessage], *, tool_return_max_chars: int | None) -> str:
    """Render ``messages`` for a summarizer, one line (or block) per part.

    ``User:``, ``System:``, ``Assistant:``, ``Tool call [name]:`` (arguments),
    ``Tool result [name]:`` and ``Retry [name]:``. Tool returns, retry prompts and tool-call
    arguments are bounded to ``tool_return_max_chars`` each; thinking is omitted.

    Args:
        messages: The messages to render.
        tool_return_max_chars: Bound for each tool return / retry / argument text.

    Returns:
        The transcript text.
    """
    lines: list[str] = []
    append = lines.append
    limit = tool_return_max_chars
    for message in messages:
        for part in message.parts:
            # most frequent kinds first
            if isinstance(part, ToolReturnPart):
                content = part.content
                text = content if isinstance(content, str) else _json_text(content)
                append(f"Tool result [{part.tool_name or '?'}]: {bound_text(text, limit)}")
            elif isinstance(part, ToolCallPart):
                append(f"Tool call [{part.tool_name}]: {bound_text(_call_args(part), limit)}")
            elif isinstance(part, TextPart):
                if part.content.strip():
                    append(f"Assistant: {part.content}")
            elif isinstance(part, UserPromptPart):
                append(f"User: {part.text}")
            elif isinstance(part, SystemPromptPart):
                append(f"System: {part.content}")
            elif isinstance(part, RetryPromptPart):
                append(f"Retry [{part.tool_name or 'model'}]: {bound_text(_json_text(part.content), limit)}")
            elif isinstance(part, ThoughtPart):
                continue
            elif isinstance(part, UnknownPart):  # pyright: ignore[reportUnnecessaryIsInstance]
                append(f"[{part.kind} part]")
    return "\n".join(lines)
