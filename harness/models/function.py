"""``FunctionModel``: a model whose every response is decided by a Python function.

It can stream (:meth:`FunctionModel.request_stream`): give it a ``stream_function``, an
async generator yielding text chunks and deltas, or let it cut the regular function's
response into deltas (:func:`response_deltas`), so streamed runs are testable offline::

    async def stream(messages, info):
        yield "Hello"
        yield ", world"
        yield ToolCallDelta(1, "call_1", "get_weather", '{"city": ')
        yield ToolCallDelta(1, args_delta='"Paris"}')

    model = FunctionModel(stream_function=stream)
"""

from __future__ import annotations

from harness.errors import ModelResponseError

__all__ = [
    "FunctionInfo",
    "FunctionModel",
    "ModelResponseError",
    "StreamFunction",
    "StreamItem",
    "estimate_usage",
    "finish_response",
    "response_deltas",
]

import inspect
import json
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import TypeAlias

import attrs

from harness.core.messages import CanonicalMessage, Part, TextPart, ThoughtPart, ToolCallPart, Usage
from harness.core.model import ModelSettings, ToolDefinition
from harness.core.streaming import (
    ResponseDone,
    StreamDelta,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    collect_stream,
)
from harness.models._mapping import parse_arguments
from harness.tokens import TokenCounter


@attrs.frozen
class FunctionInfo:
    """What the function of a :class:`FunctionModel` learns besides the messages.

    Attributes:
        tools: The tool definitions offered for this request.
        settings: The model settings of this request.
        model_name: The model's name.
    """

    tools: tuple[ToolDefinition, ...]
    settings: ModelSettings
    model_name: str = "function"


FunctionReturn = CanonicalMessage | str
ModelFunction = Callable[[list[CanonicalMessage], FunctionInfo], FunctionReturn | Awaitable[FunctionReturn]]

StreamItem: TypeAlias = str | TextDelta | ThinkingDelta | ToolCallDelta
"""What a stream function yields: a text chunk, or a delta."""

StreamFunction: TypeAlias = Callable[[list[CanonicalMessage], FunctionInfo], AsyncIterator[StreamItem]]
"""An async generator function ``(messages, info)`` yielding :data:`StreamItem` values."""

_Delta: TypeAlias = TextDelta | ThinkingDelta | ToolCallDelta
_WORDS = re.compile(r"\S+\s*|\s+")


def _chunks(text: str) -> list[str]:
    """``text`` cut after each word's trailing whitespace (joined, they give ``text`` back)."""
    return _WORDS.findall(text)


def _arguments_json(args: object) -> str:
    if args is None:
        return ""
    if isinstance(args, str):
        return args
    return json.dumps(args, ensure_ascii=False, default=str)


