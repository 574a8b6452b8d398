"""Record the hook calls a :class:`~harness.hooks.PluginManager` makes, and register plugins for a while.

The manager calls every hook implementation itself (pluggy's ``add_hookcall_monitoring``
sees none of them), so :class:`HookRecorder` wraps the manager's dispatch methods
(``run_before_model_request``, ``run_compact``, ``notify_after_node``, ``notify_tool``,
``notify_compaction``, ``count_tokens``, ``resolve_model``) and the ``ctx.report`` sink, on
that one manager instance only (and still monitors ``pm.pluggy_manager.hook.<name>`` calls)::

    with HookRecorder(manager) as recorder:
        await agent.run("hi")          # an Agent(..., plugin_manager=manager)
    assert recorder.hooks()[:2] == ["before_model_request", "after_node"]
    recorder.assert_called("on_compaction", times=1)

One call is recorded per *dispatch* of a hook (not per implementation), whether or not
any plugin implements it, in the order the dispatches start.
"""

from __future__ import annotations

__all__ = ["HookCall", "HookRecorder", "Registrar"]

from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any, Self, cast

import attrs
import pluggy

from harness.capabilities.base import Capability
from harness.capabilities.context import CompactionEvent, RequestContext
from harness.core.messages import CanonicalMessage
from harness.hooks.manager import PluginManager
from harness.hooks.ordering import capability_name

_CONTEXT_METHODS: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "run_before_model_request": ("before_model_request", ("ctx",)),
    "run_compact": ("before_model_request", ("ctx",)),
    "notify_after_node": ("after_node", ("ctx", "node")),
    "notify_tool": ("on_tool", ("ctx", "event")),
    "notify_compaction": ("on_compaction", ("ctx", "event")),
}
_DECISION_METHODS: Mapping[str, tuple[str, ...]] = {
    "count_tokens": ("text", "model_name"),
    "resolve_model": ("model_string",),
}


@attrs.define
class HookCall:
    """One recorded dispatch of a hook.

    Attributes:
        hook: The hook's name, e.g. ``"before_model_request"``.
        kwargs: The hook's arguments by name (the live objects, not copies).
        via: How it was dispatched: ``"pluggy"`` (``pm.pluggy_manager.hook.<name>``),
            ``"report"`` (``ctx.report`` during a run of the stack) or the manager method's
            name (``"run_before_model_request"``, ``"notify_after_node"``, ``"count_tokens"``...).
        messages: A copy of ``ctx.messages`` when the call started, if the hook has a
            context with messages (the history the implementations were given).
        result: What the dispatch returned (decision hooks; ``None`` for context hooks).
        error: The exception the dispatch raised, if any.
    """

    hook: str
    kwargs: Mapping[str, object]
    via: str
    messages: tuple[CanonicalMessage, ...] | None = None
    result: object = None
    error: BaseException | None = None


def _snapshot(kwargs: Mapping[str, object]) -> tuple[CanonicalMessage, ...] | None:
    messages: object = getattr(kwargs.get("ctx"), "messages", None)
    if isinstance(messages, list):
        items = cast("list[CanonicalMessage]", messages)
        return tuple(items)
    return None


