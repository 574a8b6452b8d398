"""What makes a plugin's hook implementations acceptable, checked when it is registered."""

from __future__ import annotations

__all__ = ["implementation_problem", "plugin_problem"]

import difflib
import inspect
from collections.abc import Set

import pluggy

from harness.hooks.dispatch import ASYNC_HOOKS
from harness.hooks.middleware import WRAPPER_HOOKS


def implementation_problem(hook_name: str, impl: pluggy.HookImpl) -> str | None:
    """What is wrong with ``impl`` as an implementation of ``hook_name`` (``None``: nothing)."""
    function = impl.function
    if hook_name in WRAPPER_HOOKS:
        if impl.hookwrapper:
            return f"{hook_name} cannot be an old-style hookwrapper=True implementation; use wrapper=True"
        if not impl.wrapper:
            return (
                f"{hook_name} takes only wrapper implementations: mark it @hookimpl(wrapper=True), yield once"
            )
        if inspect.iscoroutinefunction(function):
            return (
                f"{hook_name} wrapper must be a generator function (sync, or async def with a yield); "
                "a coroutine function cannot yield to run the call"
            )
        if not inspect.isgeneratorfunction(function) and not inspect.isasyncgenfunction(function):
            return f"{hook_name} wrapper must be a generator function that yields once"
        return None
    if impl.wrapper or impl.hookwrapper:
        why = (
            "harness awaits this hook itself, and a wrapper cannot await across its yield"
            if hook_name in ASYNC_HOOKS
            else "harness calls each implementation itself, so that a failure names its plugin"
        )
        return f"{hook_name} cannot be a wrapper implementation: {why}"
    if hook_name not in ASYNC_HOOKS and inspect.iscoroutinefunction(function):
        return f"{hook_name} must be synchronous (pluggy calls it and cannot await it)"
    return None


def plugin_problem(pm: pluggy.PluginManager, plugin: object, spec_names: Set[str]) -> str | None:
    """The first problem of ``plugin``'s hook implementations once registered in ``pm`` (``None``: none)."""
    for caller in pm.get_hookcallers(plugin) or []:
        for impl in caller.get_hookimpls():
            if impl.plugin is not plugin:
                continue
            if not caller.has_spec():
                if impl.optionalhook:
                    continue
                close = difflib.get_close_matches(caller.name, sorted(spec_names), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                return f"implements unknown hook {caller.name!r}{hint}"
            problem = implementation_problem(caller.name, impl)
            if problem is not None:
                return problem
    return None
