"""harness-otel: OpenTelemetry spans for harness runs, following the GenAI semantic conventions.

Installing the distribution registers :data:`plugin` (an :class:`OTelPlugin` sending spans
to the global tracer provider) wherever harness loads entry-point plugins; register an
:class:`OTelPlugin` yourself to choose the tracer provider or turn content capture on.

Experimental: importing this package emits :class:`harness.HarnessExperimentalWarning`
once per process.
"""

from harness import warn_experimental
from harness_otel import attributes
from harness_otel._plugin import (
    CAPTURE_CONTENT_ENV,
    INSTRUMENTATION_NAME,
    STATE_KEY,
    OTelPlugin,
    capture_content_from_env,
    compaction_attributes,
)

warn_experimental("harness_otel")

plugin = OTelPlugin()
"""The instance the ``otel`` entry point registers: the global tracer provider, content capture by env var."""

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "INSTRUMENTATION_NAME",
    "STATE_KEY",
    "OTelPlugin",
    "attributes",
    "capture_content_from_env",
    "compaction_attributes",
    "plugin",
]