class HookRecorder:
    """Records every hook call made through ``manager`` until :meth:`detach`.

    Args:
        manager: The manager to watch. Attaching twice to one manager is allowed; each
            recorder sees every call.
    """

    def __init__(self, manager: PluginManager) -> None:
        self.manager = manager
        self.calls: list[HookCall] = []
        self._open: list[HookCall] = []
        self._wrappers: dict[str, Callable[..., object]] = {}
        self._undo: Callable[[], None] | None = manager.pluggy_manager.add_hookcall_monitoring(
            self._before, self._after
        )
        for method in _CONTEXT_METHODS:
            wrapper = self._wrap(method)
            self._wrappers[method] = wrapper
            setattr(manager, method, wrapper)
        for method in _DECISION_METHODS:
            decision = self._wrap_decision(method)
            self._wrappers[method] = decision
            setattr(manager, method, decision)

    # -- capture -------------------------------------------------------------------------

    def _before(
        self, hook_name: str, hook_impls: Sequence[pluggy.HookImpl], kwargs: Mapping[str, Any]
    ) -> None:
        call = HookCall(hook_name, dict(kwargs), "pluggy", _snapshot(kwargs))
        self.calls.append(call)
        self._open.append(call)

    def _after(
        self,
        outcome: pluggy.Result[Any],
        hook_name: str,
        hook_impls: Sequence[pluggy.HookImpl],
        kwargs: Mapping[str, Any],
    ) -> None:
        call = self._open.pop()
        call.error = outcome.exception
        if outcome.exception is None:
            call.result = outcome.get_result()

    def _wrap(self, method: str) -> Callable[..., Awaitable[None]]:
        original: Callable[..., Awaitable[None]] = getattr(self.manager, method)
        hook, names = _CONTEXT_METHODS[method]

        async def wrapper(*args: Any, **kwargs: Any) -> None:
            hook_kwargs = dict(zip(names, args, strict=False))
            hook_kwargs.update((name, kwargs[name]) for name in names if name in kwargs)
            call = HookCall(hook, hook_kwargs, method, _snapshot(hook_kwargs))
            self.calls.append(call)
            ctx = hook_kwargs.get("ctx")
            sink_installed = hook == "before_model_request" and isinstance(ctx, RequestContext)
            previous = ctx.on_event if isinstance(ctx, RequestContext) else None
            if sink_installed and isinstance(ctx, RequestContext):
                ctx.on_event = self._sink(previous)
            try:
                await original(*args, **kwargs)
            except BaseException as exc:
                call.error = exc
                raise
            finally:
                if sink_installed and isinstance(ctx, RequestContext):
                    ctx.on_event = previous

        wrapper.__doc__ = getattr(original, "__doc__", None)
        return wrapper

    def _wrap_decision(self, method: str) -> Callable[..., object]:
        original: Callable[..., object] = getattr(self.manager, method)
        names = _DECISION_METHODS[method]

        def wrapper(*args: Any, **kwargs: Any) -> object:
            hook_kwargs = dict(zip(names, args, strict=False))
            hook_kwargs.update((name, kwargs[name]) for name in names if name in kwargs)
            call = HookCall(method, hook_kwargs, method)
            self.calls.append(call)
            try:
                call.result = original(*args, **kwargs)
            except BaseException as exc:
                call.error = exc
                raise
            return call.result

        wrapper.__doc__ = getattr(original, "__doc__", None)
        return wrapper

    def _sink(
        self, previous: Callable[[RequestContext, CompactionEvent], None] | None
    ) -> Callable[[RequestContext, CompactionEvent], None]:
        def sink(ctx: RequestContext, event: CompactionEvent) -> None:
            self.calls.append(
                HookCall("on_compaction", {"ctx": ctx, "event": event}, "report", _snapshot({"ctx": ctx}))
            )
            if previous is not None:
                previous(ctx, event)

        return sink

    # -- queries -------------------------------------------------------------------------

    def hooks(self) -> list[str]:
        """The names of the recorded hooks, in call order."""
        return [call.hook for call in self.calls]

    def calls_of(self, hook: str) -> list[HookCall]:
        """The recorded calls of ``hook``, in order."""
        return [call for call in self.calls if call.hook == hook]

    def events(self) -> list[CompactionEvent]:
        """Every ``CompactionEvent`` passed to ``on_compaction``, in order."""
        found: list[CompactionEvent] = []
        for call in self.calls_of("on_compaction"):
            event = call.kwargs.get("event")
            if isinstance(event, CompactionEvent):
                found.append(event)
        return found

    def assert_called(self, hook: str, *, times: int | None = None) -> list[HookCall]:
        """Assert that ``hook`` was called (exactly ``times`` times, when given).

        Returns:
            The recorded calls of ``hook``.

        Raises:
            AssertionError: It was not called, or not ``times`` times; the message lists
                the hooks that were called.
        """
        calls = self.calls_of(hook)
        if (times is None and not calls) or (times is not None and len(calls) != times):
            expected = "at least once" if times is None else f"{times} time(s)"
            raise AssertionError(
                f"hook {hook!r} was called {len(calls)} time(s), expected {expected}; "
                f"recorded: {self.hooks()}"
            )
        return calls

    def assert_not_called(self, hook: str) -> None:
        """Assert that ``hook`` was never called.

        Raises:
            AssertionError: It was; the message says how often.
        """
        self.assert_called(hook, times=0)

    def clear(self) -> None:
        """Forget the calls recorded so far."""
        self.calls.clear()

    # -- lifetime ------------------------------------------------------------------------

    def detach(self) -> None:
        """Stop recording (idempotent). Calls recorded so far are kept."""
        if self._undo is None:
            return
        self._undo()
        self._undo = None
        for method, wrapper in self._wrappers.items():
            if self.manager.__dict__.get(method) is wrapper:
                delattr(self.manager, method)
        self._wrappers.clear()

    @property
    def attached(self) -> bool:
        """True until :meth:`detach`."""
        return self._undo is not None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.detach()


