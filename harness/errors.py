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
    "PluginLoadError",
    "WireFormatError",
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


def warn_experimental(feature: str) -> None:
    """Emit the experimental-feature warning for ``feature``.

    Call it at module import time; Python's module cache makes it fire once per process.

    Args:
        feature: Import name of the experimental feature, e.g. ``"harness_sliding_window"``.
    """
    warnings.warn(
        f"{feature} is experimental: its API may change or be removed in any release without a "
        "deprecation period. Silence all experimental warnings with "
        "warnings.filterwarnings('ignore', category=harness.HarnessExperimentalWarning).",
        HarnessExperimentalWarning,
        stacklevel=3,
    )
