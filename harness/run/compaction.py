"""Apply a capability stack to a history outside of an agent run.

This is what a ``/compact`` command, a dry run ("what would be sent?") and other
frameworks use: :func:`compact` takes a history and capabilities and returns the edited
copy together with every :class:`~harness.capabilities.context.CompactionEvent` reported and the
request-scoped parts the stack produced. The stack runs through a
:class:`~harness.hooks.manager.PluginManager`, so ordering, the invariant guard and the
``on_compaction`` hook behave exactly as inside a run.
"""

from __future__ import annotations

__all__ = ["CompactionResult", "compact", "compact_sync"]

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from harness.capabilities.context import CompactionEvent, RequestContext
from harness.core.markers import hookimpl
from harness.core.messages import CanonicalMessage, Part, Usage, history_repr
from harness.errors import HarnessError
from harness.hooks.defaults import default_plugin_manager
from harness.hooks.manager import PluginManager
from harness.run.sync import run_sync

if TYPE_CHECKING:
    from harness.core.model import Model


@attrs.frozen
class CompactionResult:
    """The outcome of :func:`compact`.

    Attributes:
        messages: The edited history (a new list; the input is never mutated).
        events: Every edit reported by the stack, in order.
        request_scoped: Parts the stack wanted sent with the next request only (never
            part of ``messages``).
        tokens_before: Exact token count of the input history.
        tokens_after: Exact token count of ``messages``.
        usage: The context's usage plus what the stack charged to it (a summarizer's
            requests, through ``RequestContext.add_usage``).
    """

    messages: list[CanonicalMessage] = attrs.field(repr=history_repr)
    events: tuple[CompactionEvent, ...]
    request_scoped: tuple[Part, ...]
    tokens_before: int
    tokens_after: int
    usage: Usage = attrs.field(factory=Usage)

    @property
    def changed(self) -> bool:
        """True when at least one edit was reported."""
        return bool(self.events)

    @property
    def tokens_saved(self) -> int:
        """Tokens freed (negative if the history grew)."""
        return self.tokens_before - self.tokens_after


@attrs.frozen
class _ForwardCompaction:
    """Forwards ``on_compaction`` events of a private stack to the caller's manager."""

    target: PluginManager
    name: str = "harness.run.compaction:forward"

    @hookimpl(trylast=True)
    async def on_compaction(self, ctx: RequestContext, event: CompactionEvent) -> None:
        """Pass ``event`` to the observers of :attr:`target`."""
        await self.target.notify_compaction(ctx, event)


async def compact(
    messages: Sequence[CanonicalMessage],
    capabilities: Sequence[object] | None,
    *,
    context: RequestContext | None = None,
    model: Model | None = None,
    model_name: str | None = None,
    context_window: int | None = None,
    force: bool = True,
    plugin_manager: PluginManager | None = None,
) -> CompactionResult:
    """Run a capability stack over a copy of ``messages``.

    By default (``force=True``, what ``harness compact`` does, as a ``/compact`` command
    would) every capability that has its own ``compact`` method is made to act now
    (``compact(ctx, reason="forced")``), bypassing its trigger, so no context window is
    needed; capabilities without one (e.g. a limit warner) and plain plugins run their
    ``before_model_request`` as usual. With ``force=False`` (``harness compact
    --if-needed``) each capability decides for itself, through its trigger, whether to act,
    exactly as before a model request: a fraction trigger needs ``context_window`` (or a
    ``model`` that reports one).

    Args:
        messages: The history; normally ending with the request about to be sent. It is
            copied and never mutated.
        capabilities: The capabilities to apply, in the user's order. ``None`` runs the
            stack already registered in ``plugin_manager`` (an agent's own stack).
        context: A context to take the token counter, model, usage, limits and plugin
            state from (its messages, events and request-scoped parts are not used and
            not changed; ``state`` is shared).
        model: The model (the default summarizer for summarizing capabilities); also
            supplies ``model_name`` and ``context_window`` when those are not given.
        model_name: Name of the model, used to pick the tokenizer.
        context_window: The model's context window, for fraction-based triggers.
        force: Call each capability's ``compact`` directly (the default) instead of
            asking its trigger.
        plugin_manager: Supplies the ``on_compaction`` observers and the
            ``count_tokens`` hook. With ``capabilities`` given, the stack runs in a
            private manager and its events are forwarded to this one (which is not
            modified); with ``capabilities=None`` this manager's own stack runs.

    Returns:
        The edited copy, the reported events, the request-scoped parts and the token
        counts before and after.

    Raises:
        CapabilityError: A capability failed or left an invalid history (see
            :meth:`harness.hooks.manager.PluginManager.run_before_model_request`).
        CapabilityOrderError: The capabilities' ordering cannot be satisfied.
        HarnessError: ``capabilities`` is ``None`` and no ``plugin_manager`` is given.
    """
    if capabilities is None:
        if plugin_manager is None:
            raise HarnessError("compact() needs capabilities, or a plugin_manager whose stack to run")
        manager = plugin_manager
    else:
        # without a manager of the caller's, the installed observers (harness-otel) see the edits
        manager = default_plugin_manager() if plugin_manager is None else PluginManager()
        manager.add_capabilities(capabilities)
        if plugin_manager is not None:
            manager.register(_ForwardCompaction(plugin_manager))
    tokens_from = plugin_manager if plugin_manager is not None else manager

    working = list(messages)
    if context is not None:
        ctx = attrs.evolve(context, messages=working, request_scoped=[], events=[], on_event=None)
        if model is not None:
            ctx.model = model
        if model_name is not None:
            ctx.model_name = model_name
            ctx.token_counter = tokens_from.token_counter(model_name)
        if context_window is not None:
            ctx.context_window = context_window
    else:
        if model is not None:
            model_name = model_name or model.model_name
            context_window = context_window or model.context_window
        ctx = RequestContext(
            messages=working,
            token_counter=tokens_from.token_counter(model_name),
            model=model,
            model_name=model_name,
            context_window=context_window,
        )

    tokens_before = ctx.count_tokens(working)
    if force:
        await manager.run_compact(ctx, reason="forced")
    else:
        await manager.run_before_model_request(ctx)
    result = list(ctx.messages)
    return CompactionResult(
        messages=result,
        events=tuple(ctx.events),
        request_scoped=tuple(ctx.request_scoped),
        tokens_before=tokens_before,
        tokens_after=ctx.count_tokens(result),
        usage=ctx.usage,
    )


def compact_sync(
    messages: Sequence[CanonicalMessage],
    capabilities: Sequence[object] | None,
    *,
    context: RequestContext | None = None,
    model: Model | None = None,
    model_name: str | None = None,
    context_window: int | None = None,
    force: bool = True,
    plugin_manager: PluginManager | None = None,
) -> CompactionResult:
    """Run :func:`compact` to completion from synchronous code (with ``asyncio.run``).

    Takes the same arguments as :func:`compact`.

    Raises:
        EventLoopRunningError: Called while an event loop is running in this thread; use
            ``await harness.compact(...)`` there instead.
        CapabilityError: As :func:`compact`.
    """
    return run_sync(
        lambda: compact(
            messages,
            capabilities,
            context=context,
            model=model,
            model_name=model_name,
            context_window=context_window,
            force=force,
            plugin_manager=plugin_manager,
        ),
        "compact_sync",
        "await harness.compact(...)",
    )
