"""The plugin manager: ordered capabilities, async-aware hook calls, entry-point discovery.

:class:`PluginManager` wraps a ``pluggy.PluginManager("harness")`` and offers one typed
method per hook (the way tox's facade does), because pluggy can neither type
``pm.hook.<name>(...)`` calls nor await ``async def`` implementations.

Two kinds of objects are registered:

* **Capabilities** (:meth:`PluginManager.add_capabilities`): configured objects the user
  lists in order, e.g. ``[ClearToolResults(...), SlidingWindow(...)]``. Their order is the
  user's list, adjusted only by their ``runs_before`` / ``runs_after`` declarations.
* **Plugins** (:meth:`PluginManager.register`, entry points): observers and helpers such as
  a logger or a tokenizer. They run after every capability, in registration order.

Every ``before_model_request`` implementation runs under the *invariant guard*: the
history is checked with :func:`harness.history.check_invariants` after each
implementation that changed it, and an implementation that introduced a violation is
rolled back and named in a :class:`~harness.errors.CapabilityError`, so a history a
provider would reject with HTTP 400 never reaches the model.
"""

from __future__ import annotations

__all__ = [
    "ASYNC_HOOKS",
    "DISABLE_ENV",
    "ENTRY_POINT_GROUP",
    "LOAD_ENV",
    "PluginInfo",
    "PluginManager",
    "TRACE_ENV",
    "capability_name",
    "order_capabilities",
]

import asyncio
import difflib
import heapq
import importlib.metadata
import inspect
import os
import re
import sys
import time
import types
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Final, Literal, cast

import attrs
import pluggy

from harness import hookspecs
from harness.capability import Capability
from harness.errors import CapabilityError, CapabilityOrderError, PluginLoadError
from harness.history import Violation, changed_span, check_invariants, is_empty_response
from harness.markers import PROJECT_NAME
from harness.messages import CanonicalMessage, Part, RetryPromptPart
from harness.tokens import TokenCounter, get_token_counter

if TYPE_CHECKING:
    from harness.context import CompactionEvent, RequestContext
    from harness.nodes import Node
    from harness.registry import ToolEvent
    from harness.run_context import RunContext

ENTRY_POINT_GROUP: Final = PROJECT_NAME
"""The entry-point group plugins are published under: ``[project.entry-points.harness]``."""

LOAD_ENV: Final = "HARNESS_LOAD_PLUGINS"
"""Allow-list of entry points to load (names or distribution names, comma separated).

Unset loads every entry point; set but empty loads none.
"""

DISABLE_ENV: Final = "HARNESS_DISABLE_PLUGINS"
"""Block-list of entry points not to load (names or distribution names, comma separated)."""

TRACE_ENV: Final = "HARNESS_TRACE_PLUGINS"
"""Set to ``1`` (any value but empty, ``0``, ``false``, ``no``) to trace every hook call to stderr."""

ASYNC_HOOKS: Final = frozenset({"before_model_request", "after_node", "on_tool", "on_compaction"})
"""Hooks the manager calls itself, awaiting ``async def`` implementations (no wrappers)."""

_IMPL_ATTR: Final = f"{PROJECT_NAME}_impl"
_SPEC_NAMES: Final = frozenset(
    name for name, value in vars(hookspecs).items() if hasattr(value, f"{PROJECT_NAME}_spec")
)
_Step = tuple[str, Callable[[], object], str]
"""(plugin name, bound call, hook or method name) of one guarded step."""
_INTERRUPTS: Final = (asyncio.CancelledError, KeyboardInterrupt, SystemExit, GeneratorExit)


# --------------------------------------------------------------------------------------
# Capability names and ordering
# --------------------------------------------------------------------------------------


def capability_name(capability: object) -> str:
    """The name a capability or plugin object is registered under.

    Its ``name`` attribute when that is a non-empty string, a module's ``__name__``, or
    else its class name.

    Raises:
        CapabilityError: ``capability`` is a class (capabilities are configured
            instances; instantiate it first).
    """
    if isinstance(capability, type):
        raise CapabilityError(
            capability.__name__,
            f"got the class {capability.__qualname__} itself; capabilities are configured "
            f"instances, pass {capability.__name__}(...)",
        )
    if isinstance(capability, types.ModuleType):
        return capability.__name__
    name = getattr(capability, "name", None)
    if isinstance(name, str) and name:
        return name
    return type(capability).__name__


