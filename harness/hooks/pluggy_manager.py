"""The ``pluggy.PluginManager`` under harness's facade: async-generator wrappers, cached hook discovery."""

from __future__ import annotations

__all__ = ["PluggyManager"]

import inspect
import weakref
from collections.abc import Mapping
from typing import cast

import pluggy

from harness.hooks.middleware import WRAPPER_HOOKS


class PluggyManager(pluggy.PluginManager):
    """pluggy's manager, accepting async-generator wrappers of the middleware hooks.

    pluggy drives wrappers itself and so accepts only generator functions as
    ``wrapper=True``; harness drives the middleware hooks' wrappers itself
    (:mod:`harness.hooks.middleware`) and awaits async-generator ones. Every other check of
    pluggy's still runs on them (the hook exists, the arguments are the spec's).

    Finding an instance's hook implementations inspects every attribute of its class
    (about 4 ms for ``harness-otel``'s plugin, which every default manager registers), so
    what a class's attributes hold is found once per class; an attribute the instance sets
    itself is looked at each time.
    """

    def parse_hookimpl_opts(self, plugin: object, name: str) -> pluggy.HookimplOpts | None:
        """The options pluggy finds, cached per class for attributes the instance does not set itself."""
        if inspect.isclass(plugin) or inspect.ismodule(plugin) or name in _own(plugin):
            return super().parse_hookimpl_opts(plugin, name)
        cls: type = type(plugin)
        per_class = _by_class.setdefault(cls, {})
        if name not in per_class:
            per_class[name] = super().parse_hookimpl_opts(plugin, name)
        return per_class[name]

    def _verify_hook(self, hook: pluggy.HookCaller, hookimpl: pluggy.HookImpl) -> None:
        if hookimpl.wrapper and hook.name in WRAPPER_HOOKS and inspect.isasyncgenfunction(hookimpl.function):
            # pluggy's checks of a plain implementation, then the flag restored (a slot, typed Final).
            setattr(hookimpl, "wrapper", False)  # noqa: B010
            try:
                super()._verify_hook(hook, hookimpl)
            finally:
                setattr(hookimpl, "wrapper", True)  # noqa: B010
            return
        super()._verify_hook(hook, hookimpl)


_Found = dict[str, pluggy.HookimplOpts | None]
_by_class: weakref.WeakKeyDictionary[type, _Found] = weakref.WeakKeyDictionary()


def _own(plugin: object) -> Mapping[str, object]:
    try:
        own: object = object.__getattribute__(plugin, "__dict__")
    except AttributeError:
        return {}
    return cast("Mapping[str, object]", own) if isinstance(own, Mapping) else {}
