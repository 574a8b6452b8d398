"""The ``resolve_engine`` hook: ``harness worker temporal ...`` runs this plugin's worker.

This module is the plugin: the ``harness`` entry point ``temporal`` names it, so
``PluginManager.load_entrypoint_plugins()`` registers it. It imports nothing heavy: the
worker command (and temporalio) load only when the engine is asked for.
"""

from __future__ import annotations

__all__ = ["resolve_engine"]

from harness.hooks import hookimpl


@hookimpl
def resolve_engine(name: str) -> object | None:
    """The ``temporal`` worker command for ``name == "temporal"``; ``None`` for any other.

    ``harness worker temporal --address HOST:PORT --agent MODULE:ATTR`` runs it (the same
    command as ``python -m harness_temporal worker``).
    """
    if name.lower() != "temporal":
        return None
    from harness_temporal.cli import worker

    return worker
