"""Checking, before a run, that a model can be reached: credentials resolve, the server answers.

:func:`check_model` asks the model's own ``check(timeout=...)`` method, when it has one.
The SDK models (:class:`~harness.models.openai.OpenAIModel`,
:class:`~harness.models.anthropic.AnthropicModel`) list the server's models once (a
request that costs nothing), on the configured ``base_url``, without retries; offline
models (``TestModel``, ``FunctionModel``, a plugin's scripted model) have nothing to check.
Any model may implement ``async def check(self, *, timeout: float) -> None``.
"""

from __future__ import annotations

__all__ = ["DEFAULT_CHECK_TIMEOUT", "check_model", "probe"]

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Final, cast

from harness.core.model import Model
from harness.errors import ModelAuthenticationError, ModelTimeoutError, ModelUnavailableError
from harness.models._retry import ProviderErrors, map_error
from harness.models._sdk import SDKClientOwner

DEFAULT_CHECK_TIMEOUT: Final = 10.0
"""Seconds :func:`check_model` waits for the server."""

_NOT_IMPLEMENTED: Final = 501


async def check_model(model: Model, *, timeout: float = DEFAULT_CHECK_TIMEOUT) -> None:
    """Make sure ``model`` can take requests: its credentials resolve and its server answers.

    The SDK client the check opened is closed again (the model creates a new one on its
    next request), so the check can run in an event loop of its own.

    Args:
        model: The model; one without a ``check`` method passes.
        timeout: Seconds to wait for the server.

    Raises:
        ModelAuthenticationError: No API key is configured, or the server refused it.
        ModelUnavailableError: The server cannot be reached, or answered with a server error.
        ModelTimeoutError: The server did not answer within ``timeout``.
    """
    check: object = getattr(model, "check", None)
    if not callable(check):
        return
    try:
        result: object = check(timeout=timeout)
        if inspect.isawaitable(result):
            await result
    finally:
        if isinstance(model, SDKClientOwner):
            # The client belongs to this event loop; the next request creates its own.
            await cast("SDKClientOwner[Any]", model).aclose()


async def probe(
    send: Callable[[], Awaitable[object]], errors: ProviderErrors, *, model_name: str, where: str
) -> None:
    """Send one cheap request; fail only on what would make every request of a run fail.

    An answer of any other kind (404 or 501 from a server without a model list, 429...)
    shows the server is there and took the credentials, so it passes.

    Args:
        send: Sends the request (the SDK call, with its timeout).
        errors: The SDK's exception classes.
        model_name: The model, for the error.
        where: The server, e.g. its URL, named in a connection error.

    Raises:
        ModelAuthenticationError: The server refused the credentials (401, 403).
        ModelUnavailableError: The server cannot be reached or failed (5xx).
        ModelTimeoutError: No answer in time.
    """
    try:
        await send()
    except Exception as exc:
        error = map_error(exc, errors, model_name=model_name)
        if error is None:
            raise
        if isinstance(error, ModelAuthenticationError):
            raise error from exc
        if error.status_code == _NOT_IMPLEMENTED:
            return  # a server that has no model list: it answered, so it is there
        if isinstance(error, ModelUnavailableError | ModelTimeoutError):
            raise type(error)(
                error.provider,
                f"cannot reach {where}: {error.provider_message}",
                status_code=error.status_code,
                model_name=model_name,
            ) from exc
