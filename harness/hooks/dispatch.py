"""Calling hook implementations: one at a time, each failure naming its plugin.

pluggy can neither await coroutines nor roll back an edit, and when ``pm.hook.<name>()``
raises it does not say which implementation raised, so the manager calls every
implementation itself, through this module:

* :func:`run_steps` runs ``before_model_request`` (and forced ``compact``) steps in order,
  each under the invariant guard (:func:`harness.history.guard.guard_edit`): a step that
  raises, returns a value or breaks the history has the history, the events and the
  request-scoped parts it added rolled back, and is named in a
  :class:`~harness.errors.CapabilityError`. ``ctx.report(event)`` reaches the
  ``on_compaction`` observers while the steps run.
* :func:`notify` calls the observers of ``after_node``, ``on_tool`` and ``on_compaction``.
* :func:`decide` calls the :data:`DECISION_HOOKS` (``firstresult``) implementations in
  pluggy's order until one answers.

An implementation that raises ends the call with a :class:`~harness.errors.CapabilityError`
naming its plugin and the hook, chained to the original exception (:func:`hook_failure`);
:data:`INTERRUPTS` propagate unchanged.
"""

from __future__ import annotations

__all__ = [
    "ASYNC_HOOKS",
    "DECISION_HOOKS",
    "INTERRUPTS",
    "Step",
    "bind",
    "decide",
    "forced_call",
    "hook_failure",
    "notify",
    "own_compact",
    "run_steps",
    "token_count_problem",
]

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Final, TypeAlias

import pluggy

from harness.capabilities.base import Capability
from harness.errors import CapabilityError
from harness.history.guard import guard_edit
from harness.hooks.tracing import Trace, traced_step

if TYPE_CHECKING:
    from harness.capabilities.context import CompactionEvent, RequestContext
    from harness.history.invariants import Violation

ASYNC_HOOKS: Final = frozenset(
    {"before_model_request", "after_node", "on_tool", "on_compaction", "after_model_response"}
)
"""Hooks the manager calls itself, awaiting ``async def`` implementations (no wrappers)."""

DECISION_HOOKS: Final = frozenset({"count_tokens", "resolve_model", "resolve_store", "resolve_engine"})
"""``firstresult`` hooks the manager calls itself, synchronously, in pluggy's order (no wrappers)."""

INTERRUPTS: Final = (asyncio.CancelledError, KeyboardInterrupt, SystemExit, GeneratorExit)
"""Exceptions that propagate unchanged, never wrapped in a :class:`~harness.errors.CapabilityError`."""

Step: TypeAlias = tuple[str, Callable[[], object], str]
"""(plugin name, bound call, hook or method name) of one guarded step."""

_Pending: TypeAlias = list[tuple[str, Awaitable[object]]]
"""Awaitables returned by ``async def`` observers, by plugin name, not awaited yet."""
_EventSink: TypeAlias = "Callable[[RequestContext, CompactionEvent], None]"


def hook_failure(plugin: str, what: str, exc: Exception, note: str = "") -> CapabilityError:
    """The error for ``exc``, raised by ``plugin``'s ``what`` (``"count_tokens"``, ``"on_tool observer"``).

    Raise it ``from exc``; ``note`` is appended to the message, e.g. ``" (the history was restored)"``.
    """
    return CapabilityError(plugin, f"{what} raised {type(exc).__name__}: {exc}{note}")