def _declared(capability: object, name: str, attribute: str) -> tuple[str, ...]:
    value: object = getattr(capability, attribute, ())
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Iterable):
        items = list(cast("Iterable[object]", value))
        names = tuple(item for item in items if isinstance(item, str))
        if len(names) == len(items):
            return names
    raise CapabilityOrderError(
        f"capability {name!r}: {attribute} must be a sequence of capability names, got {value!r}"
    )


def order_capabilities(capabilities: Sequence[object]) -> list[object]:
    """Return ``capabilities`` in the order they run.

    The user's order is kept except where a capability's ``runs_before`` /
    ``runs_after`` (names of other capabilities) require otherwise; among capabilities
    free to go first, the one listed first goes first (a stable topological sort).
    Names in ``runs_before`` / ``runs_after`` that match no capability in the list are
    ignored: the other capability may simply not be installed.

    Raises:
        CapabilityError: An element is a class rather than an instance.
        CapabilityOrderError: Two capabilities share a name, a capability orders itself
            relative to itself, or the declarations form a cycle (two capabilities
            contradicting each other, or a longer loop). The message names every
            capability involved and the declaration at fault.
    """
    names = [capability_name(c) for c in capabilities]
    index: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in index:
            first = capabilities[index[name]]
            raise CapabilityOrderError(
                f"two capabilities are named {name!r}: {first!r} (position {index[name]}) and "
                f"{capabilities[i]!r} (position {i}); give one of them another name"
            )
        index[name] = i
    successors: list[dict[int, str]] = [{} for _ in names]
    predecessors: list[set[int]] = [set() for _ in names]

    def add_edge(before: int, after: int, why: str) -> None:
        if before == after:
            raise CapabilityOrderError(f"capability {names[before]!r}: {why} names itself")
        successors[before].setdefault(after, why)
        predecessors[after].add(before)

    for i, capability in enumerate(capabilities):
        for other in _declared(capability, names[i], "runs_before"):
            j = index.get(other)
            if j is not None:
                add_edge(i, j, f"{names[i]!r}.runs_before")
        for other in _declared(capability, names[i], "runs_after"):
            j = index.get(other)
            if j is not None:
                add_edge(j, i, f"{names[i]!r}.runs_after")

    remaining = [len(p) for p in predecessors]
    ready = [i for i, count in enumerate(remaining) if count == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for j in successors[i]:
            remaining[j] -= 1
            if remaining[j] == 0:
                heapq.heappush(ready, j)
    if len(order) < len(names):
        raise CapabilityOrderError(_describe_cycle(names, successors, predecessors, set(order)))
    return [capabilities[i] for i in order]


def _describe_cycle(
    names: Sequence[str],
    successors: Sequence[Mapping[int, str]],
    predecessors: Sequence[set[int]],
    done: set[int],
) -> str:
    # Every node left over has a left-over predecessor; walking predecessors must loop.
    node = min(i for i in range(len(names)) if i not in done)
    seen: dict[int, int] = {}
    path: list[int] = []
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        node = min(p for p in predecessors[node] if p not in done)
    cycle = list(reversed(path[seen[node] :]))  # forward order: each runs before the next
    steps = [
        f"{names[a]!r} before {names[b]!r} ({successors[a][b]})"
        for a, b in zip(cycle, cycle[1:] + cycle[:1], strict=True)
    ]
    involved = " and ".join(repr(names[i]) for i in cycle)
    kind = "contradict each other" if len(cycle) == 2 else "form an ordering cycle"
    return f"capabilities {involved} {kind}: " + "; ".join(steps)


# --------------------------------------------------------------------------------------
# Plugin listing
# --------------------------------------------------------------------------------------


@attrs.frozen
class PluginInfo:
    """One plugin as :meth:`PluginManager.list_plugins` reports it (like ``llm plugins``).

    Attributes:
        name: Registration name (the entry-point name for entry-point plugins).
        kind: ``"capability"`` (registered capability), ``"plugin"`` (registered
            plugin) or ``"available"`` (a capability class found through an entry point,
            not registered until configured).
        hooks: Names of the hooks it implements, sorted.
        distribution: Name of the distribution it came from, for entry-point plugins.
        version: Version of that distribution.
        entry_point: The entry point's value, e.g. ``"harness_window:SlidingWindow"``.
    """

    name: str
    kind: Literal["capability", "plugin", "available"]
    hooks: tuple[str, ...]
    distribution: str | None = None
    version: str | None = None
    entry_point: str | None = None


@attrs.frozen
class _Source:
    distribution: str | None
    version: str | None
    entry_point: str


def _hook_names(obj: object) -> tuple[str, ...]:
    found: set[str] = set()
    for attribute in dir(obj):
        try:
            value: object = inspect.getattr_static(obj, attribute)
        except AttributeError:
            continue
        value = getattr(value, "__func__", value)  # staticmethod / classmethod
        opts: object = getattr(value, _IMPL_ATTR, None)
        if isinstance(opts, Mapping):
            specname: object = opts.get("specname")  # pyright: ignore[reportUnknownMemberType,reportUnknownVariableType]
            found.add(specname if isinstance(specname, str) else attribute)
    return tuple(sorted(found))


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _env_names(variable: str) -> frozenset[str] | None:
    value = os.environ.get(variable)
    if value is None:
        return None
    return frozenset(_normalize(item.strip()) for item in value.split(",") if item.strip())


# --------------------------------------------------------------------------------------
# The manager
# --------------------------------------------------------------------------------------


class PluginManager:
    """Registers capabilities and plugins and calls their hooks, awaiting async ones.

    Example::

        pm = PluginManager()
        pm.add_capabilities([ClearToolResults(keep=3), SlidingWindow(max_messages=80)])
        pm.register(my_logger)
        await pm.run_before_model_request(ctx)

    The underlying ``pluggy.PluginManager`` is available as :attr:`pluggy_manager` for
    tracing (``pm.pluggy_manager.add_hookcall_monitoring``). Register plugins through
    this class, not through it, so that ordering and validation apply.
    """

    def __init__(self) -> None:
        self._pm = pluggy.PluginManager(PROJECT_NAME)
        self._pm.add_hookspecs(hookspecs)
        self._user_capabilities: list[object] = []
        self._resolved: tuple[object, ...] = ()
        self._capability_position: dict[str, int] = {}
        self._registration: dict[str, int] = {}
        self._next_registration = 0
        self._sources: dict[str, _Source] = {}
        self._available: dict[str, type] = {}
        self._available_sources: dict[str, _Source] = {}
        self._counters: dict[str | None, TokenCounter] = {}
        self._trace: Callable[[str], None] | None = None
        if os.environ.get(TRACE_ENV, "").strip().lower() not in ("", "0", "false", "no"):
            self.enable_tracing()

    def enable_tracing(self, write: Callable[[str], None] | None = None) -> None:
        """Trace every hook call: the context hooks this manager calls and pluggy's own.

        Each line starts with ``harness-trace:`` and names the hook and the plugin; a
        ``before_model_request`` (or forced ``compact``) step also reports its duration and
        the message count before and after. Set ``HARNESS_TRACE_PLUGINS=1`` to enable it
        for every manager.

        Args:
            write: Receives each line (newline included); default: ``sys.stderr`` at the
                time of the call.
        """
        if self._trace is not None:
            return

        def default_write(line: str) -> None:
            sys.stderr.write(line)

        sink = write or default_write

        def trace(text: str) -> None:
            sink(f"harness-trace: {text}\n")

        def before(hook_name: str, impls: Sequence[pluggy.HookImpl], kwargs: Mapping[str, object]) -> None:
            del kwargs
            trace(f"{hook_name} -> {', '.join(impl.plugin_name for impl in impls) or '(no implementation)'}")

        def after(
            outcome: pluggy.Result[object],
            hook_name: str,
            impls: Sequence[pluggy.HookImpl],
            kwargs: Mapping[str, object],
        ) -> None:
            del impls, kwargs
            error = outcome.exception
            trace(f"{hook_name} <- {type(error).__name__ if error else repr(outcome.get_result())}")

        self._trace = trace
        self._pm.add_hookcall_monitoring(before, after)

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
                specification, a wrapper on an awaited hook, ``async def`` on a hook pluggy calls).
        """
        plugin_name = name or capability_name(plugin)
        self._register(plugin, plugin_name)
        return plugin_name

    def add_capabilities(self, capabilities: Sequence[object]) -> None:
        """Register capability objects; they run in this order, after any added before.

        Args:
            capabilities: Configured capability objects (anything with hookimpls). Each is
                registered under its ``name`` attribute, or its class name.

        Raises:
            CapabilityError: An element is a class rather than an instance.
            CapabilityOrderError: Two capabilities (or a capability and a plugin) share a
                name, or the ``runs_before`` / ``runs_after`` declarations cannot be
                satisfied. Nothing is registered in that case.
            PluginLoadError: A hook implementation is invalid (see :meth:`register`).
        """
        new = list(capabilities)
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
            raise PluginLoadError(f"cannot unregister {plugin!r}: it is not registered")
        self._unregister(target)
        if any(c is target for c in self._user_capabilities):
            self._user_capabilities = [c for c in self._user_capabilities if c is not target]
            self._set_resolved(order_capabilities(self._user_capabilities))

    def _name_of(self, plugin: object) -> str:
        return self._pm.get_name(plugin) or capability_name(plugin)

    def _set_resolved(self, resolved: Sequence[object]) -> None:
        self._resolved = tuple(resolved)
        self._capability_position = {self._name_of(c): i for i, c in enumerate(self._resolved)}

    def _unregister(self, plugin: object) -> None:
        name = self._pm.get_name(plugin)
        self._pm.unregister(plugin)
        if name is not None:
            self._registration.pop(name, None)
            self._sources.pop(name, None)
        self._counters.clear()

    def _register(self, plugin: object, name: str) -> None:
        try:
            self._pm.register(plugin, name=name)
        except pluggy.PluginValidationError as exc:
            raise PluginLoadError(f"plugin {name!r} is invalid: {exc}") from exc
        except ValueError as exc:
            raise PluginLoadError(
                f"cannot register plugin {name!r}: {exc}".split("\n", 1)[0]
                + " (the name or the object is already registered)"
            ) from exc
        problem = self._validate(plugin)
        if problem is not None:
            self._pm.unregister(plugin)
            raise PluginLoadError(f"plugin {name!r}: {problem}")
        self._registration[name] = self._next_registration
        self._next_registration += 1
        self._counters.clear()

    def _validate(self, plugin: object) -> str | None:
        for caller in self._pm.get_hookcallers(plugin) or []:
            for impl in caller.get_hookimpls():
                if impl.plugin is not plugin:
                    continue
                if not caller.has_spec():
                    if impl.optionalhook:
                        continue
                    close = difflib.get_close_matches(caller.name, sorted(_SPEC_NAMES), n=1)
                    hint = f"; did you mean {close[0]!r}?" if close else ""
                    return f"implements unknown hook {caller.name!r}{hint}"
                if caller.name in ASYNC_HOOKS and (impl.wrapper or impl.hookwrapper):
                    return (
                        f"{caller.name} cannot be a wrapper implementation: harness awaits "
                        "this hook itself, and a wrapper cannot await across its yield"
                    )
                if caller.name not in ASYNC_HOOKS and inspect.iscoroutinefunction(impl.function):
                    return f"{caller.name} must be synchronous (pluggy calls it and cannot await it)"
        return None

    # -- ordering ----------------------------------------------------------------------

    def _ordered_impls(self, hook_name: str) -> list[pluggy.HookImpl]:
        caller: pluggy.HookCaller | None = getattr(self._pm.hook, hook_name, None)
        if caller is None:
            return []
        impls = caller.get_hookimpls()
        positions = self._capability_position
        registration = self._registration

        def key(item: tuple[int, pluggy.HookImpl]) -> tuple[int, int, int, int]:
            offset, impl = item
            position = positions.get(impl.plugin_name)
            if position is not None:
                return (0, position, 0, offset)
            tier = 0 if impl.tryfirst else 2 if impl.trylast else 1
            return (1, tier, registration.get(impl.plugin_name, 1 << 30), offset)

        return [impl for _, impl in sorted(enumerate(impls), key=key)]

    # -- before_model_request ----------------------------------------------------------

    async def run_before_model_request(self, ctx: RequestContext) -> None:
        """Run every ``before_model_request`` implementation on ``ctx``, in order.

        Capabilities run first in :attr:`capabilities` order, then other plugins in
        registration order; ``async def`` implementations are awaited one at a time,
        so each sees its predecessor's output. ``ctx.report(event)`` calls the
        ``on_compaction`` hook while this runs (see :meth:`notify_compaction`).

        Each implementation runs under the invariant guard: the history is re-checked
        only when the implementation changed it, and a violation that was not there
        before rolls the history (and the events and request-scoped parts it added)
        back to what it was before that implementation ran.

        Raises:
            CapabilityError: An implementation raised (chained, history restored), left
                a new invariant violation (history restored), or returned a value.
            asyncio.CancelledError: Propagated unchanged, after restoring the history.
        """
        steps = [
            (impl.plugin_name, _bind(impl, {"ctx": ctx}), "before_model_request")
            for impl in self._ordered_impls("before_model_request")
        ]
        await self._run_steps(ctx, steps)

    async def run_compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
        """Run the stack unconditionally, as a ``/compact`` command does.

        A capability with its own ``compact`` method (one that overrides
        :meth:`harness.capability.Capability.compact`) has ``compact(ctx, reason=reason)``
        called directly, bypassing its trigger; every other implementation of
        ``before_model_request`` (capabilities without ``compact``, such as a limit
        warner, and plain plugins) runs as usual. Ordering, the invariant guard and
        ``on_compaction`` events work as in :meth:`run_before_model_request`.

        Raises:
            CapabilityError: As :meth:`run_before_model_request`.
        """
        steps: list[_Step] = []
        forced: set[str] = set()
        for capability in self._resolved:
            method = _own_compact(capability)
            if method is not None:
                name = self._name_of(capability)
                steps.append((name, _forced_call(method, ctx, reason), "compact"))
                forced.add(name)
        for impl in self._ordered_impls("before_model_request"):
            if impl.plugin_name not in forced:
                steps.append((impl.plugin_name, _bind(impl, {"ctx": ctx}), "before_model_request"))
        steps.sort(key=lambda step: self._step_key(step[0]))
        await self._run_steps(ctx, steps)

    def _step_key(self, name: str) -> tuple[int, int]:
        position = self._capability_position.get(name)
        if position is not None:
            return (0, position)
        return (1, 0)

    async def _run_steps(self, ctx: RequestContext, steps: Sequence[_Step]) -> None:
        previous_sink = ctx.on_event
        pending: list[tuple[str, Awaitable[object]]] = []
        ctx.on_event = self._event_sink(pending, previous_sink)
        baseline: list[Violation] | None = None
        try:
            for name, call, hook_name in steps:
                baseline = await self._guarded_step(ctx, name, call, hook_name, pending, baseline)
        finally:
            ctx.on_event = previous_sink

    async def _guarded_step(
        self,
        ctx: RequestContext,
        name: str,
        call: Callable[[], object],
        hook_name: str,
        pending: list[tuple[str, Awaitable[object]]],
        baseline: list[Violation] | None,
    ) -> list[Violation] | None:
        history = ctx.messages
        snapshot = list(history)
        if self._trace is not None:
            call = _traced_step(self._trace, call, name, hook_name, ctx)
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
        except _INTERRUPTS:
            restore()
            raise
        except Exception as exc:
            restore()
            raise CapabilityError(
                name, f"{hook_name} raised {type(exc).__name__}: {exc} (the history was restored)"
            ) from exc

        if ctx.messages is not history:  # the implementation rebound the list
            history[:] = ctx.messages
            ctx.messages = history
        if history != snapshot and not _same_shape(snapshot, history):
            before = baseline if baseline is not None else check_invariants(snapshot)
            after = check_invariants(history)
            problems = [_describe_violation(v) for v in _new_violations(before, after)]
            if _dropped_request(snapshot, history):
                problems.insert(0, "the request being sent was dropped (the history must end with it)")
            if problems:
                restore()
                details = "; ".join(problems[:3])
                more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
                raise CapabilityError(
                    name,
                    f"{hook_name} left a history the provider would reject: {details}{more}; "
                    "the history was restored to what it was before this capability ran",
                )
            baseline = after
        await self._drain(pending)
        return baseline

    # -- observers ---------------------------------------------------------------------

    def _event_sink(
        self,
        pending: list[tuple[str, Awaitable[object]]],
        previous: Callable[[RequestContext, CompactionEvent], None] | None,
    ) -> Callable[[RequestContext, CompactionEvent], None]:
        impls = self._ordered_impls("on_compaction")

        def sink(ctx: RequestContext, event: CompactionEvent) -> None:
            if previous is not None:
                previous(ctx, event)
            for impl in impls:
                result = _call_observer(impl, {"ctx": ctx, "event": event}, "on_compaction", self._trace)
                if inspect.isawaitable(result):
                    pending.append((impl.plugin_name, result))

        return sink

    async def _drain(self, pending: list[tuple[str, Awaitable[object]]]) -> None:
        while pending:
            name, awaitable = pending.pop(0)
            try:
                await awaitable
            except _INTERRUPTS:
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
                raise CapabilityError(
                    name, f"on_compaction observer raised {type(exc).__name__}: {exc}"
                ) from exc

    async def _notify(self, hook_name: str, kwargs: Mapping[str, object]) -> None:
        for impl in self._ordered_impls(hook_name):
            result = _call_observer(impl, kwargs, hook_name, self._trace)
            if inspect.isawaitable(result):
                await self._drain([(impl.plugin_name, result)])

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
        """Ask the ``count_tokens`` hook; ``None`` when no plugin answers.

        Raises:
            CapabilityError: An implementation answered something other than a
                non-negative ``int``.
        """
        result: object = self._pm.hook.count_tokens(text=text, model_name=model_name)
        if result is None:
            return None
        if isinstance(result, bool) or not isinstance(result, int) or result < 0:
            raise CapabilityError(
                "count_tokens", f"an implementation returned {result!r}; expected a non-negative int"
            )
        return result

    def resolve_model(self, model_string: str) -> object | None:
        """Ask the ``resolve_model`` hook; ``None`` when no plugin answers.

        The answer is returned as is: :func:`harness.models.resolve_model` checks that it is
        a model and falls back to the built-in providers.
        """
        answer: object = self._pm.hook.resolve_model(model_string=model_string)
        return answer

    def token_counter(self, model_name: str | None = None) -> TokenCounter:
        """The token counter for ``model_name``, honouring the ``count_tokens`` hook.

        Without any ``count_tokens`` implementation this is the shared
        :func:`harness.tokens.get_token_counter` instance. Otherwise it is a counter
        (one per model name, kept while the registered plugins stay the same, so its
        caches survive between requests) that asks the hook first and falls back to
        tiktoken for texts no plugin answers.
        """
        caller: pluggy.HookCaller = self._pm.hook.count_tokens
        if not caller.get_hookimpls():
            return get_token_counter(model_name)
        counter = self._counters.get(model_name)
        if counter is None:
            fallback = get_token_counter(model_name)

            def count_text(text: str) -> int:
                answer = self.count_tokens(text, model_name)
                return fallback.count_text(text) if answer is None else answer

            counter = TokenCounter(model_name, text_counter=count_text)
            self._counters[model_name] = counter
        return counter

    # -- entry points ------------------------------------------------------------------

    def load_entrypoint_plugins(
        self, *, allow: Iterable[str] | None = None, block: Iterable[str] | None = None
    ) -> list[str]:
        """Load the plugins published under the ``harness`` entry-point group.

        ``HARNESS_LOAD_PLUGINS`` (comma list of entry-point or distribution names) is an
        allow-list: unset loads everything, set but empty loads nothing.
        ``HARNESS_DISABLE_PLUGINS`` is a block-list and wins over the allow-list. Names
        compare case-insensitively, with ``-``, ``_`` and ``.`` equivalent.

        An entry point that resolves to a module or an instance is registered as a
        plugin. One that resolves to a *class* (a :class:`~harness.capability.Capability`
        subclass or any class with hook implementations) is not registered, because it
        needs configuration; it is listed by :meth:`available_capabilities` so a CLI or a
        configuration file can instantiate it by name. Entry points whose name is
        already registered or listed are skipped.

        Args:
            allow: Overrides ``HARNESS_LOAD_PLUGINS`` (``None``: read the variable).
            block: Overrides ``HARNESS_DISABLE_PLUGINS`` (``None``: read the variable).

        Returns:
            The names of the entry points loaded by this call.

        Raises:
            PluginLoadError: An entry point failed to import or to register. The message
                names the distribution, the entry point (``name = value``), the cause
                (also chained) and how to disable it.
        """
        allowed = _env_names(LOAD_ENV) if allow is None else frozenset(_normalize(n) for n in allow)
        if block is None:
            blocked = _env_names(DISABLE_ENV) or frozenset[str]()
        else:
            blocked = frozenset(_normalize(n) for n in block)
        loaded: list[str] = []
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            dist = ep.dist
            dist_name = dist.metadata["Name"] if dist is not None else None
            keys = {_normalize(ep.name)} | ({_normalize(dist_name)} if dist_name else set[str]())
            if allowed is not None and not keys & allowed:
                continue
            if keys & blocked:
                continue
            if self._pm.has_plugin(ep.name) or ep.name in self._available:
                continue
            source = _Source(dist_name, dist.version if dist is not None else None, ep.value)
            try:
                obj = ep.load()
            except Exception as exc:
                raise PluginLoadError(_load_message(ep, source, exc, "failed to import")) from exc
            if isinstance(obj, type):
                cls = cast("type[object]", obj)
                if not (issubclass(cls, Capability) or _hook_names(cls)):
                    raise PluginLoadError(
                        _load_message(
                            ep,
                            source,
                            None,
                            f"points to the class {obj.__qualname__}, which has no hook implementations",
                        )
                    )
                self._available[ep.name] = cls
                self._available_sources[ep.name] = source
            else:
                if not _hook_names(obj):
                    raise PluginLoadError(
                        _load_message(
                            ep, source, None, f"points to {obj!r}, which has no hook implementations"
                        )
                    )
                try:
                    self._register(obj, ep.name)
                except PluginLoadError as exc:
                    raise PluginLoadError(_load_message(ep, source, exc, "failed to register")) from exc
                self._sources[ep.name] = source
            loaded.append(ep.name)
        return loaded

    def available_capabilities(self) -> dict[str, type]:
        """Capability classes found through entry points, by entry-point name.

        They are not registered: instantiate one with its configuration and pass it to
        :meth:`add_capabilities`.
        """
        return dict(self._available)

    def list_plugins(self) -> list[PluginInfo]:
        """Every registered capability and plugin, then every available capability class.

        Capabilities come in run order, plugins in registration order.
        """
        infos: list[PluginInfo] = []
        for capability in self._resolved:
            name = self._name_of(capability)
            infos.append(self._info(name, capability, "capability", self._sources.get(name)))
        plugins = [
            (name, plugin)
            for name, plugin in self._pm.list_name_plugin()
            if plugin is not None and name not in self._capability_position
        ]
        plugins.sort(key=lambda item: self._registration.get(item[0], 1 << 30))
        for name, plugin in plugins:
            infos.append(self._info(name, plugin, "plugin", self._sources.get(name)))
        for name, cls in self._available.items():
            infos.append(self._info(name, cls, "available", self._available_sources.get(name)))
        return infos

    @staticmethod
    def _info(
        name: str,
        obj: object,
        kind: Literal["capability", "plugin", "available"],
        source: _Source | None,
    ) -> PluginInfo:
        return PluginInfo(
            name=name,
            kind=kind,
            hooks=_hook_names(obj),
            distribution=source.distribution if source else None,
            version=source.version if source else None,
            entry_point=source.entry_point if source else None,
        )


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


def _bind(impl: pluggy.HookImpl, kwargs: Mapping[str, object]) -> Callable[[], object]:
    args = [kwargs[name] for name in impl.argnames]
    function: Callable[..., object] = impl.function

    def call() -> object:
        return function(*args)

    return call


def _forced_call(method: Callable[..., object], ctx: RequestContext, reason: str) -> Callable[[], object]:
    def call() -> object:
        return method(ctx, reason=reason)

    return call


def _own_compact(capability: object) -> Callable[..., object] | None:
    method: object = getattr(capability, "compact", None)
    if not callable(method):
        return None
    if isinstance(capability, Capability) and type(capability).compact is Capability.compact:
        return None
    return method


def _traced_step(
    trace: Callable[[str], None], call: Callable[[], object], name: str, hook_name: str, ctx: RequestContext
) -> Callable[[], object]:
    def done(start: float, before: int) -> None:
        elapsed = (time.perf_counter() - start) * 1000
        trace(f"{hook_name} <- {name}: {elapsed:.1f} ms, {before} -> {len(ctx.messages)} messages")

    def failed(exc: BaseException) -> None:
        trace(f"{hook_name} <- {name}: raised {type(exc).__name__}")

    def run() -> object:
        start = time.perf_counter()
        before = len(ctx.messages)
        trace(f"{hook_name} -> {name} ({before} messages)")
        try:
            result = call()
        except BaseException as exc:
            failed(exc)
            raise
        if not inspect.isawaitable(result):
            done(start, before)
            return result
        awaitable = cast("Awaitable[object]", result)

        async def finish() -> object:
            try:
                value = await awaitable
            except BaseException as exc:
                failed(exc)
                raise
            done(start, before)
            return value

        return finish()

    return run


def _call_observer(
    impl: pluggy.HookImpl,
    kwargs: Mapping[str, object],
    hook_name: str,
    trace: Callable[[str], None] | None = None,
) -> object:
    if trace is not None:
        trace(f"{hook_name} -> {impl.plugin_name}")
    try:
        return _bind(impl, kwargs)()
    except _INTERRUPTS:
        raise
    except CapabilityError:
        raise
    except Exception as exc:
        raise CapabilityError(
            impl.plugin_name, f"{hook_name} observer raised {type(exc).__name__}: {exc}"
        ) from exc


def _discard(awaitable: Awaitable[object]) -> None:
    if inspect.iscoroutine(awaitable):
        awaitable.close()


def _part_shape(part: Part) -> tuple[str, str | None, bool]:
    if isinstance(part, RetryPromptPart):
        return (part.part_kind, part.tool_call_id, part.answers_tool_call)
    return (part.part_kind, getattr(part, "tool_call_id", None), False)


def _message_shape(message: CanonicalMessage) -> tuple[object, ...]:
    return (message.kind, is_empty_response(message), *map(_part_shape, message.parts))


def _same_shape(before: Sequence[CanonicalMessage], after: Sequence[CanonicalMessage]) -> bool:
    """True when ``after`` differs from ``before`` only in content that no invariant reads.

    Every invariant depends only on message kinds, part kinds, tool-call ids, whether a
    retry answers a call and whether a response is empty. An edit that keeps all of these
    (clearing a tool result, replacing a superseded read) cannot add a violation, so the
    guard skips the O(n) check for it; only the changed messages are compared.
    """
    if len(before) != len(after):
        return False
    start, stop = changed_span(before, after)
    return all(
        a is b or _message_shape(a) == _message_shape(b)
        for a, b in zip(before[start:stop], after[start:stop], strict=True)
    )


def _dropped_request(before: Sequence[CanonicalMessage], after: Sequence[CanonicalMessage]) -> bool:
    """True when ``before`` ended with a request and ``after`` no longer ends with it.

    The request may be replaced by an edited copy, but the history may not end with a
    response, be empty, or end with an *older* message of ``before``.
    """
    if not before or not before[-1].is_request:
        return False
    if not after or not after[-1].is_request:
        return True
    last = after[-1]
    return last is not before[-1] and any(message is last for message in before[:-1])


def _violation_key(violation: Violation) -> tuple[str, str | None]:
    return (violation.kind, violation.tool_call_id)


def _new_violations(before: Sequence[Violation], after: Sequence[Violation]) -> list[Violation]:
    # Indices shift when a capability removes messages, so violations are compared by
    # kind and tool call id, counting repeats.
    budget = Counter(_violation_key(v) for v in before)
    introduced: list[Violation] = []
    for violation in after:
        key = _violation_key(violation)
        if budget[key] > 0:
            budget[key] -= 1
        else:
            introduced.append(violation)
    return introduced


def _describe_violation(violation: Violation) -> str:
    where = f"message {violation.message_index}"
    if violation.part_index is not None:
        where += f", part {violation.part_index}"
    call = f", tool call {violation.tool_call_id!r}" if violation.tool_call_id else ""
    return f"{violation.kind} at {where}{call}: {violation.detail}"


def _load_message(
    ep: importlib.metadata.EntryPoint, source: _Source, cause: BaseException | None, what: str
) -> str:
    dist = source.distribution or "an unknown distribution"
    version = f" {source.version}" if source.version else ""
    text = f"harness plugin {ep.name!r} (entry point {ep.name} = {ep.value}) from {dist}{version} {what}"
    if cause is not None:
        text += f": {type(cause).__name__}: {cause}"
    return f"{text}. Disable it with {DISABLE_ENV}={ep.name}, or uninstall {dist}."