def response_deltas(message: CanonicalMessage) -> Iterator[TextDelta | ThinkingDelta | ToolCallDelta]:
    """The deltas a streaming model would send for ``message``, each indexed by its part.

    Text and thinking come word by word (a thinking signature as a last
    :class:`~harness.core.streaming.ThinkingDelta`); a tool call as a first delta with
    its id and name, then its JSON arguments in about three fragments. Other parts give
    no deltas (they are in the final message only).
    """
    for index, part in enumerate(message.parts):
        if isinstance(part, TextPart):
            for chunk in _chunks(part.content):
                yield TextDelta(chunk, index)
        elif isinstance(part, ThoughtPart):
            for chunk in _chunks(part.content):
                yield ThinkingDelta(chunk, index)
            if part.signature:
                yield ThinkingDelta("", index, part.signature)
        elif isinstance(part, ToolCallPart):
            yield ToolCallDelta(index, part.tool_call_id, part.tool_name)
            text = _arguments_json(part.args)
            step = max(1, -(-len(text) // 3))
            for start in range(0, len(text), step):
                yield ToolCallDelta(index, args_delta=text[start : start + step])


@attrs.define
class _Building:
    kind: type[_Delta]
    chunks: list[str] = attrs.field(factory=list[str])
    signature: str | None = None
    call_id: str = ""
    tool_name: str = ""


class _Assembler:
    """Collects a stream function's items into deltas (forwarded) and the final parts."""

    def __init__(self, source: str) -> None:
        self._source = source
        self._parts: dict[int, _Building] = {}
        self._last: int | None = None

    def add(self, item: object) -> _Delta | None:
        if isinstance(item, str):
            if not item:
                return None
            last = self._last
            if last is None or self._parts[last].kind is not TextDelta:
                last = max(self._parts, default=-1) + 1
            item = TextDelta(item, last)
        if not isinstance(item, TextDelta | ThinkingDelta | ToolCallDelta):
            raise ModelResponseError(
                f"{self._source} yielded {type(item).__name__}: "
                "it may yield only str, TextDelta, ThinkingDelta or ToolCallDelta"
            )
        building = self._parts.get(item.index)
        if building is None:
            building = _Building(type(item))
            self._parts[item.index] = building
            if isinstance(item, ToolCallDelta):
                if not item.tool_name:
                    raise ModelResponseError(
                        f"{self._source}: the first ToolCallDelta of index {item.index} has no tool_name"
                    )
                building.call_id = item.tool_call_id or f"call_{uuid.uuid4().hex[:24]}"
                building.tool_name = item.tool_name
                item = attrs.evolve(item, tool_call_id=building.call_id)
        elif building.kind is not type(item):
            raise ModelResponseError(
                f"{self._source} yielded a {type(item).__name__} for index {item.index}, "
                f"which holds a {building.kind.__name__} part"
            )
        self._last = item.index
        if isinstance(item, ToolCallDelta):
            building.chunks.append(item.args_delta)
        else:
            building.chunks.append(item.text)
            if isinstance(item, ThinkingDelta) and item.signature is not None:
                building.signature = item.signature
        return item

    def message(self) -> CanonicalMessage:
        parts: list[Part] = []
        for _, building in sorted(self._parts.items()):
            text = "".join(building.chunks)
            if building.kind is TextDelta:
                parts.append(TextPart(text))
            elif building.kind is ThinkingDelta:
                parts.append(ThoughtPart(text, signature=building.signature))
            else:
                parts.append(
                    ToolCallPart(
                        tool_call_id=building.call_id,
                        tool_name=building.tool_name,
                        args=parse_arguments(text),
                    )
                )
        return CanonicalMessage.response(*parts)


def estimate_usage(
    model_name: str,
    messages: Sequence[CanonicalMessage],
    response: CanonicalMessage,
    *,
    counter: TokenCounter | None = None,
) -> Usage:
    """Estimate a request's usage by counting its messages and its response.

    Args:
        model_name: The model's name (picks the tokenizer when ``counter`` is ``None``).
        messages: The messages sent.
        response: The response received.
        counter: The token counter to use; pass the model's own to reuse its caches
            between requests. Default: a new ``TokenCounter(model_name)``.
    """
    if counter is None:
        counter = TokenCounter(model_name)
    return Usage(
        request_tokens=counter.count_messages(messages),
        response_tokens=counter.count_message(response),
    )


def finish_response(
    result: object,
    *,
    model_name: str,
    messages: Sequence[CanonicalMessage],
    source: str,
    counter: TokenCounter | None = None,
) -> CanonicalMessage:
    """Turn what a test model produced into a complete response message.

    A string becomes a response with one text part; ``model_name``, ``timestamp`` and an
    estimated ``usage`` (counted with ``counter``, see :func:`estimate_usage`) are filled
    in when missing.

    Raises:
        ModelResponseError: ``result`` is neither a string nor a response message.
    """
    if isinstance(result, str):
        response = CanonicalMessage.response(TextPart(result))
    elif isinstance(result, CanonicalMessage) and result.kind == "response":
        response = result
    else:
        raise ModelResponseError(
            f"{source} must return a response CanonicalMessage or a str, got {type(result).__name__}"
            + (" (a request)" if isinstance(result, CanonicalMessage) else "")
        )
    changes: dict[str, object] = {}
    if response.model_name is None:
        changes["model_name"] = model_name
    if response.timestamp is None:
        changes["timestamp"] = datetime.now(UTC)
    if response.usage is None:
        changes["usage"] = estimate_usage(model_name, messages, response, counter=counter)
    return response.replace(**changes) if changes else response


class FunctionModel:
    """A model whose responses come from ``fn(messages, info)``.

    ``fn`` may be sync or async and returns a response :class:`CanonicalMessage` or a
    string (which becomes a text response). Responses without usage get an estimate from
    the token counter, so usage accounting works in tests.

    :meth:`request_stream` streams ``stream_function``'s items when there is one, else
    ``fn``'s response cut into deltas (:func:`response_deltas`). With only a
    ``stream_function``, :meth:`request` collects its stream.

    Args:
        fn: The function deciding each response.
        stream_function: An async generator function ``(messages, info)`` yielding text
            chunks (``str``, appended to the current text part or starting one) and
            :class:`~harness.core.streaming.TextDelta` /
            :class:`~harness.core.streaming.ThinkingDelta` /
            :class:`~harness.core.streaming.ToolCallDelta` values (a call's first delta
            names the tool; its id is made up when missing). The response's parts are
            in the order of the deltas' ``index``; tool arguments are parsed from the
            joined fragments (kept raw when they are not a JSON object).
        model_name: The model's name (used to pick a tokenizer).
        context_window: The context window to report, if any.

    Raises:
        TypeError: Neither ``fn`` nor ``stream_function`` was given.
    """

    def __init__(
        self,
        fn: ModelFunction | None = None,
        *,
        stream_function: StreamFunction | None = None,
        model_name: str = "function",
        context_window: int | None = None,
    ) -> None:
        if fn is None and stream_function is None:
            raise TypeError(
                "FunctionModel needs fn (a function returning each response), stream_function, or both"
            )
        self.fn = fn
        self.stream_function = stream_function
        self._model_name = model_name
        self._context_window = context_window
        self._tokens = TokenCounter(model_name)  # estimates usage; its caches span requests
        self.requests: list[list[CanonicalMessage]] = []
        """Every message list this model was sent, in order (for assertions in tests)."""

    @property
    def model_name(self) -> str:
        """The model's name."""
        return self._model_name

    @property
    def context_window(self) -> int | None:
        """The configured context window."""
        return self._context_window

    @classmethod
    def from_responses(
        cls,
        *steps: FunctionReturn | ModelFunction,
        model_name: str = "function",
        context_window: int | None = None,
    ) -> FunctionModel:
        """A model that plays ``steps`` in order, one per request (a scripted conversation).

        Each step is a response, a string, or a function called like ``fn``. Asking for
        more responses than there are steps raises :class:`ModelResponseError`.
        """
        remaining = list(steps)

        async def play(messages: list[CanonicalMessage], info: FunctionInfo) -> FunctionReturn:
            if not remaining:
                raise ModelResponseError(f"scripted model: all {len(steps)} scripted responses were used")
            step = remaining.pop(0)
            if isinstance(step, CanonicalMessage | str):
                return step
            result = step(messages, info)
            if inspect.isawaitable(result):
                result = await result
            return result

        return cls(play, model_name=model_name, context_window=context_window)

    async def request(
        self,
        messages: Sequence[CanonicalMessage],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings,
    ) -> CanonicalMessage:
        """Call the function and return its response (the collected stream without ``fn``)."""
        if self.fn is None:
            return await collect_stream(self, messages, tools, settings, None)
        sent = list(messages)
        self.requests.append(sent)
        return await self._call(self.fn, sent, FunctionInfo(tuple(tools), settings, self._model_name))

    async def _call(
        self, fn: ModelFunction, sent: list[CanonicalMessage], info: FunctionInfo
    ) -> CanonicalMessage:
        result = fn(list(sent), info)
        if inspect.isawaitable(result):
            result = await result
        return finish_response(
            result,
            model_name=self._model_name,
            messages=sent,
            source="FunctionModel function",
            counter=self._tokens,
        )

    async def request_stream(
        self,
        messages: Sequence[CanonicalMessage],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings,
    ) -> AsyncIterator[StreamDelta]:
        """Yield the response's deltas, then :class:`~harness.core.streaming.ResponseDone`.

        Raises:
            ModelResponseError: The stream function yielded something that is not a text
                chunk or a delta, a tool call's first delta has no ``tool_name``, or one
                ``index`` got deltas of two kinds.
        """
        sent = list(messages)
        self.requests.append(sent)
        info = FunctionInfo(tuple(tools), settings, self._model_name)
        stream_function = self.stream_function
        if stream_function is None:
            if self.fn is None:  # both attributes were cleared after construction
                raise ModelResponseError("FunctionModel has neither fn nor stream_function")
            response = await self._call(self.fn, sent, info)
            for delta in response_deltas(response):
                yield delta
            yield ResponseDone(response)
            return
        source = "FunctionModel stream_function"
        assembler = _Assembler(source)
        items = stream_function(list(sent), info)
        try:
            async for item in items:
                delta = assembler.add(item)
                if delta is not None:
                    yield delta
        finally:
            aclose = getattr(items, "aclose", None)
            if aclose is not None:
                await aclose()
        yield ResponseDone(
            finish_response(
                assembler.message(),
                model_name=self._model_name,
                messages=sent,
                source=source,
                counter=self._tokens,
            )
        )
