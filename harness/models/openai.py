"""OpenAI Chat Completions, and every OpenAI-compatible server, through the official SDK.

Works against OpenAI and any server speaking the Chat Completions API: Ollama, vLLM, LM
Studio, llama.cpp's server, OpenRouter... Point ``base_url`` at it::

    from harness.run.agent import Agent
    from harness.models.openai import OpenAIModel

    agent = Agent(OpenAIModel("gpt-4o-mini"))  # OPENAI_API_KEY from the environment
    local = Agent(OpenAIModel("llama3.2", base_url="http://localhost:11434/v1", context_window=8192))

Mapping (canonical -> Chat Completions):

* every system prompt part, then the newest request's ``instructions``: one ``system``
  (or ``developer``) message at the front;
* user prompts: a ``user`` message (text, or a content list when images are present);
* text and tool calls of a response: one ``assistant`` message (``content`` and
  ``tool_calls`` with JSON-encoded ``arguments``); thinking is not sent back (Chat
  Completions has no field for it), and a response holding only thinking is skipped;
* tool returns and retry prompts answering a call: one ``tool`` message per call, right
  after the assistant message (see :mod:`harness.models._mapping` for late answers);
* general retry prompts: user text. Consecutive user or assistant messages are merged,
  so servers whose chat templates need alternating roles accept the history.

Mapping back: ``content`` -> text, ``refusal`` -> text, ``reasoning_content`` /
``reasoning`` (DeepSeek, vLLM, Ollama, OpenRouter) -> thinking, ``tool_calls`` -> tool calls
with ``arguments`` parsed (kept as the raw string when not a JSON object, so the loop asks
the model to fix them), ``usage`` -> :class:`~harness.core.messages.Usage`.

Streaming (:meth:`OpenAIModel.request_stream`) sends ``stream=True`` with
``stream_options={"include_usage": true}``; the chunks are mapped to deltas and rebuilt
into the completion a plain request returns (see :mod:`harness.models._openai_stream`).
"""

from __future__ import annotations

__all__ = [
    "OpenAIModel",
    "RetryPolicy",
    "from_openai_completion",
    "openai_tools",
    "to_openai_messages",
]

import json
import os
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

import attrs
import openai

from harness.core.messages import CanonicalMessage, Part, TextPart, ThoughtPart, ToolCallPart, Usage
from harness.core.model import ModelSettings, ToolDefinition
from harness.core.streaming import ResponseDone, StreamDelta
from harness.errors import ModelAuthenticationError, ModelError
from harness.models._mapping import (
    ImageUrl,
    ToolResult,
    UserItem,
    as_list,
    as_mapping,
    parse_arguments,
    split_request,
    system_text,
)
from harness.models._openai_stream import CompletionAccumulator
from harness.models._retry import ProviderErrors, RetryPolicy, send_with_retries, stream_with_retries
from harness.models._sdk import SDKClientOwner, apply_extra_settings, call_options
from harness.models.check import DEFAULT_CHECK_TIMEOUT, probe
from harness.models.context_windows import context_window_for

_ERRORS = ProviderErrors(
    provider="openai",
    status_error=openai.APIStatusError,
    timeout_error=openai.APITimeoutError,
    connection_error=openai.APIConnectionError,
    stream_error=openai.APIError,
)

_FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_call",
    "function_call": "tool_call",
    "content_filter": "content_filter",
}

_Message = dict[str, Any]


def _arguments_text(call: ToolCallPart) -> str:
    if call.args is None:
        return "{}"
    if isinstance(call.args, str):
        return call.args if call.args.strip() else "{}"
    return json.dumps(dict(call.args), ensure_ascii=False, default=str)


def _user_content(items: Sequence[UserItem]) -> str | list[dict[str, Any]]:
    if all(isinstance(item, str) for item in items):
        return "\n\n".join(item for item in items if isinstance(item, str))
    content: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, str):
            content.append({"type": "text", "text": item})
        elif isinstance(item, ImageUrl):
            content.append({"type": "image_url", "image_url": {"url": item.url}})
        else:
            url = f"data:{item.media_type};base64,{item.data}"
            content.append({"type": "image_url", "image_url": {"url": url}})
    return content


def _merge_user(previous: _Message, items: Sequence[UserItem]) -> None:
    before = previous["content"]
    before_items: list[UserItem] = [before] if isinstance(before, str) else []
    for entry in as_list(before):
        block = as_mapping(entry)
        if block.get("type") == "text":
            before_items.append(str(block.get("text", "")))
        else:
            before_items.append(ImageUrl(str(as_mapping(block.get("image_url")).get("url", ""))))
    previous["content"] = _user_content([*before_items, *items])


