"""Build histories and request contexts for tests in a few readable lines.

::

    from harness.testing import HistoryBuilder

    messages = (
        HistoryBuilder()
        .system("You are terse.")
        .user("Read a.txt and b.txt")
        .thinking("two reads, in parallel")
        .parallel(("read_file", {"path": "a.txt"}, "A" * 500), ("read_file", {"path": "b.txt"}, "B"))
        .retry("bash", {"cmd": "lss"}, error="command not found", result="a.txt b.txt")
        .text("Both read.")
        .user("Now summarise them")  # the request being sent
        .build()
    )

Request-side steps (``system``, ``user``, tool answers) go into the *pending request*;
response-side steps (``thinking``, ``text``, tool calls) go into the *pending response*.
A tool call ends its response (the model stops to wait for the tool); its answer goes
into the next request. Switching sides closes the pending message, so requests and
responses always alternate. Tool call ids are ``call_1``, ``call_2``... unless given.
"""

from __future__ import annotations

from harness.errors import HistoryBuildError

__all__ = [
    "HistoryBuilder",
    "ToolArgs",
    "make_context",
]

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self

from harness.capabilities.context import RequestContext
from harness.core.messages import (
    CanonicalMessage,
    JsonValue,
    Part,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from harness.errors import MessageError
from harness.history import check_invariants
from harness.tokens import TokenCounter

if TYPE_CHECKING:
    from harness.core.model import Model
    from harness.hooks.manager import PluginManager

ToolArgs = Mapping[str, Any] | str | None
"""Arguments of a tool call: a mapping, a JSON string (OpenAI style) or ``None``."""


class HistoryBuilder:
    """A fluent builder of histories (see the module docstring).

    Args:
        model_name: ``model_name`` set on every response.
        id_prefix: Prefix of generated tool call ids.
    """

    def __init__(self, *, model_name: str | None = "test-model", id_prefix: str = "call_") -> None:
        self._model_name = model_name
        self._id_prefix = id_prefix
        self._messages: list[CanonicalMessage] = []
        self._request: list[Part] = []
        self._response: list[Part] = []
        self._counter = 0
        self._ids: list[str] = []

    # -- bookkeeping ---------------------------------------------------------------------

    def _close_request(self) -> None:
        if self._request:
            self._messages.append(CanonicalMessage.request(*self._request))
            self._request = []

    def _close_response(self) -> None:
        if self._response:
            self._messages.append(CanonicalMessage.response(*self._response, model_name=self._model_name))
            self._response = []

    def _request_part(self, part: Part) -> None:
        self._close_response()
        self._request.append(part)

    def _response_part(self, part: Part) -> None:
        self._close_request()
        self._response.append(part)

    def _new_id(self, given: str | None) -> str:
        if given is not None:
            if not given:
                raise HistoryBuildError("tool_call_id must be a non-empty string")
            if given in self._ids:
                raise HistoryBuildError(f"tool_call_id {given!r} is already used in this history")
            call_id = given
        else:
            self._counter += 1
            call_id = f"{self._id_prefix}{self._counter}"
            while call_id in self._ids:
                self._counter += 1
                call_id = f"{self._id_prefix}{self._counter}"
        self._ids.append(call_id)
        return call_id

    @property
    def call_ids(self) -> tuple[str, ...]:
        """Every tool call id used so far, in order."""
        return tuple(self._ids)

    @property
    def last_call_id(self) -> str:
        """The id of the newest tool call.

        Raises:
            HistoryBuildError: No tool call was added yet.
        """
        if not self._ids:
            raise HistoryBuildError("no tool call was added yet")
        return self._ids[-1]

    # -- request side --------------------------------------------------------------------

    def system(self, text: str) -> Self:
        """Add a system prompt to the pending request."""
        self._request_part(SystemPromptPart(text))
        return self

    def user(self, text: str) -> Self:
        """Add a user prompt to the pending request (closing the pending response)."""
        self._request_part(UserPromptPart(text))
        return self

    def request(self, *parts: Part) -> Self:
        """Close pending messages and add a request made of ``parts`` as it is.

        Raises:
            HistoryBuildError: A part is not a request part.
        """
        self._close_response()
        self._close_request()
        try:
            self._messages.append(CanonicalMessage.request(*parts))
        except MessageError as exc:
            raise HistoryBuildError(f"request at message {len(self._messages)}: {exc}") from exc
        return self

    # -- response side -------------------------------------------------------------------

    def thinking(self, text: str, *, signature: str | None = None) -> Self:
        """Add a thinking part to the pending response (closing the pending request)."""
        self._response_part(ThoughtPart(text, signature=signature))
        return self

    def text(self, text: str) -> Self:
        """Add a text part to the pending response (closing the pending request)."""
        self._response_part(TextPart(text))
        return self

    def response(self, *parts: Part) -> Self:
        """Close pending messages and add a response made of ``parts`` as it is.

        Raises:
            HistoryBuildError: A part is not a response part.
        """
        self._close_request()
        self._close_response()
        try:
            self._messages.append(CanonicalMessage.response(*parts, model_name=self._model_name))
        except MessageError as exc:
            raise HistoryBuildError(f"response at message {len(self._messages)}: {exc}") from exc
        return self

    # -- tool calls ----------------------------------------------------------------------

    def call(
        self,
        tool: str,
        args: ToolArgs = None,
        *,
        result: JsonValue = "ok",
        tool_call_id: str | None = None,
    ) -> Self:
        """Add a tool call (ending the pending response) and its return (in the next request).

        Args:
            tool: The tool's name.
            args: The call's arguments.
            result: The tool return's content.
            tool_call_id: The call's id (default: the next generated id).
        """
        return self.parallel((tool, args, result), ids=None if tool_call_id is None else (tool_call_id,))

    def parallel(
        self,
        *calls: tuple[str, ToolArgs] | tuple[str, ToolArgs, JsonValue],
        ids: Sequence[str] | None = None,
    ) -> Self:
        """Add parallel tool calls in one response and their returns in the next request.

        Args:
            calls: ``(tool, args)`` or ``(tool, args, result)`` per call (result default ``"ok"``).
            ids: Explicit tool call ids, one per call.

        Raises:
            HistoryBuildError: No call, or ``ids`` does not match ``calls``.
        """
        if not calls:
            raise HistoryBuildError("parallel() needs at least one call")
        if ids is not None and len(ids) != len(calls):
            raise HistoryBuildError(f"parallel() got {len(calls)} calls but {len(ids)} ids")
        self._close_request()
        answers: list[Part] = []
        for position, spec in enumerate(calls):
            tool, args = spec[0], spec[1]
            result: JsonValue = spec[2] if len(spec) == 3 else "ok"
            call_id = self._new_id(None if ids is None else ids[position])
            self._response.append(ToolCallPart(tool_call_id=call_id, tool_name=tool, args=args))
            answers.append(ToolReturnPart(tool_call_id=call_id, tool_name=tool, content=result))
        self._close_response()
        self._request.extend(answers)
        return self

    def retry(
        self,
        tool: str,
        args: ToolArgs = None,
        *,
        error: str = "invalid arguments, try again",
        result: JsonValue | None = None,
        retry_args: ToolArgs = None,
    ) -> Self:
        """Add a call the tool rejected (answered by a retry prompt), then optionally the retry.

        Args:
            tool: The tool's name.
            args: The rejected call's arguments.
            error: The retry prompt's content.
            result: When not ``None``, the model calls ``tool`` again (with ``retry_args``,
                or ``args``) in the next response, and this is that call's return.
            retry_args: Arguments of the second call.
        """
        self._close_request()
        call_id = self._new_id(None)
        self._response.append(ToolCallPart(tool_call_id=call_id, tool_name=tool, args=args))
        self._close_response()
        self._request.append(RetryPromptPart(error, tool_name=tool, tool_call_id=call_id))
        if result is not None:
            self.call(tool, retry_args if retry_args is not None else args, result=result)
        return self

    def dangling(self, tool: str, args: ToolArgs = None, *, tool_call_id: str | None = None) -> Self:
        """Add a tool call nobody answers (an invalid history: build with ``validate=False``)."""
        self._close_request()
        self._response.append(
            ToolCallPart(tool_call_id=self._new_id(tool_call_id), tool_name=tool, args=args)
        )
        self._close_response()
        return self

    # -- result --------------------------------------------------------------------------

    def build(self, *, validate: bool = True) -> list[CanonicalMessage]:
        """Return the history built so far (a new list; the builder can go on).

        Args:
            validate: Check the history with :func:`harness.history.check_invariants`.

        Raises:
            HistoryBuildError: ``validate`` and the history breaks an invariant (for example
                after :meth:`dangling`); the message names the violation.
        """
        messages = list(self._messages)
        if self._request:
            messages.append(CanonicalMessage.request(*self._request))
        if self._response:
            messages.append(CanonicalMessage.response(*self._response, model_name=self._model_name))
        if validate:
            violations = check_invariants(messages)
            if violations:
                first = violations[0]
                raise HistoryBuildError(
                    f"the built history breaks {len(violations)} invariant(s), first {first.kind} at "
                    f"message {first.message_index}: {first.detail} (build(validate=False) to keep it)"
                )
        return messages


def make_context(
    messages: Sequence[CanonicalMessage],
    *,
    model: Model | None = None,
    model_name: str | None = None,
    context_window: int | None = None,
    manager: PluginManager | None = None,
    token_counter: TokenCounter | None = None,
    **fields: Any,
) -> RequestContext:
    """A :class:`~harness.capabilities.RequestContext` over a copy of ``messages``, as a run builds it.

    Args:
        messages: The history (normally ending with the request being sent); copied.
        model: The model (also supplies ``model_name`` and ``context_window`` when unset).
        model_name: The model's name; picks the tokenizer.
        context_window: The context window in tokens.
        manager: Supplies the token counter (honouring ``count_tokens`` plugins).
        token_counter: The token counter to use (reuse one across contexts to keep its
            caches); default: the manager's, else a new ``TokenCounter(model_name)``.
        fields: Other :class:`RequestContext` fields (``usage``, ``requests``, ``state``...).
    """
    if model is not None:
        model_name = model_name or model.model_name
        context_window = context_window or model.context_window
    if token_counter is None:
        token_counter = manager.token_counter(model_name) if manager is not None else TokenCounter(model_name)
    return RequestContext(
        messages=list(messages),
        token_counter=token_counter,
        model=model,
        model_name=model_name,
        context_window=context_window,
        **fields,
    )
