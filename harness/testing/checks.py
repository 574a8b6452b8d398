"""Check a plugin or capability against the hook specifications and the ordering rules.

:func:`check_plugin` finds, without running the plugin, every mistake that
:class:`harness.hooks.manager.PluginManager` would reject at registration or that would make a
hook silently never run, and returns them all (registration stops at the first). The
rules, with their :attr:`Problem.code`:

Errors (the manager rejects the plugin, or a hook would never run):

* ``unknown_hook``: a ``@hookimpl`` whose name (or ``specname``) matches no hook
  specification (a typo; a "did you mean" hint is given). pluggy's ``check_pending``
  reports the same thing after registration.
* ``unknown_argument``: an implementation takes an argument the specification does not
  have (implementations may take *fewer*, never others).
* ``wrapper_on_context_hook``: ``wrapper=True`` / ``hookwrapper=True`` on any hook but the
  three middleware hooks: the
  manager calls every implementation itself (it awaits the context hooks, and a wrapper
  cannot await across its ``yield``; it calls the decision hooks one at a time so that a
  failure names its plugin).
* ``bad_wrapper``: an implementation of a middleware hook (``wrap_model_request``,
  ``wrap_tool_call``, ``wrap_run``) that is not a synchronous generator function marked
  ``@hookimpl(wrapper=True)``.
* ``async_not_awaited``: an ``async def`` implementation of a hook pluggy dispatches
  synchronously (``count_tokens`` and the other decision hooks): the coroutine would
  never run.
* ``missing_hookimpl``: a method named like a hook (e.g. ``before_model_request``)
  without ``@hookimpl``; pluggy ignores it, so an override of ``Capability``'s hook
  that forgot the marker silently disables the capability.
* ``no_hooks``: the object implements no hook at all (entry-point loading rejects it).
* ``bad_name``: a ``name`` attribute that is not a non-empty string (the manager would
  silently use the class name instead).
* ``bad_ordering``: ``runs_before`` / ``runs_after`` is not a sequence of names, or names
  the capability itself.
* ``ordering_cycle``: the declarations contradict those of a capability in ``manager`` or
  installed through an entry point (``CapabilityOrderError`` at ``add_capabilities``).
* ``name_taken``: another capability (in ``manager``, or installed) has the same name.
* ``registration``: the manager rejected the plugin for another reason.

Warnings (legal, but usually a mistake):

* ``unknown_order_name``: ``runs_before`` / ``runs_after`` names a capability that is not
  installed, not in ``manager``, not one harness ships (:data:`KNOWN_CAPABILITY_NAMES`)
  and not in ``known_capabilities``. The manager ignores such names (the other capability
  may simply be absent), so a typo goes unnoticed.
* ``optional_unknown_hook``: an ``optionalhook=True`` implementation of a hook harness
  does not specify.
"""

from __future__ import annotations

__all__ = [
    "KNOWN_CAPABILITY_NAMES",
    "Problem",
    "assert_plugin_valid",
    "check_plugin",
]

import difflib
import importlib.metadata
import inspect
import types
import warnings
from collections.abc import Iterable, Mapping
from typing import Final, Literal, cast

import attrs
import pluggy

from harness.capabilities.base import Capability
from harness.core.markers import PROJECT_NAME
from harness.errors import CapabilityOrderError, HarnessExperimentalWarning, PluginLoadError
from harness.hooks import specs as hookspecs
from harness.hooks.dispatch import ASYNC_HOOKS
from harness.hooks.entrypoints import ENTRY_POINT_GROUP
from harness.hooks.manager import PluginManager
from harness.hooks.middleware import WRAPPER_HOOKS
from harness.hooks.ordering import order_capabilities

KNOWN_CAPABILITY_NAMES: Final = frozenset(
    {
        "sliding_window",
        "clear_tool_results",
        "dedupe_file_reads",
        "limit_warner",
        "summarizing",
        "tiered",
        "recall",
        "clamp_oversized_messages",
        "compact_on_request",
        "model_fallback",
        "tool_limits",
        "tool_approval",
        "anthropic_context_management",
    }
)
"""Names of the capabilities harness ships; ``runs_before`` may name them even when absent."""

Severity = Literal["error", "warning"]


@attrs.frozen
class Problem:
    """One thing :func:`check_plugin` found.

    Attributes:
        code: What kind of problem (see the module docstring).
        message: What is wrong, where, and how to fix it.
        severity: ``"error"`` (rejected or silently broken) or ``"warning"``.
        hook: The hook concerned, if any.
    """

    code: str
    message: str
    severity: Severity = "error"
    hook: str | None = None

    def __str__(self) -> str:
        return f"[{self.severity}] {self.code}: {self.message}"