def _tool_message(result: ToolResult) -> _Message:
    return {"role": "tool", "tool_call_id": result.call_id, "content": result.text}


def _assistant(message: CanonicalMessage, calls: tuple[ToolCallPart, ...]) -> _Message | None:
    texts = [p.content for p in message.parts if isinstance(p, TextPart) and p.content.strip()]
    if not texts and not calls:
        return None
    out: _Message = {"role": "assistant", "content": "\n\n".join(texts) if texts else None}
    if calls:
        out["tool_calls"] = [
            {
                "id": call.tool_call_id,
                "type": "function",
                "function": {"name": call.tool_name, "arguments": _arguments_text(call)},
            }
            for call in calls
        ]
    return out


def to_openai_messages(
    messages: Sequence[CanonicalMessage], *, system_role: Literal["system", "developer"] = "system"
) -> list[dict[str, Any]]:
    """Map a canonical history to Chat Completions ``messages``.

    A history for which ``check_invariants`` returns ``[]`` always maps to messages the
    API accepts: every assistant ``tool_calls`` entry is followed, before any other
    message, by exactly one ``tool`` message with its id; no message is empty.

    Args:
        messages: The history to send (system prompt parts anywhere are collected).
        system_role: ``"system"``, or ``"developer"`` for OpenAI reasoning models.
    """
    out: list[_Message] = []
    system = system_text(messages)
    if system is not None:
        out.append({"role": system_role, "content": system})
    previous_calls: tuple[ToolCallPart, ...] = ()
    for index, message in enumerate(messages):
        if message.kind == "request":
            split = split_request(message, previous_calls)
            previous_calls = ()
            out.extend(_tool_message(result) for result in split.results)
            if split.items:
                last = out[-1] if out else None
                if last is not None and last["role"] == "user":
                    _merge_user(last, split.items)
                else:
                    out.append({"role": "user", "content": _user_content(split.items)})
        else:
            calls = message.tool_calls
            previous_calls = calls
            assistant = _assistant(message, calls)
            if assistant is None:
                continue
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant" and "tool_calls" not in last:
                texts = [t for t in (last["content"], assistant["content"]) if t]
                last["content"] = "\n\n".join(texts) if texts else None
                if "tool_calls" in assistant:
                    last["tool_calls"] = assistant["tool_calls"]
            else:
                out.append(assistant)
            following = messages[index + 1] if index + 1 < len(messages) else None
            if calls and (following is None or following.kind != "request"):
                # Invalid history (calls nobody answered yet): keep the payload acceptable.
                pending = split_request(CanonicalMessage.request(), calls)
                out.extend(_tool_message(result) for result in pending.results)
    return out


def openai_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    """Map tool definitions to Chat Completions ``tools`` (function tools)."""
    mapped: list[dict[str, Any]] = []
    for tool in tools:
        function: dict[str, Any] = {"name": tool.name, "parameters": dict(tool.parameters_json_schema)}
        if tool.description:
            function["description"] = tool.description
        mapped.append({"type": "function", "function": function})
    return mapped


def _usage(data: object) -> Usage | None:
    if not isinstance(data, Mapping):
        return None
    mapping: Mapping[str, Any] = data  # pyright: ignore[reportUnknownVariableType]
    base = Usage.from_openai(mapping)
    extra: dict[str, Any] = {}
    details: object = mapping.get("completion_tokens_details")
    if isinstance(details, Mapping):
        reasoning: object = details.get("reasoning_tokens")  # pyright: ignore[reportUnknownMemberType,reportUnknownVariableType]
        if isinstance(reasoning, int) and reasoning:
            extra["reasoning_tokens"] = reasoning
    prompt_details: object = mapping.get("prompt_tokens_details")
    cache_write = 0
    if isinstance(prompt_details, Mapping):
        written: object = prompt_details.get("cache_write_tokens")  # pyright: ignore[reportUnknownMemberType,reportUnknownVariableType]
        cache_write = written if isinstance(written, int) else 0
    return Usage(
        request_tokens=base.request_tokens,
        response_tokens=base.response_tokens,
        cached_tokens=base.cached_tokens,
        cache_write_tokens=cache_write,
        extra=extra,
    )


