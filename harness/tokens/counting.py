"""What is counted: per-part texts, framing overheads, encodings and the byte estimate.

These figures are a model of what a provider bills, not a replay of any provider's wire
format. :class:`~harness.tokens.counter.TokenCounter` tokenizes the texts returned here and
adds the overheads.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_ENCODING",
    "MESSAGE_OVERHEAD",
    "NON_TEXT_ITEM_TOKENS",
    "O200K_ENCODING",
    "PART_OVERHEAD",
    "TOOL_OVERHEAD",
    "encoding_for_model",
    "estimate_tokens",
    "json_text",
    "part_text",
    "tool_text",
]

import json
import re
from collections.abc import Mapping
from typing import Any, Final, cast

from harness.core.messages import (
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
from harness.core.model import ToolDefinition
from harness.errors import MessageError, TokenizerError

DEFAULT_ENCODING: Final = "cl100k_base"
"""Encoding used for models :func:`encoding_for_model` does not recognise."""

O200K_ENCODING: Final = "o200k_base"
"""Encoding of the GPT-4o, GPT-4.1, GPT-4.5, GPT-5, gpt-oss and o-series models."""

MESSAGE_OVERHEAD: Final = 3
"""Tokens added per message for role and framing (as in OpenAI's counting cookbook)."""

PART_OVERHEAD: Final = 1
"""Tokens added per part for its framing (separators, field names)."""

NON_TEXT_ITEM_TOKENS: Final = 85
"""Flat cost of one non-text user content item (OpenAI's price of a low-detail image)."""

TOOL_OVERHEAD: Final = 7
"""Tokens added per tool definition for its framing."""

ESTIMATE_BYTES_PER_TOKEN: Final = 4
"""UTF-8 bytes per token assumed by :func:`estimate_tokens`."""

_O200K_MODEL = re.compile(r"^(?:chatgpt-4o|gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|o1|o3|o4)(?:$|[-.:@_])")
_MODEL_SEGMENT_SPLIT = re.compile(r"[:/]")


def encoding_for_model(model_name: str | None) -> str:
    """Return the tiktoken encoding name used to count tokens for ``model_name``.

    Provider prefixes are ignored: ``"openai:gpt-4o"``, ``"openrouter:openai/gpt-4.1"``
    and ``"ft:gpt-4o-mini:org::id"`` all name o200k models.

    Args:
        model_name: A model name as the agent knows it, or ``None``.

    Returns:
        ``"o200k_base"`` for the GPT-4o, GPT-4.1, GPT-4.5, GPT-5, gpt-oss and o1/o3/o4
        families, ``"cl100k_base"`` for everything else (``None`` included).
    """
    if not model_name:
        return DEFAULT_ENCODING
    for segment in _MODEL_SEGMENT_SPLIT.split(model_name.strip().lower()):
        if _O200K_MODEL.match(segment):
            return O200K_ENCODING
    return DEFAULT_ENCODING


def estimate_tokens(text: str) -> int:
    """Rough token count used when no encoding is available: UTF-8 bytes / 4, rounded up."""
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return -(-size // ESTIMATE_BYTES_PER_TOKEN)


def json_text(value: Any) -> str:
    """Return ``value`` as compact JSON (non-JSON values via ``str``), or its ``repr`` if that fails."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return repr(value)


def _content_text(value: Any) -> str:
    return value if isinstance(value, str) else json_text(value)


def _user_content(content: str | tuple[Any, ...]) -> tuple[str, int]:
    if isinstance(content, str):
        return content, 0
    if not isinstance(content, (tuple, list)):  # pyright: ignore[reportUnnecessaryIsInstance]
        return json_text(content), 0
    texts: list[str] = []
    flat = 0
    for item in content:
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, Mapping):
            fields = cast(Mapping[str, object], item)
            kind = fields.get("kind")
            text = fields.get("content")
            if kind == "text" and isinstance(text, str):
                texts.append(text)
            elif kind != "cache-point":
                flat += NON_TEXT_ITEM_TOKENS
        else:
            flat += NON_TEXT_ITEM_TOKENS
    return "\n".join(texts), flat


def part_text(part: Part) -> tuple[str, int]:
    """Return the text a part is counted by and a flat number of tokens to add.

    * system prompt, text, thinking: the content;
    * user prompt: the string, or the text items of a content list, plus
      :data:`NON_TEXT_ITEM_TOKENS` per non-text item (``{"kind": "cache-point"}`` items
      count nothing);
    * tool call: the tool name and the arguments as compact JSON (string arguments as
      they are);
    * tool return: the tool name and the content (non-string content as compact JSON);
    * retry prompt: the tool name (if any) and the content (an error list as compact JSON);
    * unknown part: its data as compact JSON.

    Raises:
        MessageError: ``part`` is not a message part.
    """
    if isinstance(part, (TextPart, ThoughtPart, SystemPromptPart)):
        return _content_text(part.content), 0
    if isinstance(part, UserPromptPart):
        return _user_content(part.content)
    if isinstance(part, ToolCallPart):
        args = part.args
        args_text = "" if args is None else _content_text(args)
        return f"{part.tool_name or ''}\n{args_text}", 0
    if isinstance(part, ToolReturnPart):
        return f"{part.tool_name or ''}\n{_content_text(part.content)}", 0
    if isinstance(part, RetryPromptPart):
        content = _content_text(part.content)
        return (f"{part.tool_name}\n{content}" if part.tool_name else content), 0
    if isinstance(part, UnknownPart):  # pyright: ignore[reportUnnecessaryIsInstance]
        return json_text(dict(part.data)), 0
    raise MessageError(f"cannot count tokens of {type(part).__name__!r}: not a message part")


def tool_text(tool: ToolDefinition | Mapping[str, Any], index: int) -> str:
    """Return the text a tool definition is counted by: its name, description and JSON schema.

    Args:
        tool: A ``ToolDefinition``, or a mapping with a ``"name"`` and optionally a
            ``"description"`` and ``"parameters_json_schema"`` (or ``"parameters"``).
        index: Its position among the definitions, for the error message.

    Raises:
        TokenizerError: ``tool`` is neither a ``ToolDefinition`` nor a mapping with a name.
    """
    if isinstance(tool, ToolDefinition):
        name, description, schema = tool.name, tool.description, tool.parameters_json_schema
    elif isinstance(tool, Mapping) and isinstance(tool.get("name"), str):  # pyright: ignore[reportUnnecessaryIsInstance]
        name = str(tool["name"])
        description = str(tool.get("description") or "")
        schema = tool.get("parameters_json_schema", tool.get("parameters"))
    else:
        raise TokenizerError(
            f"tool_definitions[{index}]: expected a ToolDefinition or a mapping with a 'name', "
            f"got {type(tool).__name__}"
        )
    schema_text = "" if schema is None else json_text(schema)
    return f"{name}\n{description}\n{schema_text}"
