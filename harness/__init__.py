"""harness: a minimal agent loop with pluggy hooks and context-window capabilities.

The names here are the ones users reach for, grouped by what they do:

* Run an agent: ``Agent``, ``RunResult``, ``RunStream`` (``Agent.run_stream``), ``RunContext``,
  ``Model``, ``ModelSettings``.
* Define tools: ``Tool``, ``ToolDefinition``, ``ToolRetry``.
* Catch errors: ``HarnessError``, ``RunError``, ``MaxIterationsExceeded``, ``UserAbort``,
  ``RequestTimeout``, ``EmptyResponseError``, ``ToolRetryBudgetExceeded``,
  ``RunStopped``, ``ApprovalPendingError``, ``ApprovalError``, ``ToolArgumentsError``,
  ``CapabilityError``, ``ModelError``, ``ModelContextLengthError``, ``MessageError``,
  ``WireFormatError``, ``PluginLoadError``, ``SessionLoadError``, ``HarnessWarning``,
  ``HarnessExperimentalWarning``, ``ApproximateTokenCountWarning``.
* Write capabilities and plugins: ``Capability``, ``Trigger``, ``RequestContext``,
  ``CompactionEvent``, ``ModelCall`` and ``ToolCall`` (what middleware wraps), ``hookimpl``,
  ``hookspec``, ``PluginManager``,
  ``warn_experimental``, ``declare_experimental``, ``is_experimental``, ``PluginLoadWarning``.
* Use sessions: ``Session``, ``MaskedURL`` (a store URL whose credentials never show).
* Load, dump and count messages: ``CanonicalMessage``, ``Part``, ``UserPromptPart``,
  ``SystemPromptPart``, ``TextPart``, ``ThoughtPart``, ``ToolCallPart``,
  ``ToolReturnPart``, ``RetryPromptPart``, ``UnknownPart``, ``Usage``, ``load_messages``,
  ``dump_messages``, ``TokenCounter``.
* Keep parts through compaction: ``pin``, ``is_pinned``.
* Compact: ``compact``, ``compact_sync``, ``CompactionResult``.

Everything else lives in the layer that owns it (see CONTRIBUTING.md, "Architecture"):
:mod:`harness.core`, :mod:`harness.history`, :mod:`harness.tokens`, :mod:`harness.wire`,
:mod:`harness.session`, :mod:`harness.tools`, :mod:`harness.capabilities`,
:mod:`harness.hooks`, :mod:`harness.models`, :mod:`harness.run`, :mod:`harness.config`,
:mod:`harness.interop`, :mod:`harness.testing`, :mod:`harness.replay`, :mod:`harness.cli`;
every exception and warning is in :mod:`harness.errors`.

The names are loaded on first use, so importing a lower layer (``import harness.history``)
does not import the agent loop, the plugin manager or the providers.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.capabilities.base import Capability, Trigger
    from harness.capabilities.calls import ModelCall, ToolCall
    from harness.capabilities.context import CompactionEvent, RequestContext
    from harness.config.store import open_store
    from harness.core.effects import Effects, InProcessEffects, ModelRequestUnit, ToolCallUnit, ToolOutcome
    from harness.core.markers import hookimpl, hookspec
    from harness.core.messages import (
        CanonicalMessage,
        Part,
        RetryPromptPart,
        SystemPromptPart,
        TextPart,
        ThoughtPart,
        ToolCallPart,
        ToolReturnPart,
        UnknownPart,
        Usage,
        UserPromptPart,
    )
    from harness.core.model import Model, ModelSettings, ToolDefinition
    from harness.core.pins import is_pinned, pin
    from harness.errors import (
        ApprovalError,
        ApprovalPendingError,
        ApproximateTokenCountWarning,
        CapabilityError,
        EmptyResponseError,
        HarnessError,
        HarnessExperimentalWarning,
        HarnessWarning,
        MaxIterationsExceeded,
        MessageError,
        ModelContextLengthError,
        ModelError,
        PluginLoadError,
        PluginLoadWarning,
        RequestTimeout,
        RunError,
        RunStopped,
        SessionConflictError,
        SessionLoadError,
        SessionNotFoundError,
        SessionStoreError,
        ToolArgumentsError,
        ToolRetry,
        ToolRetryBudgetExceeded,
        UserAbort,
        WireFormatError,
        WorkflowIncompatibleError,
        declare_experimental,
        is_experimental,
        warn_experimental,
    )
    from harness.hooks.manager import PluginManager
    from harness.redaction import MaskedURL
    from harness.run.agent import Agent
    from harness.run.compaction import CompactionResult, compact, compact_sync
    from harness.run.result import RunResult
    from harness.run.stream import RunStream
    from harness.session import Session, SessionStore
    from harness.tokens import TokenCounter
    from harness.tools.context import RunContext
    from harness.tools.tool import Tool
    from harness.wire import dump_messages, load_messages

try:
    __version__: str = importlib.metadata.version("harness-loop")
    """The installed distribution's version (``harness-loop``)."""
