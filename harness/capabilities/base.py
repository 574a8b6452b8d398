"""The base class for capabilities and the shared trigger logic.

A capability is a pluggy plugin object with a name, optional ordering constraints and,
for history-editing capabilities, a ``compact`` step. The default
``before_model_request`` runs ``compact`` when :meth:`Capability.should_compact` says so;
:class:`harness_tiered.TieredCompaction` and ``harness.compact(..., force=True)`` call
``compact`` directly, bypassing the trigger.
"""

from __future__ import annotations

__all__ = ["Capability", "Trigger"]

import re
from collections.abc import Mapping
from typing import ClassVar

import attrs

from harness.capabilities.context import RequestContext
from harness.core.markers import hookimpl
from harness.errors import CapabilityError


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise ValueError(f"{name} must be positive.")


@attrs.frozen
class Trigger:
    """When a capability acts: message count, absolute tokens, or a fraction of the window.

    The trigger fires when any configured limit is exceeded (strictly greater than).
    Construct it with :meth:`create` to get the validation messages.

    Attributes:
        max_messages: Fire when the history holds more than this many messages.
        max_tokens: Fire when the history holds more than this many tokens.
        max_fraction: Fire when the history exceeds this fraction of the context window.
        context_window: Overrides the model's context window (needed with
            ``max_fraction`` when the model does not report one).
    """

    max_messages: int | None = None
    max_tokens: int | None = None
    max_fraction: float | None = None
    context_window: int | None = None

    @classmethod
    def create(
        cls,
        *,
        max_messages: int | None = None,
        max_tokens: int | None = None,
        max_fraction: float | None = None,
        context_window: int | None = None,
        required: bool = True,
    ) -> Trigger:
        """Validate the parameters and build a trigger.

        Args:
            max_messages: See the class attributes.
            max_tokens: See the class attributes.
            max_fraction: See the class attributes.
            context_window: See the class attributes.
            required: Whether at least one limit must be set.

        Raises:
            ValueError: A limit is out of range, ``max_tokens`` and ``max_fraction`` are
                both set, or ``required`` and no limit is set. The message names the
                parameters.
        """
        if required and max_messages is None and max_tokens is None and max_fraction is None:
            raise ValueError("At least one of max_messages, max_tokens or max_fraction must be set.")
        _positive("max_messages", max_messages)
        _positive("max_tokens", max_tokens)
        _positive("context_window", context_window)
        if max_tokens is not None and max_fraction is not None:
            raise ValueError("Set at most one of max_tokens or max_fraction.")
        if max_fraction is not None and not 0 < max_fraction <= 1:
            raise ValueError("max_fraction must be in (0, 1].")
        return cls(max_messages, max_tokens, max_fraction, context_window)

    @property
    def configured(self) -> bool:
        """True when at least one limit is set."""
        return self.max_messages is not None or self.max_tokens is not None or self.max_fraction is not None

    def window(self, ctx: RequestContext, owner: str) -> int:
        """The context window to apply ``max_fraction`` to.

        Raises:
            CapabilityError: Neither ``context_window`` nor the model gives a size.
        """
        window = self.context_window or ctx.context_window
        if window is None:
            raise CapabilityError(
                owner,
                f"max_fraction needs the model's context window, and model {ctx.model_name!r} does not "
                "report one; pass context_window=... to the capability",
            )
        return window

    def token_limit(self, ctx: RequestContext, owner: str) -> int | None:
        """The token limit in force: ``max_tokens``, or ``max_fraction`` of the window."""
        if self.max_tokens is not None:
            return self.max_tokens
        if self.max_fraction is not None:
            return int(self.max_fraction * self.window(ctx, owner))
        return None

    def exceeded(self, ctx: RequestContext, owner: str) -> str | None:
        """Return why the trigger fires for ``ctx``, or ``None`` when it does not.

        The message-count check is O(1); the token check uses the cached counter, so an
        idle check costs only what changed since the last request.
        """
        if self.max_messages is not None and len(ctx.messages) > self.max_messages:
            return f"{len(ctx.messages)} messages > max_messages {self.max_messages}"
        limit = self.token_limit(ctx, owner)
        if limit is not None:
            tokens = ctx.context_tokens()
            if tokens > limit:
                return f"{tokens} tokens > limit {limit}"
        return None


_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


class Capability:
    """Base class for capabilities (optional: any pluggy plugin object works).

    Subclasses set :attr:`name` (defaults to the snake-cased class name), may declare
    :attr:`runs_before` / :attr:`runs_after` (names of other capabilities), and either
    implement :meth:`compact` (and :meth:`should_compact`) or override
    ``before_model_request`` themselves. An override of a hook must carry
    ``@hookimpl`` again.
    """

    name: ClassVar[str] = ""
    runs_before: ClassVar[tuple[str, ...]] = ()
    runs_after: ClassVar[tuple[str, ...]] = ()
    default_trigger: ClassVar[Mapping[str, int | float]] = {}
    """Trigger parameters a stack built from configuration uses when its entry sets none.

    A capability whose constructor requires ``max_messages``, ``max_tokens`` or
    ``max_fraction`` declares here when it should act by default, so that
    ``--stack "clear_tool_results:keep_pairs=3"`` works; Python callers still pass their
    own trigger explicitly.
    """

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        if not cls.__dict__.get("name"):
            cls.name = _CAMEL.sub("_", cls.__name__).lower()

    def should_compact(self, ctx: RequestContext) -> str | None:
        """Return why the capability should act on ``ctx`` now, or ``None`` to stay idle."""
        return "always"

    async def compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
        """Edit ``ctx.messages`` unconditionally, reporting each change via ``ctx.report``.

        The default does nothing. History-editing capabilities override it; they must
        keep every tool call with its answers and keep the request being sent.
        """

    @hookimpl
    async def before_model_request(self, ctx: RequestContext) -> None:
        """Run :meth:`compact` when :meth:`should_compact` fires."""
        reason = self.should_compact(ctx)
        if reason is not None:
            await self.compact(ctx, reason=reason)
