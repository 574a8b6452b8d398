"""The pluggy markers of the ``harness`` project."""

from __future__ import annotations

__all__ = ["PROJECT_NAME", "hookimpl", "hookspec"]

import pluggy

PROJECT_NAME = "harness"
"""pluggy project name, also the entry-point group plugins register under."""

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
"""Marks a hook specification (used by :mod:`harness.hooks.specs`)."""

hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
"""Marks a hook implementation in a plugin or capability."""
