"""The plugin system: hook specifications, the plugin manager, ordering, entry points, tracing.

* :mod:`harness.hooks.specs`: every hook a plugin or capability can implement.
* :mod:`harness.hooks.manager`: :class:`PluginManager`, the typed facade over pluggy
  (registration and validation).
* :mod:`harness.hooks.ordering`: capability names and the order implementations run in.
* :mod:`harness.hooks.dispatch`: calling every hook implementation (awaiting the context
  hooks, under the invariant guard of :mod:`harness.history.guard`), each failure naming
  its plugin.
* :mod:`harness.hooks.middleware`: driving the ``wrap_*`` wrapper generators across the
  awaited call, and ``after_model_response``.
* :mod:`harness.hooks.validation`: what a registered implementation must look like.
* :mod:`harness.hooks.entrypoints`: entry-point discovery, loading and listing; what an
  entry point's name provides (a capability, ``store.<scheme>``, ``engine.<name>``,
  ``plugin.<name>``).
* :mod:`harness.hooks.installed`: the installed plugins, each imported when first asked for.
* :mod:`harness.hooks.defaults`: the manager ``Agent()`` and ``open_store()`` start from
  (installed observers on, nothing else imported).
* :mod:`harness.hooks.tracing`: ``HARNESS_TRACE_PLUGINS`` hook-call tracing.

The markers (:data:`hookimpl`, :data:`hookspec`) are defined in :mod:`harness.core.markers`
so that the capability base class, below this layer, can use them.
"""

from __future__ import annotations

from harness.core.markers import PROJECT_NAME, hookimpl, hookspec
from harness.hooks.dispatch import ASYNC_HOOKS, DECISION_HOOKS
from harness.hooks.entrypoints import DISABLE_ENV, ENTRY_POINT_GROUP, LOAD_ENV, PluginInfo
from harness.hooks.manager import PluginManager
from harness.hooks.middleware import WRAPPER_HOOKS, Return
from harness.hooks.ordering import capability_name, order_capabilities
from harness.hooks.tracing import TRACE_ENV

__all__ = [
    "Return",
    "ASYNC_HOOKS",
    "DECISION_HOOKS",
    "DISABLE_ENV",
    "ENTRY_POINT_GROUP",
    "LOAD_ENV",
    "PROJECT_NAME",
    "TRACE_ENV",
    "WRAPPER_HOOKS",
    "PluginInfo",
    "PluginManager",
    "capability_name",
    "hookimpl",
    "hookspec",
    "order_capabilities",
]
