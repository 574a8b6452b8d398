"""The ``harness`` command line.

Each command lives in its own module and registers itself on the :data:`cli` group when imported.
"""

from __future__ import annotations

__all__ = ["cli", "main"]

from harness.cli import compact, demo, plugins_cmd, sessions, stats
from harness.cli._app import cli, main

del compact, demo, plugins_cmd, sessions, stats
