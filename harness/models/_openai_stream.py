"""Reading a streamed Chat Completion: chunks -> deltas, and the completion they add up to.

With ``stream=True`` the Chat Completions API sends ``chat.completion.chunk`` objects whose
``choices[0].delta`` holds fragments: ``content``, ``refusal``, ``reasoning_content`` /
``reasoning`` (DeepSeek, vLLM, Ollama, OpenRouter) and ``tool_calls`` entries, each naming
its call by ``index`` (``id`` and ``function.name`` on the call's first fragment, then
pieces of ``function.arguments``). ``finish_reason`` comes on the last chunk of the
choice; with ``stream_options={"include_usage": true}`` one more chunk with no choices
carries ``usage``.

:class:`CompletionAccumulator` turns each chunk into the deltas the consumer sees and
rebuilds the non-streamed ``chat.completion`` object, so the final message comes from
the same mapping as a plain request (:func:`harness.models.openai.from_openai_completion`).

Delta indices: Chat Completions does not number the parts of a message, so they are
fixed: :data:`THINKING_INDEX`, :data:`TEXT_INDEX`, :data:`REFUSAL_INDEX`, and a tool
call's own ``index`` plus :data:`TOOL_CALL_INDEX_OFFSET`.
"""

from __future__ import annotations

__all__ = [
    "REFUSAL_INDEX",
    "TEXT_INDEX",
    "THINKING_INDEX",
    "TOOL_CALL_INDEX_OFFSET",
    "CompletionAccumulator",
]

import uuid
from collections.abc import Mapping
from typing import Any

import attrs

from harness.core.streaming import TextDelta, ThinkingDelta, ToolCallDelta
from harness.models._mapping import as_list, as_mapping

THINKING_INDEX = 0
"""``index`` of the deltas of the reasoning text."""

TEXT_INDEX = 1
"""``index`` of the deltas of ``content``."""

REFUSAL_INDEX = 2
"""``index`` of the deltas of ``refusal``."""

TOOL_CALL_INDEX_OFFSET = 3
"""Added to a tool call's ``index`` in the stream to give its deltas' ``index``."""

_Delta = TextDelta | ThinkingDelta | ToolCallDelta


@attrs.define
class _Call:
    call_id: str
    name: str
    arguments: list[str] = attrs.field(factory=list[str])


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


class CompletionAccumulator:
    """Feed it every chunk (as a JSON object); it returns the deltas and, at the end, the completion."""

    def __init__(self) -> None:
        self._head: dict[str, Any] = {}
        self._usage: object = None
        self._finish_reason: str | None = None
        self._content: list[str] = []
        self._refusal: list[str] = []
        self._reasoning: list[str] = []
        self._reasoning_key = "reasoning_content"
        self._calls: dict[int, _Call] = {}

    @property
    def finished(self) -> bool:
        """Whether the choice's ``finish_reason`` arrived (a stream cut short has none)."""
        return self._finish_reason is not None

    def feed(self, chunk: Mapping[str, Any]) -> list[_Delta]:
        """Take one ``chat.completion.chunk``; return the deltas it carries, in order."""
        for key in ("id", "created", "model", "system_fingerprint", "service_tier"):
            value: object = chunk.get(key)
            if value is not None and key not in self._head:
                self._head[key] = value
        usage: object = chunk.get("usage")
        if usage is not None:
            self._usage = usage
        deltas: list[_Delta] = []
        for entry in as_list(chunk.get("choices")):
            choice = as_mapping(entry)
            if choice.get("index", 0) != 0:  # n > 1: only the first choice is kept, as in a request
                continue
            delta = as_mapping(choice.get("delta"))
            for key in ("reasoning_content", "reasoning"):
                text = _text(delta.get(key))
                if text:
                    self._reasoning_key = key
                    self._reasoning.append(text)
                    deltas.append(ThinkingDelta(text, THINKING_INDEX))
            text = _text(delta.get("content"))
            if text:
                self._content.append(text)
                deltas.append(TextDelta(text, TEXT_INDEX))
            text = _text(delta.get("refusal"))
            if text:
                self._refusal.append(text)
                deltas.append(TextDelta(text, REFUSAL_INDEX))
            for item in as_list(delta.get("tool_calls")):
                deltas.extend(self._tool_call(as_mapping(item)))
            finish: object = choice.get("finish_reason")
            if isinstance(finish, str) and finish:
                self._finish_reason = finish
        return deltas

    def _tool_call(self, item: Mapping[str, Any]) -> list[_Delta]:
        function = as_mapping(item.get("function"))
        call_id = _text(item.get("id"))
        name = _text(function.get("name"))
        arguments = _text(function.get("arguments"))
        position: object = item.get("index")
        if not isinstance(position, int):
            # Some compatible servers omit the index: match the call by id, else a new call.
            known = [i for i, c in self._calls.items() if call_id and c.call_id == call_id]
            position = known[0] if known else len(self._calls)
        call = self._calls.get(position)
        index = position + TOOL_CALL_INDEX_OFFSET
        if call is None:
            call = _Call(call_id or f"call_{uuid.uuid4().hex[:24]}", name)
            self._calls[position] = call
            call.arguments.append(arguments)
            return [ToolCallDelta(index, call.call_id, call.name or None, arguments)]
        if name and not call.name:
            call.name = name
        if not arguments:
            return []
        call.arguments.append(arguments)
        return [ToolCallDelta(index, args_delta=arguments)]

    def completion(self) -> dict[str, Any]:
        """The ``chat.completion`` object the chunks so far add up to."""
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(self._content) or None,
            "refusal": "".join(self._refusal) or None,
        }
        if self._reasoning:
            message[self._reasoning_key] = "".join(self._reasoning)
        if self._calls:
            message["tool_calls"] = [
                {
                    "id": call.call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": "".join(call.arguments)},
                }
                for _, call in sorted(self._calls.items())
            ]
        return {
            **self._head,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish_reason}],
            "usage": self._usage,
        }
