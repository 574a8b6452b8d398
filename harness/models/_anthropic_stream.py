"""Reading a streamed Anthropic message: events -> deltas, and the message they add up to.

With ``stream=True`` the Messages API sends ``message_start`` (the message with empty
``content`` and the input usage), then per content block ``content_block_start``,
``content_block_delta`` events (``text_delta``, ``thinking_delta``, ``signature_delta``,
``input_json_delta``, ``citations_delta``, ``compaction_delta``) and ``content_block_stop``,
then ``message_delta`` (``stop_reason``, the final usage and, with context management, the
``context_management`` the server applied) and ``message_stop``. ``ping`` events may come
anywhere; the SDK drops them and raises for an ``error`` event. A server-side ``compaction``
block comes whole: its summary (and ``encrypted_content``) in one ``compaction_delta``; it
yields no delta.

:class:`MessageAccumulator` turns each event into the deltas the consumer sees (their
``index`` is the block's ``index``, so it is the part's position in the response) and
rebuilds the non-streamed Message object, so the final message comes from the same
mapping as a plain request (:func:`harness.models.anthropic.from_anthropic_message`).
"""

from __future__ import annotations

__all__ = ["MessageAccumulator"]

from collections.abc import Mapping
from typing import Any

from harness.core.streaming import TextDelta, ThinkingDelta, ToolCallDelta
from harness.models._mapping import as_list, as_mapping, parse_arguments

_Delta = TextDelta | ThinkingDelta | ToolCallDelta
_JSON_INPUT = ("tool_use", "server_tool_use", "mcp_tool_use")


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


class MessageAccumulator:
    """Feed it every stream event (as a JSON object); it returns the deltas and, at the end, the message."""

    def __init__(self) -> None:
        self._message: dict[str, Any] = {}
        self._usage: dict[str, Any] = {}
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[str]] = {}
        self._stopped = False

    @property
    def finished(self) -> bool:
        """Whether ``message_stop`` arrived (a stream cut short has none)."""
        return self._stopped

    def feed(self, event: Mapping[str, Any]) -> list[_Delta]:
        """Take one stream event; return the deltas it carries."""
        kind = event.get("type")
        if kind == "message_start":
            self._message = {k: v for k, v in as_mapping(event.get("message")).items() if k != "content"}
            self._merge_usage(as_mapping(event.get("message")).get("usage"))
        elif kind == "content_block_start":
            return self._start(event)
        elif kind == "content_block_delta":
            return self._delta(event)
        elif kind == "content_block_stop":
            self._stop_block(event)
        elif kind == "message_delta":
            delta = as_mapping(event.get("delta"))
            for key in ("stop_reason", "stop_sequence", "container"):
                if key in delta:
                    self._message[key] = delta[key]
            if event.get("context_management") is not None:
                self._message["context_management"] = event["context_management"]
            self._merge_usage(event.get("usage"))
        elif kind == "message_stop":
            self._stopped = True
        return []

    def _merge_usage(self, usage: object) -> None:
        # message_delta repeats the usage with its final counts; a null keeps the earlier value.
        for key, value in as_mapping(usage).items():
            if value is not None:
                self._usage[key] = value

    def _start(self, event: Mapping[str, Any]) -> list[_Delta]:
        index = event.get("index")
        if not isinstance(index, int):
            return []
        block = dict(as_mapping(event.get("content_block")))
        self._blocks[index] = block
        kind = block.get("type")
        if kind in _JSON_INPUT:
            self._json[index] = []
            if kind == "tool_use":
                return [
                    ToolCallDelta(index, _text(block.get("id")) or None, _text(block.get("name")) or None)
                ]
        elif kind == "text" and _text(block.get("text")):
            return [TextDelta(_text(block.get("text")), index)]
        elif kind == "thinking" and (_text(block.get("thinking")) or _text(block.get("signature"))):
            return [ThinkingDelta(_text(block.get("thinking")), index, _text(block.get("signature")) or None)]
        return []

    def _delta(self, event: Mapping[str, Any]) -> list[_Delta]:
        index = event.get("index")
        block = self._blocks.get(index) if isinstance(index, int) else None
        if block is None or not isinstance(index, int):
            return []
        delta = as_mapping(event.get("delta"))
        kind = delta.get("type")
        if kind == "text_delta":
            text = _text(delta.get("text"))
            block["text"] = _text(block.get("text")) + text
            return [TextDelta(text, index)] if text else []
        if kind == "thinking_delta":
            text = _text(delta.get("thinking"))
            block["thinking"] = _text(block.get("thinking")) + text
            return [ThinkingDelta(text, index)] if text else []
        if kind == "signature_delta":
            signature = _text(delta.get("signature"))
            block["signature"] = signature
            return [ThinkingDelta("", index, signature)] if block.get("type") == "thinking" else []
        if kind == "compaction_delta":  # each delta carries the summary whole (the SDK replaces too)
            for key in ("content", "encrypted_content"):
                if key in delta:
                    block[key] = delta[key]
            return []
        if kind == "input_json_delta":
            fragment = _text(delta.get("partial_json"))
            self._json.setdefault(index, []).append(fragment)
            if block.get("type") == "tool_use" and fragment:
                return [ToolCallDelta(index, args_delta=fragment)]
            return []
        if kind == "citations_delta":
            block["citations"] = [*as_list(block.get("citations")), delta.get("citation")]
        return []

    def _stop_block(self, event: Mapping[str, Any]) -> None:
        index = event.get("index")
        if not isinstance(index, int) or index not in self._blocks:
            return
        fragments = self._json.pop(index, None)
        if fragments:  # no input_json_delta: the input of content_block_start stands
            # {} when blank, the object, or the raw text when it is not one (the loop asks for a fix)
            self._blocks[index]["input"] = parse_arguments("".join(fragments))

    def message(self) -> dict[str, Any]:
        """The Message object the events so far add up to (blocks in index order)."""
        for index in list(self._json):  # blocks whose content_block_stop never came
            self._stop_block({"index": index})
        return {
            **self._message,
            "content": [block for _, block in sorted(self._blocks.items())],
            "usage": dict(self._usage),
        }
