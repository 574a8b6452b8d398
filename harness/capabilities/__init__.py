"""What capability authors use: the ``Capability`` base, triggers, the request context and events.

``ModelCall`` and ``ToolCall`` are what the middleware hooks (``wrap_model_request``,
``wrap_tool_call``) receive.

Run a stack outside an agent with :func:`harness.compact` (defined in :mod:`harness.run.compaction`).
"""

from __future__ import annotations

from harness.capabilities.base import Capability, Trigger
from harness.capabilities.cache import CacheVerdict, cache_pays, check_cache_settings, remaining_requests
from harness.capabilities.calls import ModelCall, ToolCall
from harness.capabilities.context import CompactionEvent, RequestContext

__all__ = [
    "CacheVerdict",
    "Capability",
    "CompactionEvent",
    "ModelCall",
    "RequestContext",
    "ToolCall",
    "Trigger",
    "cache_pays",
    "check_cache_settings",
    "remaining_requests",
]