except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    # Run an agent
    "Agent",
    "RunResult",
    "RunStream",
    "RunContext",
    "Model",
    "ModelSettings",
    # Define tools
    "Tool",
    "ToolDefinition",
    "ToolRetry",
    # Catch errors
    "HarnessError",
    "RunError",
    "MaxIterationsExceeded",
    "UserAbort",
    "RequestTimeout",
    "EmptyResponseError",
    "ToolRetryBudgetExceeded",
    "RunStopped",
    "ApprovalPendingError",
    "ApprovalError",
    "ToolArgumentsError",
    "CapabilityError",
    "ModelError",
    "ModelContextLengthError",
    "MessageError",
    "WireFormatError",
    "PluginLoadError",
    "SessionLoadError",
    "SessionStoreError",
    "SessionNotFoundError",
    "SessionConflictError",
    "HarnessWarning",
    "HarnessExperimentalWarning",
    "ApproximateTokenCountWarning",
    # Write capabilities and plugins
    "Capability",
    "Trigger",
    "RequestContext",
    "CompactionEvent",
    "ModelCall",
    "ToolCall",
    "hookimpl",
    "hookspec",
    "PluginManager",
    "warn_experimental",
    "declare_experimental",
    "is_experimental",
    "PluginLoadWarning",
    # Run durably (engines replace the effects)
    "Effects",
    "InProcessEffects",
    "ModelRequestUnit",
    "ToolCallUnit",
    "ToolOutcome",
    "WorkflowIncompatibleError",
    # Use sessions
    "Session",
    "MaskedURL",
    "SessionStore",
    "open_store",
    # Load, dump and count messages
    "CanonicalMessage",
    "Part",
    "UserPromptPart",
    "SystemPromptPart",
    "TextPart",
    "ThoughtPart",
    "ToolCallPart",
    "ToolReturnPart",
    "RetryPromptPart",
    "UnknownPart",
    "is_pinned",
    "pin",
    "Usage",
    "load_messages",
    "dump_messages",
    "TokenCounter",
    # Compact
    "compact",
    "compact_sync",
    "CompactionResult",
    "__version__",
]

_OWNERS: dict[str, str] = {
    "Agent": "harness.run.agent",
    "RunResult": "harness.run.result",
    "RunContext": "harness.tools.context",
    "Model": "harness.core.model",
    "ModelSettings": "harness.core.model",
    "Tool": "harness.tools.tool",
    "ToolDefinition": "harness.core.model",
    "ToolRetry": "harness.errors",
    "HarnessError": "harness.errors",
    "RunError": "harness.errors",
    "MaxIterationsExceeded": "harness.errors",
    "UserAbort": "harness.errors",
    "RequestTimeout": "harness.errors",
    "EmptyResponseError": "harness.errors",
    "ToolRetryBudgetExceeded": "harness.errors",
    "ToolArgumentsError": "harness.errors",
    "CapabilityError": "harness.errors",
    "ModelError": "harness.errors",
    "MessageError": "harness.errors",
    "WireFormatError": "harness.errors",
    "PluginLoadError": "harness.errors",
    "SessionLoadError": "harness.errors",
    "SessionStoreError": "harness.errors",
    "SessionNotFoundError": "harness.errors",
    "SessionConflictError": "harness.errors",
    "HarnessWarning": "harness.errors",
    "HarnessExperimentalWarning": "harness.errors",
    "ApproximateTokenCountWarning": "harness.errors",
    "Capability": "harness.capabilities.base",
    "Trigger": "harness.capabilities.base",
    "RequestContext": "harness.capabilities.context",
    "CompactionEvent": "harness.capabilities.context",
    "hookimpl": "harness.core.markers",
    "hookspec": "harness.core.markers",
    "PluginManager": "harness.hooks.manager",
    "warn_experimental": "harness.errors",
    "declare_experimental": "harness.errors",
    "is_experimental": "harness.errors",
    "PluginLoadWarning": "harness.errors",
    "Effects": "harness.core.effects",
    "InProcessEffects": "harness.core.effects",
    "ModelRequestUnit": "harness.core.effects",
    "ToolCallUnit": "harness.core.effects",
    "ToolOutcome": "harness.core.effects",
    "WorkflowIncompatibleError": "harness.errors",
    "Session": "harness.session",
    "SessionStore": "harness.session",
    "open_store": "harness.config.store",
    "CanonicalMessage": "harness.core.messages",
    "Part": "harness.core.messages",
    "UserPromptPart": "harness.core.messages",
    "SystemPromptPart": "harness.core.messages",
    "TextPart": "harness.core.messages",
    "ThoughtPart": "harness.core.messages",
    "ToolCallPart": "harness.core.messages",
    "ToolReturnPart": "harness.core.messages",
    "RetryPromptPart": "harness.core.messages",
    "UnknownPart": "harness.core.messages",
    "pin": "harness.core.pins",
    "is_pinned": "harness.core.pins",
    "Usage": "harness.core.messages",
    "load_messages": "harness.wire",
    "dump_messages": "harness.wire",
    "TokenCounter": "harness.tokens",
    "compact": "harness.run.compaction",
    "compact_sync": "harness.run.compaction",
    "CompactionResult": "harness.run.compaction",
    "ModelCall": "harness.capabilities.calls",
    "ToolCall": "harness.capabilities.calls",
    "RunStopped": "harness.errors",
    "ApprovalPendingError": "harness.errors",
    "ApprovalError": "harness.errors",
    "ModelContextLengthError": "harness.errors",
    "RunStream": "harness.run.stream",
    "MaskedURL": "harness.redaction",
}
"""Where each public name is defined."""


def __getattr__(name: str) -> Any:
    """Import a public name from the module that owns it, on first use."""
    owner = _OWNERS.get(name)
    if owner is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    value = getattr(importlib.import_module(owner), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