def _spec_names() -> dict[str, Mapping[str, object]]:
    specs: dict[str, Mapping[str, object]] = {}
    for name, value in vars(hookspecs).items():
        opts: object = getattr(value, f"{PROJECT_NAME}_spec", None)
        if isinstance(opts, Mapping):
            specs[name] = cast("Mapping[str, object]", opts)
    return specs


def _impl_argnames(function: object) -> tuple[str, ...]:
    """Positional argument names pluggy passes to ``function`` (``self`` dropped)."""
    target = function.__func__ if inspect.ismethod(function) else function
    try:
        signature = inspect.signature(target)  # pyright: ignore[reportArgumentType]
    except (TypeError, ValueError):
        return ()
    names = [
        p.name
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    qualname: str = getattr(target, "__qualname__", "")
    if names and (inspect.ismethod(function) or ("." in qualname and names[0] == "self")):
        names = names[1:]
    return tuple(names)


def _label(plugin: object) -> str:
    if isinstance(plugin, types.ModuleType):
        return f"module {plugin.__name__}"
    if isinstance(plugin, type):
        return f"class {plugin.__qualname__}"
    return f"{type(plugin).__qualname__} instance"


def _hook_problems(plugin: object, label: str, scratch: pluggy.PluginManager) -> tuple[list[Problem], int]:
    specs = _spec_names()
    problems: list[Problem] = []
    implemented = 0
    for attribute in sorted(dir(plugin)):
        opts = scratch.parse_hookimpl_opts(plugin, attribute)
        if opts is None:
            if attribute in specs:
                try:
                    value = inspect.getattr_static(plugin, attribute)
                except AttributeError:
                    continue
                if callable(getattr(value, "__func__", value)):
                    problems.append(
                        Problem(
                            "missing_hookimpl",
                            f"{label} defines {attribute}() without @hookimpl, so pluggy never calls it; "
                            "decorate it with @harness.hookimpl (an override must carry it again)",
                            hook=attribute,
                        )
                    )
            continue
        implemented += 1
        hook = opts.get("specname") or attribute
        function: object = getattr(plugin, attribute)
        spec = specs.get(hook)
        if spec is None:
            close = difflib.get_close_matches(hook, sorted(specs), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            if opts.get("optionalhook"):
                problems.append(
                    Problem(
                        "optional_unknown_hook",
                        f"{label}.{attribute} is an optional implementation of {hook!r}, which harness "
                        f"does not specify{hint}",
                        "warning",
                        hook,
                    )
                )
            else:
                problems.append(
                    Problem(
                        "unknown_hook",
                        f"{label}.{attribute} implements unknown hook {hook!r}{hint}",
                        hook=hook,
                    )
                )
            continue
        caller = cast("pluggy.HookCaller", getattr(scratch.hook, hook))
        allowed = set(caller.spec.argnames) if caller.spec is not None else set[str]()
        extra = [name for name in _impl_argnames(function) if name not in allowed]
        if extra:
            problems.append(
                Problem(
                    "unknown_argument",
                    f"{label}.{attribute} takes {', '.join(map(repr, extra))}, which hook {hook!r} does not "
                    f"pass (it passes {', '.join(sorted(allowed)) or 'nothing'})",
                    hook=hook,
                )
            )
        target = getattr(function, "__func__", function)
        if hook in WRAPPER_HOOKS:
            shape = _wrapper_shape_problem(hook, target, opts)
            if shape is not None:
                problems.append(Problem("bad_wrapper", f"{label}.{attribute}: {shape}", hook=hook))
            continue
        if opts.get("wrapper") or opts.get("hookwrapper"):
            why = (
                "harness awaits this hook itself and a wrapper cannot await across its yield"
                if hook in ASYNC_HOOKS
                else "harness calls each implementation of this hook itself, so that a failure names "
                "its plugin"
            )
            problems.append(
                Problem(
                    "wrapper_on_context_hook",
                    f"{label}.{attribute} is a wrapper implementation of {hook!r}; {why}",
                    hook=hook,
                )
            )
        if hook not in ASYNC_HOOKS and (
            inspect.iscoroutinefunction(target) or inspect.isasyncgenfunction(target)
        ):
            problems.append(
                Problem(
                    "async_not_awaited",
                    f"{label}.{attribute} is async, but {hook!r} is dispatched synchronously by pluggy "
                    "and its coroutine would never be awaited; make it a plain def",
                    hook=hook,
                )
            )
    return problems, implemented


def _wrapper_shape_problem(hook: str, function: object, opts: Mapping[str, object]) -> str | None:
    """What is wrong with an implementation of a middleware hook (``None``: nothing)."""
    if opts.get("hookwrapper"):
        return f"{hook!r} takes new-style wrappers: use @hookimpl(wrapper=True), not hookwrapper=True"
    if not opts.get("wrapper"):
        return f"{hook!r} takes only wrapper implementations: mark it @hookimpl(wrapper=True) and yield once"
    if inspect.isasyncgenfunction(function) or inspect.iscoroutinefunction(function):
        return f"{hook!r} wrappers must be synchronous generator functions; async wrappers are not supported"
    if not inspect.isgeneratorfunction(function):
        return f"{hook!r} wrapper must be a generator function that yields once"
    return None


def _declared(obj: object, attribute: str) -> tuple[str, ...] | str:
    """The names in ``obj.<attribute>``, or an error message."""
    value: object = getattr(obj, attribute, ())
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Iterable):
        items = list(cast("Iterable[object]", value))
        if all(isinstance(item, str) for item in items):
            return tuple(cast("list[str]", items))
    return f"{attribute} must be a sequence of capability names, got {value!r}"


@attrs.frozen
class _Declaration:
    """A stand-in carrying a capability's name and ordering, for :func:`order_capabilities`."""

    name: str
    runs_before: tuple[str, ...]
    runs_after: tuple[str, ...]
    source: object = attrs.field(eq=False, repr=False)


def _installed_capabilities() -> list[tuple[str, type]]:
    """(entry-point name, class) of every installed capability class; broken ones skipped."""
    found: list[tuple[str, type]] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HarnessExperimentalWarning)
        for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                loaded: object = entry_point.load()
            except Exception:
                continue
            if isinstance(loaded, type):
                found.append((entry_point.name, loaded))
    return found


