"""``FunctionModel``: a model whose every response is decided by a Python function."""

from __future__ import annotations

from harness.errors import ModelResponseError

__all__ = ["FunctionInfo", "FunctionModel", "ModelResponseError", "estimate_usage", "finish_response"]

import inspect
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

import attrs

from harness.core.messages import CanonicalMessage, TextPart, Usage
from harness.core.model import ModelSettings, ToolDefinition
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

    Args:
        fn: The function deciding each response.
        model_name: The model's name (used to pick a tokenizer).
        context_window: The context window to report, if any.
    """

    def __init__(
        self,
        fn: ModelFunction,
        *,
        model_name: str = "function",
        context_window: int | None = None,
    ) -> None:
        self.fn = fn
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
        """Call the function and return its response."""
        sent = list(messages)
        self.requests.append(sent)
        info = FunctionInfo(tuple(tools), settings, self._model_name)
        result = self.fn(list(sent), info)
        if inspect.isawaitable(result):
            result = await result
        return finish_response(
            result,
            model_name=self._model_name,
            messages=sent,
            source="FunctionModel function",
            counter=self._tokens,
        )
