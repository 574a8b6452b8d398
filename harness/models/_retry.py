"""Retry policy and error mapping shared by the real providers.

Both SDKs are created with ``max_retries=0``: harness owns the retry policy, so it is the
same for every provider and is what the documentation describes. Rate limits (HTTP 429),
server errors (HTTP 5xx, including Anthropic's 529 "overloaded"), 408/409, timeouts and
connection failures are retried with exponential backoff, honouring ``retry-after-ms`` /
``retry-after`` headers. Authentication and bad-request errors are never retried and
become typed :class:`~harness.errors.ModelError` subclasses carrying the provider's
message.

Streams (:func:`stream_with_retries`) follow the same policy until their first delta; an
error after it is raised at once as the typed error, since what the consumer already
received cannot be taken back. An error event inside a stream (HTTP 200) is classified by
the error ``type`` it names (``overloaded_error``, ``rate_limit_error``, ``server_error``...).
"""

from __future__ import annotations

__all__ = [
    "ProviderErrors",
    "RetryPolicy",
    "map_error",
    "parse_retry_after",
    "send_with_retries",
    "stream_with_retries",
]

import asyncio
import email.utils
import math
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar

import attrs

from harness.errors import (
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelContextLengthError,
    ModelError,
    ModelRateLimitError,
    ModelTimeoutError,
    ModelUnavailableError,
)

_T = TypeVar("_T")

_RETRYABLE_STATUS = frozenset({408, 409, 429})