def _class_name(cls: type) -> str:
    value: object = getattr(cls, "name", None)
    return value if isinstance(value, str) and value else cls.__name__


def _ordering_problems(
    plugin: object,
    label: str,
    manager: PluginManager | None,
    known_capabilities: Iterable[str],
) -> list[Problem]:
    problems: list[Problem] = []
    is_class = isinstance(plugin, type)
    cls = plugin if isinstance(plugin, type) else type(plugin)
    raw_name: object = getattr(plugin, "name", None)
    if raw_name is None or isinstance(plugin, types.ModuleType):
        name = plugin.__name__ if isinstance(plugin, types.ModuleType) else cls.__name__
        if isinstance(plugin, Capability) or (is_class and issubclass(cls, Capability)):
            problems.append(Problem("bad_name", f"{label} has no name; set the class attribute name = '...'"))
    elif not isinstance(raw_name, str) or not raw_name:
        name = cls.__name__
        problems.append(
            Problem(
                "bad_name",
                f"{label}.name is {raw_name!r}; it must be a non-empty string (the manager would fall back "
                f"to {cls.__name__!r})",
            )
        )
    else:
        name = raw_name

    declared: dict[str, tuple[str, ...]] = {}
    for attribute in ("runs_before", "runs_after"):
        names = _declared(plugin, attribute)
        if isinstance(names, str):
            problems.append(Problem("bad_ordering", f"{label}: {names}"))
            declared[attribute] = ()
            continue
        declared[attribute] = names
        if name in names:
            problems.append(
                Problem("bad_ordering", f"{label}: {attribute} names the capability itself ({name!r})")
            )

    others: list[_Declaration] = []
    if manager is not None:
        for capability in manager.capabilities:
            if capability is plugin:
                continue
            others.append(_stand_in(capability))
    for entry_name, other_cls in _installed_capabilities():
        if other_cls is cls:
            continue
        declaration = _stand_in(other_cls)
        if all(o.name != declaration.name for o in others):
            others.append(declaration)
        if entry_name != declaration.name and all(o.name != entry_name for o in others):
            others.append(attrs.evolve(declaration, name=entry_name))
    known = {o.name for o in others} | set(KNOWN_CAPABILITY_NAMES) | set(known_capabilities)
    for attribute, names in declared.items():
        for other in names:
            if other != name and other not in known:
                close = difflib.get_close_matches(other, sorted(known), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                problems.append(
                    Problem(
                        "unknown_order_name",
                        f"{label}: {attribute} names {other!r}, which is not an installed or known "
                        f"capability{hint} (the manager ignores unknown names)",
                        "warning",
                    )
                )

    for other in others:
        if other.name == name:
            problems.append(
                Problem(
                    "name_taken",
                    f"{label} is named {name!r}, like {_label(other.source)}; two capabilities with one "
                    "name cannot be used together",
                )
            )
    if not any(p.code == "bad_ordering" for p in problems):
        me = _Declaration(name, declared["runs_before"], declared["runs_after"], plugin)
        unique = [o for o in others if o.name != name]
        try:
            order_capabilities([*unique, me])
        except CapabilityOrderError as exc:
            problems.append(Problem("ordering_cycle", f"{label}: {exc}"))
    return problems


def _stand_in(obj: object) -> _Declaration:
    cls = obj if isinstance(obj, type) else type(obj)
    raw: object = getattr(obj, "name", None)
    name = raw if isinstance(raw, str) and raw else _class_name(cls)
    before = _declared(obj, "runs_before")
    after = _declared(obj, "runs_after")
    return _Declaration(
        name,
        before if isinstance(before, tuple) else (),
        after if isinstance(after, tuple) else (),
        obj,
    )


def check_plugin(
    plugin: object,
    *,
    manager: PluginManager | None = None,
    known_capabilities: Iterable[str] = (),
) -> list[Problem]:
    """Check a plugin, a capability instance or a capability class; return every problem found.

    The plugin is never called: hooks are inspected, and registration is tried in a
    scratch :class:`~harness.hooks.manager.PluginManager` (followed by pluggy's
    ``check_pending``). Ordering is checked against the capabilities of ``manager`` and
    every capability class installed through the ``harness`` entry-point group.

    Args:
        plugin: A module, an object with hook implementations, a capability instance or a
            capability class (classes are checked without instantiating them).
        manager: A manager whose registered capabilities the plugin must coexist with.
        known_capabilities: Extra names ``runs_before`` / ``runs_after`` may use without a
            warning (capabilities you expect to be installed next to yours).

    Returns:
        The problems, errors first; empty when the plugin is fine.
    """
    label = _label(plugin)
    scratch = pluggy.PluginManager(PROJECT_NAME)
    scratch.add_hookspecs(hookspecs)
    problems, implemented = _hook_problems(plugin, label, scratch)
    is_capability = _is_capability(plugin)
    if implemented == 0 and not is_capability:
        problems.append(
            Problem("no_hooks", f"{label} implements no hook; mark its methods with @harness.hookimpl")
        )
    if not isinstance(plugin, types.ModuleType) and (
        is_capability or hasattr(plugin, "runs_before") or hasattr(plugin, "runs_after")
    ):
        problems.extend(_ordering_problems(plugin, label, manager, known_capabilities))
    if not any(p.severity == "error" for p in problems):
        problems.extend(_registration_problems(plugin, label, scratch))
    problems.sort(key=lambda p: p.severity != "error")
    return problems


def _is_capability(plugin: object) -> bool:
    if isinstance(plugin, Capability):
        return True
    return isinstance(plugin, type) and issubclass(plugin, Capability)


def _registration_problems(plugin: object, label: str, scratch: pluggy.PluginManager) -> list[Problem]:
    trial = PluginManager()
    try:
        trial.register(plugin, name="harness.testing:check_plugin")
    except PluginLoadError as exc:
        return [Problem("registration", f"{label}: {exc}")]
    try:
        scratch.register(plugin, name="harness.testing:check_plugin")
        scratch.check_pending()
    except pluggy.PluginValidationError as exc:
        return [Problem("registration", f"{label}: {exc}".split("\n", 1)[0])]
    return []


def assert_plugin_valid(
    plugin: object,
    *,
    manager: PluginManager | None = None,
    known_capabilities: Iterable[str] = (),
    warnings_are_errors: bool = True,
) -> None:
    """Assert that :func:`check_plugin` finds nothing wrong.

    Args:
        plugin: As :func:`check_plugin`.
        manager: As :func:`check_plugin`.
        known_capabilities: As :func:`check_plugin`.
        warnings_are_errors: Fail on warnings too (the default).

    Raises:
        AssertionError: Listing every problem found.
    """
    problems = check_plugin(plugin, manager=manager, known_capabilities=known_capabilities)
    if not warnings_are_errors:
        problems = [p for p in problems if p.severity == "error"]
    if problems:
        listing = "\n".join(f"  - {p}" for p in problems)
        raise AssertionError(f"{_label(plugin)} has {len(problems)} problem(s):\n{listing}")