def from_openai_completion(
    data: Mapping[str, Any], *, model_name: str, provider_name: str = "openai"
) -> CanonicalMessage:
    """Map a Chat Completions response (as a JSON object) to a response message.

    Args:
        data: The completion, e.g. ``completion.to_dict()``.
        model_name: Used when the response names no model.
        provider_name: Stored on the message and on thinking parts.

    Raises:
        ModelError: The response holds no choice.
    """
    choices = as_list(data.get("choices"))
    if not choices:
        raise ModelError(
            provider_name, "the response holds no choices", status_code=200, model_name=model_name
        )
    choice = as_mapping(choices[0])
    message = as_mapping(choice.get("message"))
    parts: list[Part] = []
    reasoning: object = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning.strip():
        parts.append(ThoughtPart(reasoning, provider_name=provider_name))
    content: object = message.get("content")
    if isinstance(content, str) and content:
        parts.append(TextPart(content))
    refusal: object = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        parts.append(TextPart(refusal))
    for item in as_list(message.get("tool_calls")):
        call = as_mapping(item)
        function = as_mapping(call.get("function"))
        name: object = function.get("name")
        if not isinstance(name, str):
            continue
        call_id: object = call.get("id")
        arguments: object = function.get("arguments")
        parts.append(
            ToolCallPart(
                tool_call_id=call_id
                if isinstance(call_id, str) and call_id
                else f"call_{uuid.uuid4().hex[:24]}",
                tool_name=name,
                args=parse_arguments(arguments if isinstance(arguments, str) else None),
            )
        )
    raw_finish: object = choice.get("finish_reason")
    finish = _FINISH_REASONS.get(raw_finish, raw_finish) if isinstance(raw_finish, str) else None
    created: object = data.get("created")
    timestamp = datetime.fromtimestamp(created, UTC) if isinstance(created, int) and created > 0 else None
    response_model: object = data.get("model")
    response_id: object = data.get("id")
    return CanonicalMessage.response(
        *parts,
        model_name=response_model if isinstance(response_model, str) and response_model else model_name,
        usage=_usage(data.get("usage")),
        timestamp=timestamp or datetime.now(UTC),
        provider_name=provider_name,
        provider_response_id=response_id if isinstance(response_id, str) else None,
        finish_reason=finish,
        extra={"provider_details": {"finish_reason": raw_finish}} if isinstance(raw_finish, str) else None,
    )