def decide(
    impls: Sequence[pluggy.HookImpl],
    kwargs: Mapping[str, object],
    hook_name: str,
    *,
    check: Callable[[object], str | None] | None = None,
    trace: Trace | None = None,
    passthrough: tuple[type[Exception], ...] = (),
) -> object:
    """Call ``impls`` in order until one returns something other than ``None``, and return it.

    Args:
        impls: The implementations, in call order.
        kwargs: The hook's arguments; each implementation gets the ones it names.
        hook_name: The hook, for messages and the trace.
        check: Says what is wrong with an answer (``None``: nothing).
        trace: Traces the call and its answer when given.
        passthrough: Exceptions that are the hook's documented way to fail (``resolve_store``'s
            ``SessionStoreError``): re-raised unchanged instead of wrapped.

    Returns:
        The first answer, or ``None`` when no implementation answered.

    Raises:
        CapabilityError: An implementation raised (chained), or ``check`` refused its
            answer; ``capability`` names its plugin.
    """
    if trace is not None:
        trace(f"{hook_name} -> {', '.join(impl.plugin_name for impl in impls) or '(no implementation)'}")
    for impl in impls:
        try:
            answer = bind(impl, kwargs)()
        except INTERRUPTS:
            raise
        except Exception as exc:
            if trace is not None:
                trace(f"{hook_name} <- {impl.plugin_name}: raised {type(exc).__name__}")
            if isinstance(exc, (CapabilityError, *passthrough)):
                raise
            raise hook_failure(impl.plugin_name, hook_name, exc) from exc
        if answer is None:
            continue
        problem = check(answer) if check is not None else None
        if problem is not None:
            if trace is not None:
                trace(f"{hook_name} <- {impl.plugin_name}: refused {answer!r}")
            raise CapabilityError(impl.plugin_name, f"{hook_name} returned {answer!r}; {problem}")
        if trace is not None:
            trace(f"{hook_name} <- {answer!r}")
        return answer
    if trace is not None:
        trace(f"{hook_name} <- None")
    return None


def token_count_problem(answer: object) -> str | None:
    """What is wrong with a ``count_tokens`` answer (a :func:`decide` check); ``None``: nothing."""
    if isinstance(answer, bool) or not isinstance(answer, int) or answer < 0:
        return "expected a non-negative int, or None to let the next implementation answer"
    return None


def bind(impl: pluggy.HookImpl, kwargs: Mapping[str, object]) -> Callable[[], object]:
    """A call of ``impl`` with the arguments it names, taken from ``kwargs``."""
    args = [kwargs[name] for name in impl.argnames]
    function: Callable[..., object] = impl.function

    def call() -> object:
        return function(*args)

    return call


def forced_call(method: Callable[..., object], ctx: RequestContext, reason: str) -> Callable[[], object]:
    """A call of a capability's ``compact(ctx, reason=reason)``."""

    def call() -> object:
        return method(ctx, reason=reason)

    return call


def own_compact(capability: object) -> Callable[..., object] | None:
    """The capability's ``compact`` method, unless it is missing or the base class's."""
    method: object = getattr(capability, "compact", None)
    if not callable(method):
        return None
    if isinstance(capability, Capability) and type(capability).compact is Capability.compact:
        return None
    return method


async def run_steps(
    ctx: RequestContext,
    steps: Sequence[Step],
    *,
    observers: Sequence[pluggy.HookImpl],
    trace: Trace | None = None,
) -> None:
    """Run ``steps`` on ``ctx`` in order, each under the invariant guard.

    While they run, ``ctx.report(event)`` calls ``observers`` (the ordered ``on_compaction``
    implementations) after the sink already installed; an ``async def`` observer is
    awaited right after the step that reported, and not at all if that step is rolled back.

    Args:
        ctx: The request context the steps edit.
        steps: The steps, in the order they run.
        observers: The ``on_compaction`` implementations, in call order.
        trace: Traces every step and observer call when given.

    Raises:
        CapabilityError: A step raised (chained), returned a value or left a new invariant
            violation, or an observer raised; the history is restored to what it was before
            that step.
        asyncio.CancelledError: Propagated unchanged, after restoring the history.
    """
    previous_sink = ctx.on_event
    pending: _Pending = []
    ctx.on_event = _event_sink(observers, pending, previous_sink, trace)
    baseline: Sequence[Violation] | None = None
    try:
        for name, call, hook_name in steps:
            baseline = await _guarded_step(ctx, name, call, hook_name, pending, baseline, trace)
    finally:
        ctx.on_event = previous_sink