def _non_negative(_instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if value < 0 or math.isnan(value):
        raise ValueError(f"RetryPolicy.{attribute.name} must be >= 0, got {value!r}")


@attrs.frozen
class RetryPolicy:
    """How a provider model retries failed requests.

    The delay before retry ``n`` (``n`` = 1, 2...) is the provider's ``retry-after`` when
    it sent one, else ``base_delay * 2 ** (n - 1)`` capped at ``max_delay``, plus up to
    ``jitter`` (a fraction) of random extra.

    Attributes:
        max_retries: Retries after the first attempt (``0`` disables retrying).
        base_delay: First backoff delay in seconds.
        max_delay: Longest backoff delay in seconds (``retry-after`` is not capped by it).
        max_retry_after: Longest ``retry-after`` honoured, in seconds; a provider asking
            for a longer wait fails the request at once with the typed error.
        jitter: Random extra delay, as a fraction of the delay (``0.1`` = up to 10 %).
        sleep: The coroutine used to wait (replace it in tests).
    """

    max_retries: int = attrs.field(default=4, validator=_non_negative)
    base_delay: float = attrs.field(default=0.5, validator=_non_negative)
    max_delay: float = attrs.field(default=30.0, validator=_non_negative)
    max_retry_after: float = attrs.field(default=120.0, validator=_non_negative)
    jitter: float = attrs.field(default=0.1, validator=_non_negative)
    sleep: Callable[[float], Awaitable[None]] = attrs.field(default=asyncio.sleep, eq=False, repr=False)

    def delay(self, retry: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number ``retry`` (1-based)."""
        if retry_after is not None:
            base = retry_after
        else:
            base = min(self.max_delay, self.base_delay * 2 ** (retry - 1))
        return base + base * self.jitter * random.random()


@attrs.frozen
class ProviderErrors:
    """The exception classes of one provider SDK.

    Attributes:
        provider: The provider's name used in error messages.
        status_error: The SDK's ``APIStatusError`` (has ``status_code`` and ``response``).
        timeout_error: The SDK's ``APITimeoutError``.
        connection_error: The SDK's ``APIConnectionError``.
        stream_error: The SDK's base ``APIError``, raised for an error event inside a
            stream that is no status error (OpenAI's SDK does so); ``None`` when the SDK
            raises a status error for those (Anthropic's).
    """

    provider: str
    status_error: type[BaseException]
    timeout_error: type[BaseException]
    connection_error: type[BaseException]
    stream_error: type[BaseException] | None = None


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Read ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date) in seconds.

    Returns:
        The wait in seconds (never negative), or ``None`` when no usable header is present.
    """
    if not headers:
        return None
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            value = float(milliseconds) / 1000
        except ValueError:
            value = math.nan
        if math.isfinite(value):
            return max(0.0, value)
    header = headers.get("retry-after")
    if header is None:
        return None
    try:
        value = float(header)
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(header)
        except (TypeError, ValueError, IndexError):
            return None
        current = time.time() if now is None else now
        return max(0.0, parsed.timestamp() - current)
    return max(0.0, value) if math.isfinite(value) else None


def _provider_message(exc: BaseException) -> str:
    body: object = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        mapping: Mapping[str, Any] = body  # pyright: ignore[reportUnknownVariableType]
        error: object = mapping.get("error", mapping)
        if isinstance(error, Mapping):
            message: object = error.get("message")  # pyright: ignore[reportUnknownMemberType,reportUnknownVariableType]
            if isinstance(message, str) and message:
                return message
    elif isinstance(body, str) and body.strip():
        return body.strip()
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) and message else str(exc) or type(exc).__name__


def _headers(exc: BaseException) -> Mapping[str, str] | None:
    response: object = getattr(exc, "response", None)
    headers: object = getattr(response, "headers", None)
    return headers if isinstance(headers, Mapping) else None  # pyright: ignore[reportUnknownVariableType]


def _error_type_name(exc: BaseException) -> str:
    body: object = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        mapping: Mapping[str, Any] = body  # pyright: ignore[reportUnknownVariableType]
        error: object = mapping.get("error", mapping)
        if isinstance(error, Mapping):
            for key in ("type", "code"):
                value: object = error.get(key)  # pyright: ignore[reportUnknownMemberType,reportUnknownVariableType]
                if isinstance(value, str) and value:
                    return value
    return ""


_STREAM_ERROR_TYPES: dict[str, tuple[type[ModelError], bool]] = {
    "rate_limit_error": (ModelRateLimitError, True),
    "rate_limit_exceeded": (ModelRateLimitError, True),
    "overloaded_error": (ModelUnavailableError, True),
    "api_error": (ModelUnavailableError, True),
    "server_error": (ModelUnavailableError, True),
    "timeout_error": (ModelTimeoutError, True),
    "authentication_error": (ModelAuthenticationError, False),
    "permission_error": (ModelAuthenticationError, False),
    "invalid_api_key": (ModelAuthenticationError, False),
    "invalid_request_error": (ModelBadRequestError, False),
    "not_found_error": (ModelBadRequestError, False),
    "request_too_large": (ModelBadRequestError, False),
}
"""Error types an error event inside a stream names (an unknown one counts as unavailable)."""


@attrs.frozen
class _Failure:
    error_type: type[ModelError]
    status_code: int | None
    message: str
    retryable: bool
    retry_after: float | None


def _stream_failure(exc: BaseException) -> _Failure:
    error_type, retryable = _STREAM_ERROR_TYPES.get(_error_type_name(exc), (ModelUnavailableError, True))
    return _Failure(error_type, None, _provider_message(exc), retryable, None)


_CONTEXT_LENGTH_PHRASES = (
    "prompt is too long",  # Anthropic: "prompt is too long: 215000 tokens > 200000 maximum"
    "context length",  # OpenAI: "This model's maximum context length is 128000 tokens..."
    "context window",  # "... exceeds the context window of this model"
    "context limit",  # Anthropic: "input length and `max_tokens` exceed context limit: ..."
)


def _is_context_length(exc: BaseException, code: int, message: str) -> bool:
    """Whether a 400/413 refusal says the request does not fit the model's context window."""
    if code == 413:  # request_too_large: the request is bigger than the provider takes
        return True
    body: object = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        mapping: Mapping[str, Any] = body  # pyright: ignore[reportUnknownVariableType]
        error: object = mapping.get("error", mapping)
        if isinstance(error, Mapping) and error.get("code") == "context_length_exceeded":  # pyright: ignore[reportUnknownMemberType]
            return True
    lowered = message.lower()
    return code == 400 and any(phrase in lowered for phrase in _CONTEXT_LENGTH_PHRASES)


def _classify(exc: BaseException, errors: ProviderErrors) -> _Failure | None:
    if isinstance(exc, errors.timeout_error):
        return _Failure(ModelTimeoutError, None, _provider_message(exc), True, None)
    if isinstance(exc, errors.connection_error):
        return _Failure(ModelUnavailableError, None, _provider_message(exc), True, None)
    if not isinstance(exc, errors.status_error):
        if errors.stream_error is not None and isinstance(exc, errors.stream_error):
            return _stream_failure(exc)
        return None
    status: object = getattr(exc, "status_code", None)
    code = status if isinstance(status, int) else 0
    if 200 <= code < 300:  # an error event inside a stream the server had accepted
        return _stream_failure(exc)
    message = _provider_message(exc)
    retry_after = parse_retry_after(_headers(exc))
    if code in (401, 403):
        return _Failure(ModelAuthenticationError, code, message, False, None)
    if code == 429:
        return _Failure(ModelRateLimitError, code, message, True, retry_after)
    if code == 408:
        return _Failure(ModelTimeoutError, code, message, True, retry_after)
    if code >= 500 or code in _RETRYABLE_STATUS:
        return _Failure(ModelUnavailableError, code, message, True, retry_after)
    if _is_context_length(exc, code, message):
        return _Failure(ModelContextLengthError, code, message, False, None)
    return _Failure(ModelBadRequestError, code, message, False, None)


def map_error(
    exc: BaseException, errors: ProviderErrors, *, model_name: str | None = None, attempts: int = 1
) -> ModelError | None:
    """Turn an SDK exception into the typed harness error, or ``None`` if it is not an API error."""
    failure = _classify(exc, errors)
    if failure is None:
        return None
    return failure.error_type(
        errors.provider,
        failure.message,
        status_code=failure.status_code,
        model_name=model_name,
        attempts=attempts,
    )


async def send_with_retries(
    send: Callable[[], Awaitable[_T]],
    *,
    errors: ProviderErrors,
    policy: RetryPolicy,
    model_name: str | None = None,
) -> _T:
    """Call ``send`` until it succeeds, retrying what ``policy`` allows.

    Raises:
        ModelError: A subclass matching the last failure, chained to the SDK exception.
    """
    attempt = 0
    while True:
        attempt += 1
        try:
            return await send()
        except Exception as exc:
            failure = _classify(exc, errors)
            if failure is None:
                raise
            too_long = failure.retry_after is not None and failure.retry_after > policy.max_retry_after
            if not failure.retryable or attempt > policy.max_retries or too_long:
                raise failure.error_type(
                    errors.provider,
                    failure.message,
                    status_code=failure.status_code,
                    model_name=model_name,
                    attempts=attempt,
                ) from exc
            await policy.sleep(policy.delay(attempt, failure.retry_after))


async def stream_with_retries(
    attempt: Callable[[], AsyncGenerator[_T]],
    *,
    errors: ProviderErrors,
    policy: RetryPolicy,
    model_name: str | None = None,
) -> AsyncIterator[_T]:
    """Yield what ``attempt()`` yields, opening a new attempt as ``policy`` allows.

    A failure before the first item is retried as :func:`send_with_retries` retries; a
    failure after it is raised at once (the consumer already has part of the answer).
    Each attempt is closed when it ends, fails, or the consumer stops early.

    Raises:
        ModelError: A subclass matching the failure, chained to the SDK exception.
    """
    number = 0
    while True:
        number += 1
        started = False
        stream = attempt()
        try:
            async for item in stream:
                started = True
                yield item
            return
        except Exception as exc:
            failure = _classify(exc, errors)
            if failure is None:
                raise
            too_long = failure.retry_after is not None and failure.retry_after > policy.max_retry_after
            if started or not failure.retryable or number > policy.max_retries or too_long:
                message = failure.message
                if started:
                    message += " (the stream failed after it had started, so it was not retried)"
                raise failure.error_type(
                    errors.provider,
                    message,
                    status_code=failure.status_code,
                    model_name=model_name,
                    attempts=number,
                ) from exc
            delay = policy.delay(number, failure.retry_after)
        finally:
            await stream.aclose()
        await policy.sleep(delay)
