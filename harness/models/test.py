"""``TestModel``: calls every tool once with schema-generated arguments, then answers."""

from __future__ import annotations

__all__ = ["TEST_CONTEXT_WINDOW", "TestModel", "example_for_schema"]

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from harness.core.messages import CanonicalMessage, RetryPromptPart, ToolCallPart, ToolReturnPart
from harness.core.model import ModelSettings, ToolDefinition
from harness.core.streaming import ResponseDone, StreamDelta
from harness.models.function import finish_response, response_deltas
from harness.tokens import TokenCounter

TEST_CONTEXT_WINDOW = 128_000
"""The context window a :class:`TestModel` reports unless told otherwise (that of ``gpt-4o``)."""


def example_for_schema(schema: Mapping[str, Any]) -> Any:
    """Return a simple value valid for ``schema`` (first enum value, ``"a"``, ``0``...)."""
    if schema.get("enum"):
        return schema["enum"][0]
    if schema.get("anyOf"):
        return example_for_schema(schema["anyOf"][0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds: list[Any] = [k for k in kind if k != "null"] or ["null"]  # pyright: ignore[reportUnknownVariableType]
        kind = kinds[0]
    if kind == "string":
        return "a"
    if kind == "integer":
        return 0
    if kind == "number":
        return 0.0
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    if kind == "array":
        prefix = schema.get("prefixItems")
        if prefix:
            return [example_for_schema(s) for s in prefix]
        return []
    if kind == "object" or "properties" in schema:
        properties: Mapping[str, Any] = schema.get("properties", {})
        return {name: example_for_schema(sub) for name, sub in properties.items()}
    return None


class TestModel:
    """A model that calls each offered tool once, then answers ``final_text``.

    On a request whose last message holds no tool answers (a fresh user prompt), it
    calls every tool (or those named in ``call_tools``) with arguments generated from
    the tool's schema. Once the tools answered, it returns ``final_text``.

    It can stream: :meth:`request_stream` yields the same answer word by word, each tool
    call as a first delta (id and name) and fragments of its JSON arguments.

    Args:
        model_name: The model's name.
        context_window: The context window to report, :data:`TEST_CONTEXT_WINDOW` by
            default, so a stack with fraction triggers works with it as with a real model;
            ``None`` reports an unknown window.
        final_text: The final answer.
        call_tools: Names of the tools to call (default: all).

    Raises:
        ValueError: ``context_window`` is below 1.
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        *,
        model_name: str = "test",
        context_window: int | None = TEST_CONTEXT_WINDOW,
        final_text: str = "done",
        call_tools: Sequence[str] | None = None,
    ) -> None:
        if context_window is not None and context_window < 1:
            raise ValueError(f"TestModel: context_window must be at least 1, got {context_window}")
        self._model_name = model_name
        self._context_window = context_window
        self.final_text = final_text
        self.call_tools = None if call_tools is None else tuple(call_tools)
        self._counter = 0
        self._tokens = TokenCounter(model_name)  # estimates usage; its caches span requests

    @property
    def model_name(self) -> str:
        """The model's name."""
        return self._model_name

    @property
    def context_window(self) -> int | None:
        """The context window in tokens (:data:`TEST_CONTEXT_WINDOW` unless configured)."""
        return self._context_window

    async def request(
        self,
        messages: Sequence[CanonicalMessage],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings,
    ) -> CanonicalMessage:
        """Call the tools on a fresh prompt, answer ``final_text`` after their results."""
        return self._respond(messages, tools)

    async def request_stream(
        self,
        messages: Sequence[CanonicalMessage],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings,
    ) -> AsyncIterator[StreamDelta]:
        """Yield :meth:`request`'s answer as deltas, then :class:`~harness.core.streaming.ResponseDone`."""
        response = self._respond(messages, tools)
        for delta in response_deltas(response):
            yield delta
        yield ResponseDone(response)

    def _respond(
        self, messages: Sequence[CanonicalMessage], tools: Sequence[ToolDefinition]
    ) -> CanonicalMessage:
        last = messages[-1] if messages else None
        answered = last is not None and any(
            isinstance(p, ToolReturnPart) or (isinstance(p, RetryPromptPart) and p.answers_tool_call)
            for p in last.parts
        )
        selected = [t for t in tools if self.call_tools is None or t.name in self.call_tools]
        if answered or not selected:
            result: CanonicalMessage | str = self.final_text
        else:
            calls: list[ToolCallPart] = []
            for tool in selected:
                self._counter += 1
                generated: Any = example_for_schema(tool.parameters_json_schema)
                args: dict[str, Any] = dict(generated) if isinstance(generated, dict) else {}  # pyright: ignore[reportUnknownArgumentType]
                calls.append(
                    ToolCallPart(tool_call_id=f"test_call_{self._counter}", tool_name=tool.name, args=args)
                )
            result = CanonicalMessage.response(*calls)
        return finish_response(
            result, model_name=self._model_name, messages=messages, source="TestModel", counter=self._tokens
        )
