"""harness-otel: OpenTelemetry spans for harness runs, following the GenAI semantic conventions.

Installing the distribution registers :data:`plugin` (an :class:`OTelPlugin` sending spans
to the global tracer provider) wherever harness loads entry-point plugins; register an
:class:`OTelPlugin` yourself to choose the tracer provider or turn content capture on.

Experimental: the first run whose spans are recorded (an SDK tracer provider is configured)
emits :class:`harness.HarnessExperimentalWarning` once per process, at the user's line;
installed but unused (no SDK), it says nothing.
"""

from harness import declare_experimental
from harness_otel import attributes
from harness_otel._plugin import (
    CAPTURE_CONTENT_ENV,
    INSTRUMENTATION_NAME,
    STATE_KEY,
    OTelPlugin,
    capture_content_from_env,
    compaction_attributes,
)

declare_experimental("harness_otel")

plugin = OTelPlugin()
"""The instance the ``plugin.otel`` entry point registers in every default plugin manager.

It uses the global tracer provider and follows the content-capture variable.
"""

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
