"""Telling the formats of a history apart: :func:`detect_format`.

Each message is looked at on its own:

* ``kind`` or ``parts`` (without ``role``), or a legacy ``{"content": ...}`` /
  ``{"thought": ...}`` entry: ``pydantic-ai`` (harness's wire format);
* ``role`` with OpenAI-only traits (a ``developer``, ``tool`` or ``function`` role,
  ``tool_calls``, ``tool_call_id``, ``function_call``, ``refusal``, ``reasoning_content``,
  ``image_url`` / ``input_audio`` / ``file`` content items): ``openai``;
* ``role`` with Anthropic-only traits (``tool_use``, ``tool_result``, ``thinking``,
  ``redacted_thinking``, ``document`` and server-tool blocks, images with a ``source``,
  a ``stop_reason``, ``"type": "message"``): ``anthropic``;
* ``role`` with neither (plain text turns, which both readers read alike): either.

A document whose messages point to two formats, or to none of them, is an error that
says what was seen and which formats are accepted. OpenAI Responses API items, Gemini
``contents`` and LangChain messages are recognised so the error can name them. Part of
:mod:`harness.wire`; import the public API from there.
"""

from __future__ import annotations

__all__ = ["ACCEPTED_FORMATS", "classify", "detect_format"]

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Final, cast

from harness.errors import WireFormatError
from harness.wire.foreign import HistoryFormat, is_mapping
from harness.wire.records import Entry, document_messages, entries_of, is_bookkeeping
from harness.wire.values import type_name

ACCEPTED_FORMATS: Final = (
    "accepted formats: pydantic-ai (harness's wire format, pydantic-ai's message JSON), "
    "openai (Chat Completions messages), anthropic (Messages API messages, Claude Code transcripts)"
)
"""The sentence every unrecognised-format error ends with."""

_OPENAI_ROLES: Final = frozenset({"developer", "tool", "function"})
_OPENAI_KEYS: Final = ("tool_calls", "tool_call_id", "function_call", "refusal", "reasoning_content")
_OPENAI_ITEMS: Final = frozenset({"image_url", "input_audio", "file", "refusal"})
_ANTHROPIC_KEYS: Final = ("stop_reason", "stop_sequence")
_ANTHROPIC_BLOCKS: Final = frozenset(
    {
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "document",
        "search_result",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "container_upload",
    }
)
_RESPONSES_ITEMS: Final = frozenset({"input_text", "output_text", "input_image", "input_file"})
_RESPONSES_TYPES: Final = frozenset({"function_call", "function_call_output", "reasoning", "item_reference"})
_LANGCHAIN_TYPES: Final = frozenset({"human", "ai", "system", "tool", "chat", "function"})

_FOREIGN: Final = {
    "openai-responses": "OpenAI Responses API items",
    "gemini": "Google Gemini contents",
    "langchain": "LangChain messages",
}


def _role_shape(data: Mapping[str, Any]) -> tuple[str, str]:
    role: object = data.get("role")
    if "parts" in data or role == "model":
        return "gemini", "a 'parts' list beside 'role'" if "parts" in data else "role 'model'"
    if role in _OPENAI_ROLES:
        return "openai", f"role {role!r}"
    for key in _OPENAI_KEYS:
        if data.get(key) is not None:
            return "openai", f"a {key!r} key"
    for key in _ANTHROPIC_KEYS:
        if data.get(key) is not None:
            return "anthropic", f"a {key!r} key"
    content: object = data.get("content")
    if isinstance(content, list):
        for block in cast("list[Any]", content):
            if not is_mapping(block):
                continue
            fields = cast("Mapping[str, Any]", block)
            kind: object = fields.get("type")
            if kind in _RESPONSES_ITEMS:
                return "openai-responses", f"an {kind!r} content item"
            if kind in _ANTHROPIC_BLOCKS or (kind == "image" and "source" in fields):
                return "anthropic", f"a {kind!r} block"
            if kind in _OPENAI_ITEMS:
                return "openai", f"an {kind!r} content item"
    if data.get("type") == "message":
        return "anthropic", "a Messages API response ('type': 'message')"
    return "chat", "plain role and content"


