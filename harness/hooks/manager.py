"""The plugin manager: the typed facade over pluggy that registers and calls plugins.

:class:`PluginManager` wraps a ``pluggy.PluginManager("harness")`` and offers one typed
method per hook (the way tox's facade does), because pluggy can neither type
``pm.hook.<name>(...)`` calls nor await ``async def`` implementations.

Two kinds of objects are registered:

* **Capabilities** (:meth:`PluginManager.add_capabilities`): configured objects the user
  lists in order, e.g. ``[ClearToolResults(...), SlidingWindow(...)]``. Their order is the
  user's list, adjusted only by their ``runs_before`` / ``runs_after`` declarations.
* **Plugins** (:meth:`PluginManager.register`, entry points): observers and helpers such as
  a logger or a tokenizer. They run after every capability, in registration order.

Registration and validation live here; the other jobs have their own modules: ordering
(:mod:`harness.hooks.ordering`), calling and awaiting implementations
(:mod:`harness.hooks.dispatch`), the invariant guard every ``before_model_request``
implementation runs under, so a history a provider would reject never reaches the model
(:mod:`harness.history.guard`), entry points (:mod:`harness.hooks.entrypoints`) and
``HARNESS_TRACE_PLUGINS`` (:mod:`harness.hooks.tracing`).
"""

from __future__ import annotations

__all__ = ["PluginManager"]

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final, Literal

import pluggy

import harness.hooks.specs as hookspecs
from harness.core.markers import PROJECT_NAME
from harness.errors import CapabilityOrderError, PluginLoadError, SessionStoreError, StoreResolutionError
from harness.hooks.dispatch import (
    Step,
    bind,
    decide,
    forced_call,
    notify,
    own_compact,
    run_steps,
    token_count_problem,
)
from harness.hooks.entrypoints import (
    PluginInfo,
    PluginSource,
    load_entry_point,
    plugin_info,
    provides,
    registration_error,
    select_entry_points,
)
from harness.hooks.middleware import Middleware
from harness.hooks.ordering import UNREGISTERED, capability_name, order_capabilities, order_hookimpls
from harness.hooks.pluggy_manager import PluggyManager
from harness.hooks.stacks import installed_capability_classes, resolve_capabilities
from harness.hooks.tracing import Trace, TraceSinks, tracing_requested
from harness.hooks.validation import plugin_problem
from harness.tokens import TokenCounter

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from harness.capabilities.context import CompactionEvent, RequestContext
    from harness.core.nodes import Node
    from harness.tools.context import RunContext
    from harness.tools.lifecycle import ToolEvent

_log = logging.getLogger("harness.hooks")

_SPEC_NAMES: Final = frozenset(
    name for name, value in vars(hookspecs).items() if hasattr(value, f"{PROJECT_NAME}_spec")
)


