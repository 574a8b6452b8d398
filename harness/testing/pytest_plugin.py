"""harness's pytest plugin (entry point ``pytest11``, name ``harness``): fixtures for plugin authors.

Installed with ``harness-loop[testing]``, pytest loads it automatically; every fixture
is then available in any test without an import. ``pytest -p no:harness`` disables it.

Fixtures (all function-scoped, all prefixed ``harness_`` so they never shadow yours):

* ``harness_plugin_manager``: a fresh :class:`~harness.hooks.manager.PluginManager` with no
  plugin registered and no entry point loaded (call ``load_entrypoint_plugins()`` for
  the installed ones).
* ``harness_register``: a :class:`~harness.testing.Registrar` for that manager:
  ``harness_register(obj)`` registers a capability (ordering applies) or a plugin for
  this test only; everything still registered is removed at teardown.
* ``harness_hook_recorder``: a :class:`~harness.testing.HookRecorder` attached to that
  manager, recording every hook call (context hooks included) until teardown.
* ``harness_scripted_model``: :func:`~harness.testing.scripted_model`, a factory of
  models playing a list of steps (texts, tool calls, parallel calls, thinking).
* ``harness_history``: a new :class:`~harness.testing.HistoryBuilder`.
* ``harness_context``: a factory of :class:`~harness.capabilities.context.RequestContext` objects
  over a history, whose token counter honours the manager's ``count_tokens`` plugins.
"""

from __future__ import annotations

__all__ = [
    "harness_context",
    "harness_history",
    "harness_hook_recorder",
    "harness_plugin_manager",
    "harness_register",
    "harness_scripted_model",
]

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from harness.capabilities.context import RequestContext
    from harness.core.messages import CanonicalMessage
    from harness.hooks.manager import PluginManager
    from harness.models.function import FunctionModel
    from harness.testing.builders import HistoryBuilder
    from harness.testing.recording import HookRecorder, Registrar


@pytest.fixture
def harness_plugin_manager() -> PluginManager:
    """A fresh plugin manager: nothing registered, no entry point loaded."""
    from harness.hooks.manager import PluginManager

    return PluginManager()


@pytest.fixture
def harness_register(harness_plugin_manager: PluginManager) -> Iterator[Registrar]:
    """Register capabilities and plugins into ``harness_plugin_manager`` for this test only."""
    from harness.testing.recording import Registrar

    registrar = Registrar(harness_plugin_manager)
    yield registrar
    registrar.unregister_all()


@pytest.fixture
def harness_hook_recorder(harness_plugin_manager: PluginManager) -> Iterator[HookRecorder]:
    """Record every hook call ``harness_plugin_manager`` makes during this test."""
    from harness.testing.recording import HookRecorder

    recorder = HookRecorder(harness_plugin_manager)
    yield recorder
    recorder.detach()


@pytest.fixture
def harness_scripted_model() -> Callable[..., FunctionModel]:
    """The :func:`harness.testing.scripted_model` factory: ``harness_scripted_model("hi", ...)``."""
    from harness.testing.models import scripted_model

    return scripted_model


@pytest.fixture
def harness_history() -> HistoryBuilder:
    """A new :class:`harness.testing.HistoryBuilder`."""
    from harness.testing.builders import HistoryBuilder

    return HistoryBuilder()


@pytest.fixture
def harness_context(harness_plugin_manager: PluginManager) -> Callable[..., RequestContext]:
    """Build a ``RequestContext`` over a history: ``harness_context(messages, model_name=...)``."""
    from harness.testing.builders import make_context

    def build(messages: Sequence[CanonicalMessage], **kwargs: Any) -> RequestContext:
        kwargs.setdefault("manager", harness_plugin_manager)
        return make_context(messages, **kwargs)

    return build
