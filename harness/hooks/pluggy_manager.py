"""The ``pluggy.PluginManager`` under harness's facade: it also accepts async-generator wrappers."""

from __future__ import annotations

__all__ = ["PluggyManager"]

import inspect

import pluggy

from harness.hooks.middleware import WRAPPER_HOOKS


class PluggyManager(pluggy.PluginManager):
    """pluggy's manager, accepting async-generator wrappers of the middleware hooks.

    pluggy drives wrappers itself and so accepts only generator functions as
    ``wrapper=True``; harness drives the middleware hooks' wrappers itself
    (:mod:`harness.hooks.middleware`) and awaits async-generator ones. Every other check of
    pluggy's still runs on them (the hook exists, the arguments are the spec's).
    """

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