async def _guarded_step(
    ctx: RequestContext,
    name: str,
    call: Callable[[], object],
    hook_name: str,
    pending: _Pending,
    baseline: Sequence[Violation] | None,
    trace: Trace | None,
) -> Sequence[Violation] | None:
    history = ctx.messages
    snapshot = list(history)
    if trace is not None:
        call = traced_step(trace, call, name, hook_name, ctx)
    events_before = len(ctx.events)
    scoped_before = len(ctx.request_scoped)

    def restore() -> None:
        history[:] = snapshot
        ctx.messages = history
        del ctx.events[events_before:]
        del ctx.request_scoped[scoped_before:]
        for _, awaitable in pending:
            _discard(awaitable)
        pending.clear()

    try:
        result = call()
        if inspect.isawaitable(result):
            result = await result
        if result is not None:
            raise CapabilityError(
                name,
                f"{hook_name} returned {type(result).__name__}; it must edit ctx.messages in "
                "place and return None",
            )
    except CapabilityError:
        restore()
        raise
    except INTERRUPTS:
        restore()
        raise
    except Exception as exc:
        restore()
        raise hook_failure(name, hook_name, exc, " (the history was restored)") from exc

    if ctx.messages is not history:  # the implementation rebound the list
        history[:] = ctx.messages
        ctx.messages = history
    try:
        baseline = guard_edit(snapshot, history, name, hook_name=hook_name, baseline=baseline)
    except CapabilityError:
        restore()
        raise
    await _drain(pending)
    return baseline


def _event_sink(
    observers: Sequence[pluggy.HookImpl],
    pending: _Pending,
    previous: _EventSink | None,
    trace: Trace | None,
) -> _EventSink:
    def sink(ctx: RequestContext, event: CompactionEvent) -> None:
        if previous is not None:
            previous(ctx, event)
        for impl in observers:
            result = _call_observer(impl, {"ctx": ctx, "event": event}, "on_compaction", trace)
            if inspect.isawaitable(result):
                pending.append((impl.plugin_name, result))

    return sink


async def notify(
    impls: Sequence[pluggy.HookImpl],
    kwargs: Mapping[str, object],
    hook_name: str,
    trace: Trace | None = None,
) -> None:
    """Call every observer in ``impls`` in order, awaiting each ``async def`` one before the next.

    Raises:
        CapabilityError: An observer raised; it names the plugin and is chained to the
            original exception.
    """
    for impl in impls:
        result = _call_observer(impl, kwargs, hook_name, trace)
        if inspect.isawaitable(result):
            await _drain([(impl.plugin_name, result)], hook_name)


def _call_observer(
    impl: pluggy.HookImpl,
    kwargs: Mapping[str, object],
    hook_name: str,
    trace: Trace | None = None,
) -> object:
    if trace is not None:
        trace(f"{hook_name} -> {impl.plugin_name}")
    try:
        return bind(impl, kwargs)()
    except INTERRUPTS:
        raise
    except CapabilityError:
        raise
    except Exception as exc:
        raise hook_failure(impl.plugin_name, f"{hook_name} observer", exc) from exc


async def _drain(pending: _Pending, hook_name: str = "on_compaction") -> None:
    while pending:
        name, awaitable = pending.pop(0)
        try:
            await awaitable
        except INTERRUPTS:
            for _, rest in pending:
                _discard(rest)
            pending.clear()
            raise
        except Exception as exc:
            for _, rest in pending:
                _discard(rest)
            pending.clear()
            if isinstance(exc, CapabilityError):
                raise
            raise hook_failure(name, f"{hook_name} observer", exc) from exc


def _discard(awaitable: Awaitable[object]) -> None:
    if inspect.iscoroutine(awaitable):
        awaitable.close()
