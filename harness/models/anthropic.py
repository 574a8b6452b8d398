"""Anthropic's Messages API through the official SDK, thinking and prompt caching included.

Example::

    from harness.run.agent import Agent
    from harness.models.anthropic import AnthropicModel

    agent = Agent(AnthropicModel("claude-sonnet-4-6"))  # ANTHROPIC_API_KEY from the environment

Mapping (canonical -> Messages API):

* every system prompt part, then the newest request's ``instructions``: the ``system``
  field;
* a request: one ``user`` turn whose ``tool_result`` blocks come first (one per call of
  the previous response, ``is_error`` for retry prompts), then text and image blocks;
* a response: one ``assistant`` turn with ``thinking`` blocks (Anthropic's own, signature
  sent back verbatim), ``redacted_thinking`` blocks, non-blank ``text`` and ``tool_use``;
  thinking from other providers (no Anthropic signature) is not sent; server-side
  ``compaction`` blocks (:data:`COMPACTION_KIND` parts) go back verbatim, in place;
* turns are strictly alternating: consecutive same-role turns are merged and empty turns
  dropped; a history starting with a response gets a short user turn in front.

Tool call ids that Anthropic would reject (it allows ``[a-zA-Z0-9_-]``) are rewritten
consistently for calls and results, e.g. ``call~2`` -> ``call_2_<hash>``.

``max_tokens`` is required by the API: ``ModelSettings.max_tokens``, else the model's
``max_tokens`` (default :data:`DEFAULT_MAX_TOKENS`). Extended thinking is switched on through
``ModelSettings(extra={"thinking": {"type": "enabled", "budget_tokens": 2048}})``; context
management (``context_management`` and an ``anthropic-beta`` header in ``extra_headers``) the
same way: the ``harness-anthropic-context`` plugin does it. A response's
``context_management`` (the edits the server applied) is kept in its
``extra["provider_details"]["context_management"]``.

Streaming (:meth:`AnthropicModel.request_stream`) reads the raw stream events
(``create(stream=True)``) and rebuilds the Message a plain request returns (see
:mod:`harness.models._anthropic_stream`), thinking signatures and cache usage included.
"""

from __future__ import annotations

__all__ = [
    "COMPACTION_KIND",
    "CONTINUATION_TEXT",
    "DEFAULT_MAX_TOKENS",
    "AnthropicModel",
    "AnthropicPayload",
    "RetryPolicy",
    "anthropic_tool_id",
    "anthropic_tools",
    "from_anthropic_message",
    "to_anthropic_messages",
]

import hashlib
import re
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import anthropic
import attrs
import httpx2

from harness.core.frozen import thaw
from harness.core.messages import (
    CanonicalMessage,
    Part,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    UnknownPart,
    Usage,
)
from harness.core.model import ModelSettings, ToolDefinition
from harness.core.streaming import ResponseDone, StreamDelta
from harness.errors import ModelAuthenticationError
from harness.models._anthropic_stream import MessageAccumulator
from harness.models._mapping import (
    ImageBase64,
    ImageUrl,
    UserItem,
    parse_arguments,
    split_request,
    system_text,
)
from harness.models._retry import ProviderErrors, RetryPolicy, send_with_retries, stream_with_retries
from harness.models._sdk import SDKClientOwner, apply_extra_settings, call_options
from harness.models.check import DEFAULT_CHECK_TIMEOUT, probe
from harness.models.context_windows import context_window_for

DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` sent when neither the settings nor the model set one (the API requires it)."""

CONTINUATION_TEXT = "(earlier conversation omitted)"
"""User text put in front of a history that starts with a response (the API wants a user turn first)."""

PROVIDER = "anthropic"
COMPACTION_KIND = "anthropic-compaction"
"""``UnknownPart.kind`` of a server-side ``compaction`` block, sent back verbatim: its ``data`` is the
block as received plus ``part_kind`` (as the wire writes it, so it loads back equal), left out when sent."""
REDACTED_ID = "redacted_thinking"
"""``ThoughtPart.extra["id"]`` marking redacted thinking (``signature`` holds its data), as in pydantic-ai."""

_ERRORS = ProviderErrors(
    provider=PROVIDER,
    status_error=anthropic.APIStatusError,
    timeout_error=anthropic.APITimeoutError,
    connection_error=anthropic.APIConnectionError,
)

_FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "compaction": "stop",  # pause_after_compaction: the response holds the compaction block only
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_call",
    "refusal": "content_filter",
}

_VALID_ID = re.compile(r"^[a-zA-Z0-9_-]+$")

_Block = dict[str, Any]


def anthropic_tool_id(call_id: str) -> str:
    """The id sent to Anthropic for canonical tool call id ``call_id``.

    Valid ids are sent unchanged; others get invalid characters replaced by ``_`` and a
    short hash of the original appended, so distinct ids stay distinct.
    """
    if _VALID_ID.match(call_id):
        return call_id
    digest = hashlib.sha1(call_id.encode("utf-8")).hexdigest()[:8]
    return f"{re.sub(r'[^a-zA-Z0-9_-]', '_', call_id)}_{digest}"


@attrs.frozen
class AnthropicPayload:
    """The ``system`` and ``messages`` fields of a Messages API request.

    Attributes:
        system: The system prompt, or ``None``.
        messages: Alternating ``user`` / ``assistant`` turns with content block lists.
    """

    system: str | None
    messages: list[dict[str, Any]]


def _user_blocks(items: Sequence[UserItem]) -> list[_Block]:
    blocks: list[_Block] = []
    for item in items:
        if isinstance(item, str):
            blocks.append({"type": "text", "text": item})
        elif isinstance(item, ImageUrl):
            blocks.append({"type": "image", "source": {"type": "url", "url": item.url}})
        elif isinstance(item, ImageBase64):  # pyright: ignore[reportUnnecessaryIsInstance]
            source = {"type": "base64", "media_type": item.media_type, "data": item.data}
            blocks.append({"type": "image", "source": source})
    return blocks


def _assistant_blocks(message: CanonicalMessage) -> list[_Block]:
    blocks: list[_Block] = []
    for part in message.parts:
        if isinstance(part, ThoughtPart):
            if part.provider_name != PROVIDER or not part.signature:
                continue
            if part.extra.get("id") == REDACTED_ID:
                blocks.append({"type": "redacted_thinking", "data": part.signature})
            else:
                blocks.append({"type": "thinking", "thinking": part.content, "signature": part.signature})
        elif isinstance(part, TextPart):
            if part.content.strip():
                blocks.append({"type": "text", "text": part.content})
        elif isinstance(part, UnknownPart):
            if part.kind == COMPACTION_KIND:
                blocks.append({key: thaw(value) for key, value in part.data.items() if key != "part_kind"})
        elif isinstance(part, ToolCallPart):
            try:
                arguments = part.args_as_dict()
            except ValueError:  # MessageError: arguments that are not JSON are sent as {}
                arguments = {}
            blocks.append(
                {
                    "type": "tool_use",
                    "id": anthropic_tool_id(part.tool_call_id),
                    "name": part.tool_name,
                    "input": arguments,
                }
            )
    return blocks


def _append(turns: list[_Block], role: str, blocks: list[_Block]) -> None:
    if not blocks:
        return
    if turns and turns[-1]["role"] == role:
        merged: list[_Block] = [*turns[-1]["content"], *blocks]
        if role == "user":  # tool_result blocks must come first in a user turn
            merged.sort(key=lambda block: block["type"] != "tool_result")
        turns[-1]["content"] = merged
        return
    turns.append({"role": role, "content": blocks})


def to_anthropic_messages(messages: Sequence[CanonicalMessage]) -> AnthropicPayload:
    """Map a canonical history to the Messages API ``system`` and ``messages`` fields.

    A history for which ``check_invariants`` returns ``[]`` always maps to turns the API
    accepts: roles alternate starting with ``user``, every ``tool_use`` is answered by
    exactly one ``tool_result`` at the start of the next user turn, and no turn or text
    block is empty.
    """
    turns: list[_Block] = []
    previous_calls: tuple[ToolCallPart, ...] = ()
    for index, message in enumerate(messages):
        if message.kind == "request":
            split = split_request(message, previous_calls)
            previous_calls = ()
            blocks: list[_Block] = [
                {
                    "type": "tool_result",
                    "tool_use_id": anthropic_tool_id(result.call_id),
                    "content": result.text,
                    **({"is_error": True} if result.is_error else {}),
                }
                for result in split.results
            ]
            blocks.extend(_user_blocks(split.items))
            _append(turns, "user", blocks)
        else:
            _append(turns, "assistant", _assistant_blocks(message))
            calls = message.tool_calls
            previous_calls = calls
            following = messages[index + 1] if index + 1 < len(messages) else None
            if calls and (following is None or following.kind != "request"):
                # Invalid history (calls nobody answered yet): keep the payload acceptable.
                pending = split_request(CanonicalMessage.request(), calls)
                _append(
                    turns,
                    "user",
                    [
                        {
                            "type": "tool_result",
                            "tool_use_id": anthropic_tool_id(r.call_id),
                            "content": r.text,
                        }
                        for r in pending.results
                    ],
                )
    if turns and turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": CONTINUATION_TEXT}]})
    return AnthropicPayload(system_text(messages), turns)


def anthropic_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    """Map tool definitions to Messages API ``tools``."""
    mapped: list[dict[str, Any]] = []
    for tool in tools:
        entry: dict[str, Any] = {"name": tool.name, "input_schema": dict(tool.parameters_json_schema)}
        if tool.description:
            entry["description"] = tool.description
        mapped.append(entry)
    return mapped


def _usage(data: object) -> Usage | None:
    if not isinstance(data, Mapping):
        return None
    mapping: Mapping[str, Any] = data  # pyright: ignore[reportUnknownVariableType]
    return Usage.from_anthropic(mapping)


def from_anthropic_message(data: Mapping[str, Any], *, model_name: str) -> CanonicalMessage:
    """Map a Messages API response (as a JSON object) to a response message.

    Unknown block types (server tools...) are kept as :class:`~harness.core.messages.UnknownPart`
    with kind ``"anthropic-<type>"`` and are not sent back, except ``compaction`` blocks
    (:data:`COMPACTION_KIND`). The response's ``context_management`` goes to
    ``extra["provider_details"]``.

    Args:
        data: The message, e.g. ``message.to_dict()``.
        model_name: Used when the response names no model.
    """
    parts: list[Part] = []
    for block in data.get("content") or ():
        kind = block.get("type")
        if kind == "text":
            parts.append(TextPart(str(block.get("text", ""))))
        elif kind == "thinking":
            parts.append(
                ThoughtPart(
                    str(block.get("thinking", "")), signature=block.get("signature"), provider_name=PROVIDER
                )
            )
        elif kind == "redacted_thinking":
            parts.append(
                ThoughtPart(
                    "", signature=block.get("data"), provider_name=PROVIDER, extra={"id": REDACTED_ID}
                )
            )
        elif kind == "tool_use":
            arguments: object = block.get("input")
            parts.append(
                ToolCallPart(
                    tool_call_id=str(block.get("id")),
                    tool_name=str(block.get("name", "")),
                    args=arguments  # pyright: ignore[reportUnknownArgumentType]
                    if isinstance(arguments, Mapping)
                    # a streamed input that is not a JSON object: kept raw, so the loop asks for a fix
                    else parse_arguments(arguments)
                    if isinstance(arguments, str)
                    else {},
                )
            )
        elif kind == "compaction":
            parts.append(UnknownPart(COMPACTION_KIND, data={**block, "part_kind": COMPACTION_KIND}))
        else:
            parts.append(UnknownPart(f"anthropic-{kind}", data=dict(block)))
    raw_finish: object = data.get("stop_reason")
    finish = _FINISH_REASONS.get(raw_finish, raw_finish) if isinstance(raw_finish, str) else None
    name: object = data.get("model")
    response_id: object = data.get("id")
    details: dict[str, Any] = {"finish_reason": raw_finish} if isinstance(raw_finish, str) else {}
    if isinstance(data.get("context_management"), Mapping):
        details["context_management"] = data["context_management"]
    return CanonicalMessage.response(
        *parts,
        model_name=name if isinstance(name, str) and name else model_name,
        usage=_usage(data.get("usage")),
        timestamp=datetime.now(UTC),
        provider_name=PROVIDER,
        provider_response_id=response_id if isinstance(response_id, str) else None,
        finish_reason=finish,
        extra={"provider_details": details} if details else None,
    )


class AnthropicModel(SDKClientOwner[anthropic.AsyncAnthropic]):
    """A Claude model through the Messages API.

    The SDK client is created on the first request (``max_retries=0``: harness's
    :class:`RetryPolicy` does the retrying). Close it with :meth:`aclose` or use the model
    as an async context manager.

    Args:
        model_name: The model, e.g. ``"claude-sonnet-4-6"``.
        api_key: API key; default ``ANTHROPIC_API_KEY`` (or any credential source the SDK
            resolves). When none resolves, a request raises
            :class:`~harness.errors.ModelAuthenticationError`.
        base_url: API URL; default ``ANTHROPIC_BASE_URL`` or Anthropic's.
        client: A ready ``anthropic.AsyncAnthropic`` (give it ``max_retries=0``).
        context_window: Context window in tokens; default from
            :data:`~harness.models.context_windows.KNOWN_CONTEXT_WINDOWS` (200k for Claude).
        max_tokens: ``max_tokens`` when the settings set none (default 4096).
        prompt_caching: Mark the system prompt, the last tool and the newest user turn
            with ``cache_control`` (ephemeral), so long histories are read from the cache.
        retry: Retry policy (default :class:`RetryPolicy()`).
        timeout: Default seconds per attempt (``ModelSettings.timeout`` overrides it).
    """

    def __init__(
        self,
        model_name: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: anthropic.AsyncAnthropic | None = None,
        context_window: int | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        prompt_caching: bool = False,
        retry: RetryPolicy | None = None,
        timeout: float = 600.0,
    ) -> None:
        if not model_name.strip():
            raise ValueError("AnthropicModel: model_name must not be blank")
        if context_window is not None and context_window < 1:
            raise ValueError(f"AnthropicModel: context_window must be at least 1, got {context_window}")
        if max_tokens < 1:
            raise ValueError(f"AnthropicModel: max_tokens must be at least 1, got {max_tokens}")
        self._model_name = model_name
        self._api_key = api_key
        self._base_url = base_url
        self._client = client
        self._owns_client = client is None
        self._context_window = (
            context_window if context_window is not None else context_window_for(model_name)
        )
        self.max_tokens = max_tokens
        self.prompt_caching = prompt_caching
        self.retry = retry if retry is not None else RetryPolicy()
        self.timeout = timeout

    @property
    def model_name(self) -> str:
        """The model's name."""
        return self._model_name

    @property
    def context_window(self) -> int | None:
        """The context window in tokens (given, or known for the model, or ``None``)."""
        return self._context_window

    def _get_client(self) -> anthropic.AsyncAnthropic:
        if self._client is None:
            self._client = anthropic.AsyncAnthropic(
                api_key=self._api_key, base_url=self._base_url, max_retries=0, timeout=self.timeout
            )
        return self._client

    async def check(self, *, timeout: float = DEFAULT_CHECK_TIMEOUT) -> None:
        """Check that requests can go through: credentials resolve and the server answers.

        Lists one of the server's models (no retry), within ``timeout`` seconds; see
        :func:`harness.models.check.probe` for what passes.

        Raises:
            ModelAuthenticationError: No credentials resolve, or the server refused them.
            ModelUnavailableError: The server cannot be reached, or failed.
            ModelTimeoutError: No answer within ``timeout``.
        """
        client = self._get_client()

        async def send() -> object:
            return await client.models.list(limit=1, timeout=timeout)

        try:
            await probe(send, _ERRORS, model_name=self._model_name, where=str(client.base_url))
        except (TypeError, anthropic.CredentialsError) as exc:
            if isinstance(exc, TypeError) and "authentication" not in str(exc):
                raise
            raise ModelAuthenticationError(
                PROVIDER, f"{exc} (set ANTHROPIC_API_KEY or pass api_key=)", model_name=self._model_name
            ) from exc

    def request_body(
        self,
        messages: Sequence[CanonicalMessage],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings,
    ) -> dict[str, Any]:
        """The JSON body a request would send (settings ``extra`` keys merged in)."""
        payload = to_anthropic_messages(messages)
        body: dict[str, Any] = {
            "model": self._model_name,
            "max_tokens": settings.max_tokens if settings.max_tokens is not None else self.max_tokens,
            "messages": payload.messages,
        }
        cache = {"type": "ephemeral"}
        if payload.system is not None:
            if self.prompt_caching:
                body["system"] = [{"type": "text", "text": payload.system, "cache_control": cache}]
            else:
                body["system"] = payload.system
        if tools:
            mapped = anthropic_tools(tools)
            if self.prompt_caching:
                mapped[-1] = {**mapped[-1], "cache_control": cache}
            body["tools"] = mapped
        if self.prompt_caching:
            for turn in reversed(payload.messages):
                if turn["role"] == "user":
                    content: list[_Block] = list(turn["content"])
                    content[-1] = {**content[-1], "cache_control": cache}
                    turn["content"] = content
                    break
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        apply_extra_settings(body, settings)
        return body

    async def request(
        self,
        messages: Sequence[CanonicalMessage],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings,
    ) -> CanonicalMessage:
        """Send the history and return the response message.

        Raises:
            ModelError: A typed subclass once retries are exhausted or for errors no retry
                fixes (authentication, bad request).
        """
        body = self.request_body(messages, tools, settings)
        client = self._get_client()
        model = body.pop("model")
        max_tokens = body.pop("max_tokens")
        sent_messages = body.pop("messages")
        options = call_options(settings, self.timeout)

        async def send() -> dict[str, Any]:
            result = await client.messages.create(
                model=model,
                max_tokens=max_tokens,
                messages=sent_messages,
                extra_body=body,
                extra_headers=options.extra_headers,
                extra_query=options.extra_query,
                timeout=options.timeout,
            )
            return result.to_dict(warnings=False)  # a block this SDK version lacks is kept as sent

        try:
            data = await send_with_retries(
                send, errors=_ERRORS, policy=self.retry, model_name=self._model_name
            )
        except (TypeError, anthropic.CredentialsError) as exc:
            # The SDK raises TypeError when no API key, auth token or credentials resolve.
            if isinstance(exc, TypeError) and "authentication" not in str(exc):
                raise
            raise ModelAuthenticationError(
                PROVIDER,
                f"{exc} (set ANTHROPIC_API_KEY or pass api_key=)",
                model_name=self._model_name,
            ) from exc
        return from_anthropic_message(data, model_name=self._model_name)

    async def request_stream(
        self,
        messages: Sequence[CanonicalMessage],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings,
    ) -> AsyncIterator[StreamDelta]:
        """Send the history with ``stream=True`` and yield the answer's deltas as they arrive.

        Text, thinking (its signature as a :class:`~harness.core.streaming.ThinkingDelta`
        with ``signature`` set) and tool-call input JSON come as deltas indexed by content
        block. The last item is a :class:`~harness.core.streaming.ResponseDone` whose
        message is the one :meth:`request` returns for the same answer. The retry policy
        applies until the first delta; the HTTP response is closed when the consumer
        stops early.

        Raises:
            ModelError: As :meth:`request`; a failure after the first delta (an ``error``
                event such as ``overloaded_error``, a dropped connection, a stream that ends
                before ``message_stop``) is raised at once, not retried.
        """
        body = self.request_body(messages, tools, settings)
        client = self._get_client()
        model = body.pop("model")
        max_tokens = body.pop("max_tokens")
        sent_messages = body.pop("messages")
        body.pop("stream", None)
        options = call_options(settings, self.timeout)

        async def attempt() -> AsyncGenerator[StreamDelta]:
            stream = await client.messages.create(
                model=model,
                max_tokens=max_tokens,
                messages=sent_messages,
                stream=True,
                extra_body=body,
                extra_headers=options.extra_headers,
                extra_query=options.extra_query,
                timeout=options.timeout,
            )
            events = MessageAccumulator()
            try:
                async for event in stream:
                    for delta in events.feed(event.to_dict(warnings=False)):
                        yield delta
            except httpx2.TimeoutException as exc:  # the SDK lets transport errors out of a stream
                raise anthropic.APITimeoutError(request=stream.response.request) from exc
            except httpx2.TransportError as exc:
                raise anthropic.APIConnectionError(request=stream.response.request) from exc
            finally:
                await stream.close()
            if not events.finished:  # a connection failure as the retry policy sees one
                raise anthropic.APIConnectionError(
                    message="the stream ended before the response was complete (no message_stop)",
                    request=stream.response.request,
                )
            yield ResponseDone(from_anthropic_message(events.message(), model_name=self._model_name))

        try:
            async for item in stream_with_retries(
                attempt, errors=_ERRORS, policy=self.retry, model_name=self._model_name
            ):
                yield item
        except (TypeError, anthropic.CredentialsError) as exc:
            if isinstance(exc, TypeError) and "authentication" not in str(exc):
                raise
            raise ModelAuthenticationError(
                PROVIDER,
                f"{exc} (set ANTHROPIC_API_KEY or pass api_key=)",
                model_name=self._model_name,
            ) from exc