class PluginManager(Middleware):
    """Registers capabilities and plugins and calls their hooks, awaiting async ones.

    Example::

        pm = PluginManager()
        pm.add_capabilities([ClearToolResults(keep=3), SlidingWindow(max_messages=80)])
        pm.register(my_logger)
        await pm.run_before_model_request(ctx)

    The underlying ``pluggy.PluginManager`` is available as :attr:`pluggy_manager`.
    Register plugins and call hooks through this class, not through it: it validates and
    orders them, and calls every implementation itself, so that a failure names its
    plugin and every call is traced.
    """

    def __init__(self) -> None:
        self._pm = PluggyManager(PROJECT_NAME)
        self._pm.add_hookspecs(hookspecs)
        self._user_capabilities: list[object] = []
        self._resolved: tuple[object, ...] = ()
        self._capability_position: dict[str, int] = {}
        self._registration: dict[str, int] = {}
        self._next_registration = 0
        self._sources: dict[str, PluginSource] = {}
        self._available: dict[str, type] = {}
        self._available_sources: dict[str, PluginSource] = {}
        self._entrypoints_loaded = False
        self._counters: dict[str | None, TokenCounter] = {}
        self._impl_cache: dict[str, list[pluggy.HookImpl]] = {}
        self._tracing = TraceSinks()
        self._excluded: dict[str, str] = {}
        self._load_errors: dict[str, PluginLoadError] = {}
        if tracing_requested():
            self.enable_tracing()

    def enable_tracing(self, write: Callable[[str], None] | None = None) -> Callable[[], None]:
        """Trace every hook call this manager makes, and return the undo.

        Each line starts with ``harness-trace:`` and names the hook and the plugin: the
        context hooks, their observers, and the decision hooks with their answer; a
        ``before_model_request`` (or forced ``compact``) step also reports its duration and
        the message count before and after. ``HARNESS_TRACE_PLUGINS=1`` traces every
        manager to stderr. Each call adds a writer; adding one already tracing changes nothing.

        Args:
            write: Receives each line (newline included); default: ``sys.stderr`` at the
                time of each line.

        Returns:
            The undo: it stops this writer's tracing, for every hook, from the next hook
            call on; calling it again does nothing.
        """
        return self._tracing.add(write)

    @property
    def _trace(self) -> Trace | None:
        return self._tracing.trace

    # -- registration ------------------------------------------------------------------

    @property
    def pluggy_manager(self) -> pluggy.PluginManager:
        """The wrapped ``pluggy.PluginManager`` (project ``"harness"``)."""
        return self._pm

    @property
    def capabilities(self) -> tuple[object, ...]:
        """The registered capabilities in the order they run."""
        return self._resolved

    def register(self, plugin: object, name: str | None = None) -> str:
        """Register an observer or helper plugin (a module or an object with hookimpls).

        Plugins run after every capability, in registration order.

        Args:
            plugin: The plugin object.
            name: Registration name; defaults to :func:`capability_name` of the plugin.

        Returns:
            The name it was registered under.

        Raises:
            PluginLoadError: The name is taken, the object is already registered, or a
                hook implementation is invalid (unknown hook name, argument not in the
                specification, a wrapper on an awaited hook, ``async def`` on a hook pluggy
                calls). Its ``plugin_name`` is the name.
        """
        plugin_name = name or capability_name(plugin)
        self._register(plugin, plugin_name)
        return plugin_name

    def add_capabilities(
        self, capabilities: Sequence[object] | str, *, resolve_model: Callable[[str], object] | None = None
    ) -> None:
        """Register capabilities; they run in this order, after any added before.

        Args:
            capabilities: Configured capability objects (anything implementing a hook),
                short-form stack strings (``"sliding_window:max_messages=80"``, the
                ``--stack`` grammar of :mod:`harness.config`) and
                :class:`~harness.config.StackEntry` objects, in any mix; one string stands
                for a one-item list. Strings and entries are built from the capability
                classes this manager loaded through its entry points
                (:meth:`load_entrypoint_plugins`), else from the installed ones. Each
                capability is registered under its ``name`` attribute, or its class name.
            resolve_model: Turns a model string given to a ``Model`` parameter
                (``"summarizing:model=openai:gpt-4o"``) into the model; ``Agent`` passes
                :func:`~harness.models.resolve.resolve_model` with this manager.

        Raises:
            TypeError: An element is neither a capability, nor a string, nor an entry;
                the message names its index and type.
            StackConfigError: A string or an entry is invalid (unknown capability or
                parameter, wrong value), named ``capabilities[<index>]``.
            CapabilityError: An element is a class rather than an instance.
            CapabilityOrderError: Two capabilities (or a capability and a plugin) share a
                name, or the ``runs_before`` / ``runs_after`` declarations cannot be
                satisfied. Nothing is registered in that case.
            PluginLoadError: A hook implementation is invalid (see :meth:`register`).
        """
        new = resolve_capabilities(capabilities, self._capability_classes, resolve_model=resolve_model)
        for capability in new:
            name = capability_name(capability)
            existing = self._pm.get_plugin(name)
            if existing is not None:
                raise CapabilityOrderError(
                    f"capability {capability!r} is named {name!r}, which is already registered "
                    f"for {existing!r}; give one of them another name"
                )
        resolved = order_capabilities([*self._user_capabilities, *new])
        registered: list[object] = []
        try:
            for capability in new:
                self._register(capability, capability_name(capability))
                registered.append(capability)
        except BaseException:
            for capability in registered:
                self._unregister(capability)
            raise
        self._user_capabilities.extend(new)
        self._set_resolved(resolved)

    def unregister(self, plugin: object) -> None:
        """Remove a plugin or capability (an object, or the name it was registered under).

        Raises:
            PluginLoadError: Nothing is registered under that object or name.
        """
        target = self._pm.get_plugin(plugin) if isinstance(plugin, str) else plugin
        if target is None or not self._pm.is_registered(target):
            raise PluginLoadError(
                f"cannot unregister {plugin!r}: it is not registered",
                plugin_name=_display_name(plugin),
                reason="it is not registered",
            )
        self._unregister(target)
        if any(c is target for c in self._user_capabilities):
            self._user_capabilities = [c for c in self._user_capabilities if c is not target]
            self._set_resolved(order_capabilities(self._user_capabilities))

    def _changed(self) -> None:
        """Forget what depends on the registered plugins (token counters, ordered implementations)."""
        self._counters.clear()
        self._impl_cache.clear()

    def _name_of(self, plugin: object) -> str:
        return self._pm.get_name(plugin) or capability_name(plugin)

    def _set_resolved(self, resolved: Sequence[object]) -> None:
        self._impl_cache.clear()
        self._resolved = tuple(resolved)
        self._capability_position = {self._name_of(c): i for i, c in enumerate(self._resolved)}

    def _unregister(self, plugin: object) -> None:
        name = self._pm.get_name(plugin)
        self._pm.unregister(plugin)
        if name is not None:
            self._registration.pop(name, None)
            self._sources.pop(name, None)
        self._changed()

    def _register(self, plugin: object, name: str) -> None:
        try:
            self._pm.register(plugin, name=name)
        except pluggy.PluginValidationError as exc:
            raise PluginLoadError(
                f"plugin {name!r} is invalid: {exc}", plugin_name=name, reason=f"invalid: {exc}"
            ) from exc
        except ValueError as exc:
            reason = str(exc).split("\n", 1)[0] + " (the name or the object is already registered)"
            raise PluginLoadError(
                f"cannot register plugin {name!r}: {reason}", plugin_name=name, reason=reason
            ) from exc
        problem = self._validate(plugin)
        if problem is not None:
            self._pm.unregister(plugin)
            raise PluginLoadError(f"plugin {name!r}: {problem}", plugin_name=name, reason=problem)
        self._registration[name] = self._next_registration
        self._next_registration += 1
        self._changed()

    def _validate(self, plugin: object) -> str | None:
        return plugin_problem(self._pm, plugin, _SPEC_NAMES)

    def _ordered_impls(self, hook_name: str) -> list[pluggy.HookImpl]:
        cached = self._impl_cache.get(hook_name)
        if cached is not None:
            return cached
        caller: pluggy.HookCaller | None = getattr(self._pm.hook, hook_name, None)
        impls = (
            []
            if caller is None
            else order_hookimpls(caller.get_hookimpls(), self._capability_position, self._registration)
        )
        self._impl_cache[hook_name] = impls
        return impls

    def _decide(self, hook: str, check: Callable[[object], str | None] | None, **kwargs: object) -> object:
        impls = getattr(self._pm.hook, hook).get_hookimpls()[::-1]  # pluggy's order: last registered first
        return decide(impls, kwargs, hook, check=check, trace=self._trace)

    # -- before_model_request ----------------------------------------------------------

    async def run_before_model_request(self, ctx: RequestContext) -> None:
        """Run every ``before_model_request`` implementation on ``ctx``, in order.

        Capabilities run first in :attr:`capabilities` order, then other plugins in
        registration order; ``async def`` implementations are awaited one at a time,
        so each sees its predecessor's output. ``ctx.report(event)`` calls the
        ``on_compaction`` hook while this runs (see :meth:`notify_compaction`).

        Each implementation runs under the invariant guard
        (:func:`harness.history.guard.guard_edit`): the history is re-checked only when
        the implementation changed it, and a violation that was not there before rolls
        the history (and the events and request-scoped parts it added) back to what it
        was before that implementation ran.

        Raises:
            CapabilityError: An implementation raised (chained, history restored), left
                a new invariant violation (history restored), or returned a value. Its
                ``capability`` names the implementation's plugin.
            asyncio.CancelledError: Propagated unchanged, after restoring the history.
        """
        steps = [
            (impl.plugin_name, bind(impl, {"ctx": ctx}), "before_model_request")
            for impl in self._ordered_impls("before_model_request")
        ]
        await self._run_steps(ctx, steps)

    async def run_compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
        """Run the stack unconditionally, as a ``/compact`` command does.

        A capability with its own ``compact`` method (one that overrides
        :meth:`harness.capabilities.base.Capability.compact`) has ``compact(ctx, reason=reason)``
        called directly, bypassing its trigger; every other implementation of
        ``before_model_request`` (capabilities without ``compact``, such as a limit
        warner, and plain plugins) runs as usual. Ordering, the invariant guard and
        ``on_compaction`` events work as in :meth:`run_before_model_request`.

        Raises:
            CapabilityError: As :meth:`run_before_model_request`.
        """
        steps: list[Step] = []
        forced: set[str] = set()
        for capability in self._resolved:
            method = own_compact(capability)
            if method is not None:
                name = self._name_of(capability)
                steps.append((name, forced_call(method, ctx, reason), "compact"))
                forced.add(name)
        for impl in self._ordered_impls("before_model_request"):
            if impl.plugin_name not in forced:
                steps.append((impl.plugin_name, bind(impl, {"ctx": ctx}), "before_model_request"))
        steps.sort(key=lambda step: self._step_key(step[0]))
        await self._run_steps(ctx, steps)

    def _step_key(self, name: str) -> tuple[int, int]:
        position = self._capability_position.get(name)
        if position is not None:
            return (0, position)
        return (1, 0)

    async def _run_steps(self, ctx: RequestContext, steps: Sequence[Step]) -> None:
        await run_steps(ctx, steps, observers=self._ordered_impls("on_compaction"), trace=self._trace)

    # -- observers ---------------------------------------------------------------------

    async def _notify(self, hook_name: str, kwargs: Mapping[str, object]) -> None:
        await notify(self._ordered_impls(hook_name), kwargs, hook_name, self._trace)

    async def notify_after_node(self, ctx: RunContext, node: Node) -> None:
        """Call every ``after_node`` implementation, in order, awaiting async ones.

        Raises:
            CapabilityError: An implementation raised; it names the plugin and is chained
                to the original exception. Observers cannot edit the run, so the run's
                history is intact; the caller decides whether to stop.
        """
        await self._notify("after_node", {"ctx": ctx, "node": node})

    async def notify_tool(self, ctx: RunContext, event: ToolEvent) -> None:
        """Call every ``on_tool`` implementation, in order, awaiting async ones.

        Raises:
            CapabilityError: An implementation raised (see :meth:`notify_after_node`).
        """
        await self._notify("on_tool", {"ctx": ctx, "event": event})

    async def notify_compaction(self, ctx: RequestContext, event: CompactionEvent) -> None:
        """Call every ``on_compaction`` implementation, in order, awaiting async ones.

        :meth:`run_before_model_request` already routes ``ctx.report(event)`` here; call
        this for events reported outside of it.

        Raises:
            CapabilityError: An implementation raised (see :meth:`notify_after_node`).
        """
        await self._notify("on_compaction", {"ctx": ctx, "event": event})

    # -- tokens ------------------------------------------------------------------------

    def count_tokens(self, text: str, model_name: str | None) -> int | None:
        """Ask the ``count_tokens`` hook, in pluggy's order; ``None`` when no plugin answers.

        Raises:
            CapabilityError: An implementation raised (chained) or answered something other
                than ``None`` or a non-negative ``int``; ``capability`` names its plugin.
        """
        answer = self._decide("count_tokens", token_count_problem, text=text, model_name=model_name)
        return answer if isinstance(answer, int) else None

    def resolve_model(self, model_string: str) -> object | None:
        """Ask the ``resolve_model`` hook, in pluggy's order; ``None`` when no plugin answers.

        The answer is returned as is: :func:`harness.models.resolve.resolve_model` checks that it is
        a model and falls back to the built-in providers.

        Raises:
            CapabilityError: An implementation raised; it names the plugin and is chained.
        """
        return self._decide("resolve_model", None, model_string=model_string)

    def resolve_store(self, url: str, *, read_only: bool = False) -> object | None:
        """Ask the ``resolve_store`` hook, in pluggy's order; ``None`` when no plugin answers.

        The answer is returned as is (:func:`harness.stores.open_store` checks it). Only
        registered plugins answer: call :meth:`load_entrypoint_plugins` first. ``read_only``
        is passed to the implementations that name it.

        Raises:
            SessionStoreError: A plugin's store cannot be used (passed through unchanged).
            StoreResolutionError: A plugin refused the URL itself (passed through).
            CapabilityError: An implementation raised anything else; it names the plugin.
        """
        impls = self._pm.hook.resolve_store.get_hookimpls()[::-1]  # pluggy's order
        passthrough = (SessionStoreError, StoreResolutionError)
        kwargs = {"url": url, "read_only": read_only}
        return decide(impls, kwargs, "resolve_store", trace=self._trace, passthrough=passthrough)

    def resolve_engine(self, name: str) -> object | None:
        """The ``resolve_engine`` hook's worker command for engine ``name`` (``None``: no plugin knows it).

        Only registered plugins answer (call :meth:`load_entrypoint_plugins` first); one that
        raises becomes a ``CapabilityError`` naming it.
        """
        return self._decide("resolve_engine", None, name=name.strip().lower())

    def token_counter(self, model_name: str | None = None) -> TokenCounter:
        """The token counter this manager owns for ``model_name``, honouring the ``count_tokens`` hook.

        One counter per model name (at most 16, the oldest dropped first), kept while the
        registered plugins stay the same, so its caches survive between requests and go
        with the manager. Without any ``count_tokens`` implementation it is a plain
        ``TokenCounter(model_name)``; otherwise it asks the hook first and falls back to
        tiktoken for texts no plugin answers.
        """
        counter = self._counters.get(model_name)
        if counter is not None:
            return counter
        caller: pluggy.HookCaller = self._pm.hook.count_tokens
        if not caller.get_hookimpls():
            counter = TokenCounter(model_name)
        else:
            fallback = TokenCounter(model_name)

            def count_text(text: str) -> int:
                answer = self.count_tokens(text, model_name)
                return fallback.count_text(text) if answer is None else answer

            counter = TokenCounter(model_name, text_counter=count_text)
        while len(self._counters) >= 16:
            del self._counters[next(iter(self._counters))]
        self._counters[model_name] = counter
        return counter

    # -- entry points ------------------------------------------------------------------

    def load_entrypoint_plugins(
        self,
        *,
        allow: Iterable[str] | None = None,
        block: Iterable[str] | None = None,
        errors: Literal["raise", "collect"] = "raise",
    ) -> list[str]:
        """Load the plugins published under the ``harness`` entry-point group.

        ``HARNESS_LOAD_PLUGINS`` (comma list of entry-point or distribution names) is an
        allow-list: unset loads everything, set but empty loads nothing.
        ``HARNESS_DISABLE_PLUGINS`` is a block-list and wins over the allow-list. Names
        compare case-insensitively, with ``-``, ``_`` and ``.`` equivalent; why each entry
        point left out was is kept for :meth:`excluded_plugins`, and an entry matching no
        installed plugin emits :class:`~harness.errors.UnknownPluginNameWarning` (once).

        An entry point that resolves to a module or an instance is registered as a
        plugin. One that resolves to a *class* (a :class:`~harness.capabilities.base.Capability`
        subclass or any class with hook implementations) is not registered, because it
        needs configuration; it is listed by :meth:`available_capabilities` so a CLI or a
        configuration file can instantiate it by name. Entry points whose name is
        already registered or listed are skipped.

        Args:
            allow: Overrides ``HARNESS_LOAD_PLUGINS`` (``None``: read the variable).
            block: Overrides ``HARNESS_DISABLE_PLUGINS`` (``None``: read the variable).
            errors: ``"raise"``: the first entry point that fails stops loading.
                ``"collect"``: it is skipped and kept for :meth:`load_errors`, and the
                others still load (what ``harness plugins`` does).

        Returns:
            The names the entry points loaded by this call are registered or listed under.

        Raises:
            PluginLoadError: An entry point failed to import or to register (with
                ``errors="raise"``). The message names the distribution, the entry point
                (``name = value``), the cause (also chained) and how to disable it; the
                attributes ``plugin_name`` (the entry-point name), ``entry_point`` (its
                value), ``distribution``, ``version`` and ``reason`` hold the same facts.
        """
        loaded: list[str] = []
        self._entrypoints_loaded = True
        selection = select_entry_points(allow=allow, block=block)
        self._excluded.update(
            (name, why)
            for name, why in selection.excluded.items()
            if not (self._pm.has_plugin(name) or name in self._available)  # loaded by an earlier call
        )
        for ep, source in selection.selected:
            self._excluded.pop(ep.name, None)
            name = provides(ep.name)[1]  # store.postgres registers as "postgres"
            if self._pm.has_plugin(name) or name in self._available:
                continue
            try:
                obj = load_entry_point(ep, source)
                if isinstance(obj, type):
                    self._available[name] = obj
                    self._available_sources[name] = source
                elif not self._pm.is_registered(obj):  # else one object under two names (schemes)
                    try:
                        self._register(obj, name)
                    except PluginLoadError as exc:
                        raise registration_error(ep, source, exc) from exc
                    self._sources[name] = source
                else:
                    continue
            except PluginLoadError as exc:
                if errors == "raise":
                    raise
                _log.warning("plugin %s was not loaded: %s", ep.name, exc)
                self._load_errors[ep.name] = exc
                continue
            self._load_errors.pop(ep.name, None)
            loaded.append(name)
        return loaded

    def load_errors(self) -> list[PluginLoadError]:
        """The entry points that failed to load with ``errors="collect"`` (not loaded since)."""
        return list(self._load_errors.values())

    def excluded_plugins(self) -> dict[str, str]:
        """Entry points the allow and block lists left out, by name, with why.

        The reason reads after "is", e.g. ``"disabled by HARNESS_DISABLE_PLUGINS (entry
        'summarizing')"`` or ``"not listed in HARNESS_LOAD_PLUGINS (tiered)"``.
        """
        return dict(self._excluded)

    def _capability_classes(self) -> Mapping[str, type]:
        """The classes stack strings name: this manager's entry points once loaded, else the installed."""
        return self._available if self._entrypoints_loaded else installed_capability_classes()

    def available_capabilities(self) -> dict[str, type]:
        """Capability classes found through entry points, by name (unregistered: configure, then add)."""
        return dict(self._available)

    def list_plugins(self) -> list[PluginInfo]:
        """Registered capabilities (in run order), plugins (registration order), then available classes."""
        infos: list[PluginInfo] = []
        for capability in self._resolved:
            name = self._name_of(capability)
            infos.append(plugin_info(name, capability, "capability", self._sources.get(name)))
        plugins = [
            (name, plugin)
            for name, plugin in self._pm.list_name_plugin()
            if plugin is not None and name not in self._capability_position
        ]
        plugins.sort(key=lambda item: self._registration.get(item[0], UNREGISTERED))
        for name, plugin in plugins:
            infos.append(plugin_info(name, plugin, "plugin", self._sources.get(name)))
        for name, cls in self._available.items():
            infos.append(plugin_info(name, cls, "available", self._available_sources.get(name)))
        return infos


def _display_name(plugin: object) -> str:
    """``plugin`` itself when it is a name, else the name it would register under."""
    if isinstance(plugin, str):
        return plugin
    if isinstance(plugin, type):
        return plugin.__name__
    return capability_name(plugin)