def _shape(item: object) -> tuple[str, str]:
    """The format ``item`` points to and what showed it.

    The format is one of the accepted ones, ``"chat"`` (either chat format), a foreign
    format harness does not read, or ``"unknown"``.
    """
    if not is_mapping(item):
        return "unknown", f"a JSON {type_name(item)}"
    data = cast("Mapping[str, Any]", item)
    if "lc" in data and "kwargs" in data:
        return "langchain", "a serialised LangChain message"
    if "role" in data:
        return _role_shape(data)
    if "kind" in data or "parts" in data:
        return "pydantic-ai", "'kind' and 'parts'"
    kind: object = data.get("type")
    if kind in _RESPONSES_TYPES:
        return "openai-responses", f"an item of type {kind!r}"
    if kind in _LANGCHAIN_TYPES and is_mapping(data.get("data")):
        return "langchain", f"type {kind!r} with 'data'"
    if "content" in data or "thought" in data:
        return "pydantic-ai", "a legacy {'content': ...} entry"
    keys = ", ".join(repr(key) for key in list(data)[:6]) or "no keys"
    return "unknown", f"an object with {keys}"


def classify(entries: Sequence[Entry], *, lines: Sequence[int] | None = None) -> HistoryFormat:
    """The one accepted format every message of ``entries`` fits.

    Raises:
        WireFormatError: A message fits no accepted format, or the messages mix two; the
            error names the message (and line), what was seen, and the accepted formats. A
            document of typed objects that are no messages (a Claude Code file holding only
            ``summary`` lines) says so.
    """
    seen: dict[str, tuple[int, str]] = {}
    if entries and all(is_bookkeeping(e.message) and _shape(e.message)[0] == "unknown" for e in entries):
        kinds = Counter(str(cast("Mapping[str, Any]", e.message)["type"]) for e in entries)
        counts = ", ".join(f"{kind}: {count}" for kind, count in sorted(kinds.items()))
        raise WireFormatError(f"no message found, only records without one ({counts}); {ACCEPTED_FORMATS}")
    for entry in entries:
        shape, why = _shape(entry.message)
        if shape not in seen:
            seen[shape] = (entry.index, why)
        if shape == "unknown" or shape in _FOREIGN:
            line = lines[entry.index] if lines is not None and entry.index < len(lines) else None
            what = "not a message of any accepted format" if shape == "unknown" else _FOREIGN[shape]
            raise WireFormatError(
                f"{why}: {what}, which harness does not read; {ACCEPTED_FORMATS}",
                message_index=entry.index,
                line=line,
            )
    accepted = [shape for shape in ("pydantic-ai", "openai", "anthropic") if shape in seen]
    if "pydantic-ai" in seen and "chat" in seen:
        accepted.append("chat")
    if len(accepted) > 1:
        described = " and ".join(
            f"{'role-shaped chat' if shape == 'chat' else shape} messages "
            f"(message {seen[shape][0]}: {seen[shape][1]})"
            for shape in accepted
        )
        raise WireFormatError(f"the document mixes {described}; pass a format to read it as one of them")
    if accepted == ["anthropic"]:
        return "anthropic"
    if accepted == ["pydantic-ai"] or not seen:
        return "pydantic-ai"
    return "openai"


def detect_format(document: Any) -> HistoryFormat:
    """The format of a parsed history document.

    Args:
        document: Parsed JSON: a list of messages or transcript records, an object with a
            ``messages`` list (a request body), or one message.

    Returns:
        ``"pydantic-ai"``, ``"openai"`` or ``"anthropic"``. Plain text turns (``role`` and
        string content only) read the same either way and are reported as ``"openai"``;
        an empty list as ``"pydantic-ai"``.

    Raises:
        WireFormatError: The document is not a history in an accepted format, or mixes
            formats; the error says what was seen and which formats are accepted.
    """
    items, system = document_messages(document)
    entries, _ = entries_of(items)
    detected = classify(entries)
    if system is not None and detected == "openai":
        return "anthropic"  # only the Messages API has a top-level system
    return detected
