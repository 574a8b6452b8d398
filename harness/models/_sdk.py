"""Plumbing shared by the models that drive an official provider SDK.

Both :class:`~harness.models.openai.OpenAIModel` and
:class:`~harness.models.anthropic.AnthropicModel` create their SDK client lazily, own it
unless one was injected, accept the same provider-specific settings and pass the same
per-call options; this module holds that once.
"""

from __future__ import annotations

__all__ = ["CALL_OPTIONS", "CallOptions", "SDKClientOwner", "apply_extra_settings", "call_options"]

from typing import Any, Generic, NamedTuple, Protocol, Self, TypeVar

from harness.core.model import ModelSettings

CALL_OPTIONS = ("extra_headers", "extra_query")
"""Keys of ``ModelSettings.extra`` passed to the SDK call itself, not put in the body."""


class _Closable(Protocol):
    async def close(self) -> None: ...


_Client = TypeVar("_Client", bound=_Closable)


def apply_extra_settings(body: dict[str, Any], settings: ModelSettings) -> None:
    """Copy ``settings.extra`` into the request body, except the per-call options."""
    for key, value in settings.extra.items():
        if key not in CALL_OPTIONS:
            body[key] = value


class CallOptions(NamedTuple):
    """Per-call options of an SDK request."""

    extra_headers: Any
    extra_query: Any
    timeout: float | None


def call_options(settings: ModelSettings, default_timeout: float | None) -> CallOptions:
    """The SDK call's ``extra_headers``, ``extra_query`` and ``timeout`` for ``settings``."""
    timeout = settings.timeout if settings.timeout is not None else default_timeout
    return CallOptions(settings.extra.get("extra_headers"), settings.extra.get("extra_query"), timeout)


class SDKClientOwner(Generic[_Client]):
    """Holds a lazily created SDK client and closes it when this model created it.

    Subclasses set ``_client`` (``None`` until first use, or the injected client) and
    ``_owns_client`` in ``__init__``.
    """

    _client: _Client | None
    _owns_client: bool

    async def aclose(self) -> None:
        """Close the SDK client if this model created it."""
        if self._client is not None and self._owns_client:
            await self._client.close()
            self._client = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
