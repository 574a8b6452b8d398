"""The ``harness`` command line.

Each command lives in its own module and registers itself on the :data:`cli` group when
imported. Keep the imports below one module per line, in alphabetical order.
"""

from __future__ import annotations

__all__ = ["cli", "main"]

from harness.cli import (
    compact,
    demo_cmd,
    eval_cmd,
    hooks,
    inspect_cmd,
    plugins_cmd,
    replay,
    run,
    sessions,
    stats,
    worker,
)
from harness.cli._app import cli, main

del compact, demo_cmd, eval_cmd, hooks, inspect_cmd, plugins_cmd, replay, run, sessions, stats, worker