class Registrar:
    """Registers plugins and capabilities in a manager and removes them again.

    ``registrar(obj)`` registers a :class:`~harness.capabilities.base.Capability` instance with
    ``add_capabilities`` (so ordering applies) and anything else with ``register``;
    :meth:`unregister_all` (called by the ``harness_register`` fixture at teardown)
    removes everything it added that is still registered, newest first.

    Args:
        manager: The manager to register into.
    """

    def __init__(self, manager: PluginManager) -> None:
        self.manager = manager
        self._added: list[object] = []

    def __call__(self, plugin: object, *, name: str | None = None, capability: bool | None = None) -> str:
        """Register ``plugin``; return the name it was registered under.

        Args:
            plugin: A capability instance, a plugin object or a module.
            name: Registration name for a plain plugin (capabilities use their ``name``).
            capability: Force (``True``) or prevent (``False``) registration as a
                capability; default: capabilities are ``Capability`` instances.

        Raises:
            ValueError: ``name`` was given for a capability.
            harness.PluginLoadError: As :meth:`PluginManager.register`.
            harness.CapabilityOrderError: As :meth:`PluginManager.add_capabilities`.
        """
        as_capability = isinstance(plugin, Capability) if capability is None else capability
        if as_capability:
            if name is not None:
                raise ValueError(
                    f"name={name!r}: a capability is registered under its own name attribute "
                    f"({capability_name(plugin)!r})"
                )
            self.manager.add_capabilities([plugin])
            registered = capability_name(plugin)
        else:
            registered = self.manager.register(plugin, name)
        self._added.append(plugin)
        return registered

    def capabilities(self, capabilities: Sequence[object]) -> list[str]:
        """Add several capabilities at once (ordered together); return their names."""
        self.manager.add_capabilities(capabilities)
        self._added.extend(capabilities)
        return [capability_name(c) for c in capabilities]

    @property
    def added(self) -> tuple[object, ...]:
        """What this registrar registered, oldest first."""
        return tuple(self._added)

    def unregister_all(self) -> None:
        """Unregister everything this registrar added and is still registered, newest first."""
        while self._added:
            plugin = self._added.pop()
            if self.manager.pluggy_manager.is_registered(plugin):
                self.manager.unregister(plugin)

    @contextmanager
    def temporarily(self, plugin: object, *, name: str | None = None) -> Generator[str]:
        """Register ``plugin`` for the ``with`` block only."""
        registered = self(plugin, name=name)
        try:
            yield registered
        finally:
            if self.manager.pluggy_manager.is_registered(plugin):
                self.manager.unregister(plugin)
            self._added = [p for p in self._added if p is not plugin]
