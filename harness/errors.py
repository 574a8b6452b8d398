"""Exceptions and warnings raised by harness.

Every error harness raises on purpose derives from :class:`HarnessError`, and every
warning from :class:`HarnessWarning`, so callers can catch or filter the whole family
with one line.
"""

from __future__ import annotations

__all__ = [
    "CapabilityError",
    "CapabilityOrderError",
    "HarnessError",
    "HarnessExperimentalWarning",
    "HarnessWarning",
    "MessageError",
    "ModelAuthenticationError",
    "ModelBadRequestError",
    "ModelError",
    "ModelRateLimitError",
    "ModelResolutionError",
    "ModelTimeoutError",
    "ModelUnavailableError",
    "PluginLoadError",
    "ProviderNotInstalledError",
    "WireFormatError",
    "is_experimental",
    "warn_experimental",
]

import warnings


class HarnessError(Exception):
    """Root of every error harness raises on purpose."""


class MessageError(HarnessError, ValueError):
    """A message or part was built with values that break the message model."""


class WireFormatError(HarnessError, ValueError):
    """A document could not be read as a message history.

    Attributes:
        message_index: Index of the offending message, when known.
        part_index: Index of the offending part inside that message, when known.
        field: Name of the offending field, when known.
        reason: What was wrong, without the location prefix.
    """

    def __init__(
        self,
        reason: str,
        *,
        message_index: int | None = None,
        part_index: int | None = None,
        field: str | None = None,
    ) -> None:
        self.reason = reason
        self.message_index = message_index
        self.part_index = part_index
        self.field = field
        where: list[str] = []
        if message_index is not None:
            where.append(f"message {message_index}")
        if part_index is not None:
            where.append(f"part {part_index}")
        if field is not None:
            where.append(f"field {field!r}")
        super().__init__(f"{', '.join(where)}: {reason}" if where else reason)


class CapabilityError(HarnessError):
    """A capability failed or left the history in a state no provider accepts.

    Attributes:
        capability: Name of the capability at fault.
    """

    def __init__(self, capability: str, message: str) -> None:
        self.capability = capability
        super().__init__(f"capability {capability!r}: {message}")


class CapabilityOrderError(HarnessError):
    """Declared capability ordering is impossible (a cycle or a conflict)."""


class PluginLoadError(HarnessError):
    """An entry-point plugin could not be imported or registered."""


class HarnessWarning(UserWarning):
    """Root of every warning harness emits."""


class HarnessExperimentalWarning(HarnessWarning):
    """Emitted once when an experimental feature is imported.

    Silence every experimental feature at once with::

        warnings.filterwarnings("ignore", category=HarnessExperimentalWarning)
    """


_EXPERIMENTAL_FEATURES: set[str] = set()


def warn_experimental(feature: str) -> None:
    """Declare ``feature`` experimental and emit the experimental-feature warning for it.

    Call it at module import time; Python's module cache makes it fire once per process.
    The declaration is recorded whatever the warning filters say, so tools can tell which
    imported plugins are experimental (:func:`is_experimental`).

    Args:
        feature: Import name of the experimental feature, e.g. ``"harness_sliding_window"``.
    """
    _EXPERIMENTAL_FEATURES.add(feature)
    warnings.warn(
        f"{feature} is experimental: its API may change or be removed in any release without a "
        "deprecation period. Silence all experimental warnings with "
        "warnings.filterwarnings('ignore', category=harness.HarnessExperimentalWarning).",
        HarnessExperimentalWarning,
        stacklevel=3,
    )


def is_experimental(module_name: str) -> bool:
    """Whether an imported module, or a package it belongs to, declared itself experimental.

    Args:
        module_name: A dotted module name, e.g. ``"harness_tiered.tiered"``; the answer is
            ``True`` when it or any parent package called :func:`warn_experimental` with
            its own name.
    """
    parts = module_name.split(".")
    return any(".".join(parts[:end]) in _EXPERIMENTAL_FEATURES for end in range(1, len(parts) + 1))


class ModelError(HarnessError):
    """A model provider refused or failed a request.

    Raised by the real providers (``harness.models.openai``, ``harness.models.anthropic``)
    once their retry policy gave up, or at once for errors a retry cannot fix.

    Attributes:
        provider: The provider's name, e.g. ``"openai"`` or ``"anthropic"``.
        status_code: The HTTP status the provider answered with (``None`` for timeouts
            and connection failures).
        provider_message: The provider's own error message, verbatim.
        model_name: The model the request was for, when known.
        attempts: How many times the request was sent.
    """

    def __init__(
        self,
        provider: str,
        provider_message: str,
        *,
        status_code: int | None = None,
        model_name: str | None = None,
        attempts: int = 1,
    ) -> None:
        self.provider = provider
        self.provider_message = provider_message
        self.status_code = status_code
        self.model_name = model_name
        self.attempts = attempts
        status = f" (HTTP {status_code})" if status_code is not None else ""
        model = f" model {model_name!r}" if model_name else ""
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        super().__init__(f"{provider}{model}{status}{tries}: {provider_message}")


class ModelAuthenticationError(ModelError):
    """The provider rejected the credentials (HTTP 401/403) or none were configured. Never retried."""


class ModelBadRequestError(ModelError):
    """The provider rejected the request itself (HTTP 400, 404, 413, 422...). Never retried."""


class ModelRateLimitError(ModelError):
    """The provider kept answering HTTP 429 until the retry policy gave up."""


class ModelUnavailableError(ModelError):
    """The provider kept failing (HTTP 5xx, 529, connection errors) until the retry policy gave up."""


class ModelTimeoutError(ModelError):
    """Every attempt timed out before the provider answered."""


class ModelResolutionError(HarnessError, ValueError):
    """A model string such as ``"openai:gpt-4o-mini"`` names no known provider.

    Attributes:
        model_string: The string that could not be resolved.
        known_prefixes: The provider prefixes that would have been understood.
    """

    def __init__(self, model_string: str, message: str, known_prefixes: tuple[str, ...] = ()) -> None:
        self.model_string = model_string
        self.known_prefixes = known_prefixes
        super().__init__(message)


class ProviderNotInstalledError(ModelResolutionError):
    """The SDK a provider needs is not installed (``pip install 'harness-loop[openai]'``).

    Attributes:
        extra: The name of the optional dependency group to install.
    """

    def __init__(self, model_string: str, extra: str) -> None:
        self.extra = extra
        super().__init__(
            model_string,
            f"model {model_string!r} needs the {extra} SDK, which is not installed; "
            f"install it with: pip install 'harness-loop[{extra}]'",
        )