class OpenAIModel(SDKClientOwner[openai.AsyncOpenAI]):
    """A Chat Completions model: OpenAI, or any OpenAI-compatible server via ``base_url``.

    The SDK client is created on the first request (``max_retries=0``: harness's
    :class:`RetryPolicy` does the retrying). Close it with :meth:`aclose` or use the model
    as an async context manager.

    Args:
        model_name: The model, e.g. ``"gpt-4o-mini"`` or ``"llama3.2"``.
        api_key: API key; default ``OPENAI_API_KEY``. Without either, a request to OpenAI
            raises :class:`~harness.errors.ModelAuthenticationError`, while a custom
            ``base_url`` (local servers need no key) gets the placeholder ``"none"``.
        base_url: Server URL, e.g. ``"http://localhost:11434/v1"``; default
            ``OPENAI_BASE_URL`` or OpenAI.
        client: A ready ``openai.AsyncOpenAI`` (overrides ``api_key`` / ``base_url``;
            give it ``max_retries=0`` so only harness retries).
        context_window: Context window in tokens; default from
            :data:`~harness.models.context_windows.KNOWN_CONTEXT_WINDOWS`.
        retry: Retry policy (default :class:`RetryPolicy()`).
        timeout: Default seconds per attempt (``ModelSettings.timeout`` overrides it).
        system_role: ``"system"`` or ``"developer"``.
        max_tokens_field: Request field for ``ModelSettings.max_tokens``; default
            ``"max_completion_tokens"`` for OpenAI and ``"max_tokens"`` for other servers.
        provider_name: Name stored on responses and errors (``"ollama"``, ``"vllm"``...).
    """

    def __init__(
        self,
        model_name: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: openai.AsyncOpenAI | None = None,
        context_window: int | None = None,
        retry: RetryPolicy | None = None,
        timeout: float = 600.0,
        system_role: Literal["system", "developer"] = "system",
        max_tokens_field: Literal["max_tokens", "max_completion_tokens"] | None = None,
        provider_name: str = "openai",
    ) -> None:
        if not model_name.strip():
            raise ValueError("OpenAIModel: model_name must not be blank")
        if context_window is not None and context_window < 1:
            raise ValueError(f"OpenAIModel: context_window must be at least 1, got {context_window}")
        self._model_name = model_name
        self._api_key = api_key
        self._base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self._client = client
        self._owns_client = client is None
        self._context_window = (
            context_window if context_window is not None else context_window_for(model_name)
        )
        self.retry = retry if retry is not None else RetryPolicy()
        self.timeout = timeout
        self.system_role: Literal["system", "developer"] = system_role
        if max_tokens_field is None:
            max_tokens_field = "max_completion_tokens" if self._base_url is None else "max_tokens"
        self.max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = max_tokens_field
        self.provider_name = provider_name
        self._errors = attrs.evolve(_ERRORS, provider=provider_name)

    @property
    def model_name(self) -> str:
        """The model's name."""
        return self._model_name

    @property
    def context_window(self) -> int | None:
        """The context window in tokens (given, or known for the model, or ``None``)."""
        return self._context_window

    def _get_client(self) -> openai.AsyncOpenAI:
        if self._client is not None:
            return self._client
        api_key = self._api_key or os.environ.get("OPENAI_API_KEY")
        if not api_key:
            if self._base_url is None:
                raise ModelAuthenticationError(
                    self.provider_name,
                    "no API key: set OPENAI_API_KEY or pass api_key= (or base_url= for a local server)",
                    model_name=self._model_name,
                )
            api_key = "none"
        self._client = openai.AsyncOpenAI(
            api_key=api_key, base_url=self._base_url, max_retries=0, timeout=self.timeout
        )
        return self._client

    async def check(self, *, timeout: float = DEFAULT_CHECK_TIMEOUT) -> None:
        """Check that requests can go through: a key resolves and the server answers.

        Lists the server's models once (no retry), within ``timeout`` seconds; see
        :func:`harness.models.check.probe` for what passes.

        Raises:
            ModelAuthenticationError: No API key, or the server refused it.
            ModelUnavailableError: The server cannot be reached, or failed.
            ModelTimeoutError: No answer within ``timeout``.
        """
        client = self._get_client()

        async def send() -> object:
            return await client.models.list(timeout=timeout)

        await probe(send, self._errors, model_name=self._model_name, where=str(client.base_url))

    def request_body(
        self,
        messages: Sequence[CanonicalMessage],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings,
    ) -> dict[str, Any]:
        """The JSON body a request would send (settings ``extra`` keys merged in)."""
        body: dict[str, Any] = {
            "model": self._model_name,
            "messages": to_openai_messages(messages, system_role=self.system_role),
        }
        if tools:
            body["tools"] = openai_tools(tools)
        if settings.max_tokens is not None:
            body[self.max_tokens_field] = settings.max_tokens
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
        sent_messages = body.pop("messages")
        options = call_options(settings, self.timeout)

        async def send() -> dict[str, Any]:
            result = await client.chat.completions.create(
                model=model,
                messages=sent_messages,
                extra_body=body,
                extra_headers=options.extra_headers,
                extra_query=options.extra_query,
                timeout=options.timeout,
            )
            return result.to_dict()

        data = await send_with_retries(
            send, errors=self._errors, policy=self.retry, model_name=self._model_name
        )
        return from_openai_completion(data, model_name=self._model_name, provider_name=self.provider_name)

    async def request_stream(
        self,
        messages: Sequence[CanonicalMessage],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings,
    ) -> AsyncIterator[StreamDelta]:
        """Send the history with ``stream=True`` and yield the answer's deltas as they arrive.

        The last item is a :class:`~harness.core.streaming.ResponseDone` whose message is
        the one :meth:`request` returns for the same answer. The retry policy applies
        until the first delta; the HTTP response is closed when the consumer stops early.
        ``ModelSettings.extra["stream_options"]`` is merged over ``{"include_usage": True}``
        (set ``include_usage`` to ``False`` for a server that rejects it).

        Raises:
            ModelError: As :meth:`request`; a failure after the first delta (an error
                event, a dropped connection, a stream that ends before its
                ``finish_reason``) is raised at once, not retried.
        """
        body = self.request_body(messages, tools, settings)
        client = self._get_client()
        model = body.pop("model")
        sent_messages = body.pop("messages")
        stream_options: Any = {"include_usage": True, **as_mapping(body.pop("stream_options", None))}
        body.pop("stream", None)
        options = call_options(settings, self.timeout)

        async def attempt() -> AsyncGenerator[StreamDelta]:
            stream = await client.chat.completions.create(
                model=model,
                messages=sent_messages,
                stream=True,
                stream_options=stream_options,
                extra_body=body,
                extra_headers=options.extra_headers,
                extra_query=options.extra_query,
                timeout=options.timeout,
            )
            chunks = CompletionAccumulator()
            try:
                async for chunk in stream:
                    for delta in chunks.feed(chunk.to_dict()):
                        yield delta
            finally:
                await stream.close()
            if not chunks.finished:  # a connection failure as the retry policy sees one
                raise openai.APIConnectionError(
                    message="the stream ended before the response was complete (no finish_reason)",
                    request=stream.response.request,
                )
            yield ResponseDone(
                from_openai_completion(
                    chunks.completion(), model_name=self._model_name, provider_name=self.provider_name
                )
            )

        async for item in stream_with_retries(
            attempt, errors=self._errors, policy=self.retry, model_name=self._model_name
        ):
            yield item
