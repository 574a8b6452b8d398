"""harness-model-fallback: send a failed model call to the next model.

A call that fails with a rate limit, an unavailable provider, a timeout or a context-length
refusal is sent to the next model of the list, with the settings the next provider would
reject stripped; the response records which model answered.

Experimental: importing this package emits :class:`harness.HarnessExperimentalWarning`
once per process.
"""

from harness import warn_experimental
from harness_model_fallback._fallback import (
    KIND_ERRORS,
    KINDS,
    NOTES_KEY,
    SOURCE,
    Attempt,
    FallbackKind,
    FallbackRecord,
    ModelFallback,
    error_kind,
)
from harness_model_fallback._settings import (
    PROVIDER_SETTINGS,
    SettingsAdapter,
    provider_family,
    strip_settings,
)

warn_experimental("harness_model_fallback")

__all__ = [
    "KINDS",
    "KIND_ERRORS",
    "NOTES_KEY",
    "PROVIDER_SETTINGS",
    "SOURCE",
    "Attempt",
    "FallbackKind",
    "FallbackRecord",
    "ModelFallback",
    "SettingsAdapter",
    "error_kind",
    "provider_family",
    "strip_settings",
]
