"""harness runs as DBOS workflows: every model request, tool call and summarizer call a journaled step.

* :class:`DBOSEngine`: start, enqueue and execute runs in this process;
* :class:`DBOSRunClient`: enqueue runs and wait for them from a process that executes none;
* ``python -m harness_dbos worker`` (or ``harness worker dbos``): a worker process;
* :class:`DBOSEffects`: the :class:`~harness.core.effects.Effects` the workflow runs the agent with.

The system database is SQLite (a file, the default) or PostgreSQL (many workers and
machines). See the README for what is journaled and how tools declare idempotency.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "APP_VERSION",
    "DEFAULT_QUEUE",
    "WORKFLOW_NAME",
    "DBOSEffects",
    "DBOSEngine",
    "DBOSRunClient",
    "JournalSerializer",
    "RunHandle",
    "RunSpec",
    "RunSummary",
    "configure_stores",
    "dbos_config",
    "run_workflow",
]

if TYPE_CHECKING:
    from harness.durable import RunSpec, RunSummary
    from harness_dbos.client import DBOSRunClient
    from harness_dbos.config import dbos_config
    from harness_dbos.effects import DBOSEffects
    from harness_dbos.engine import DBOSEngine
    from harness_dbos.runs import DEFAULT_QUEUE, RunHandle
    from harness_dbos.serializer import JournalSerializer
    from harness_dbos.workflow import APP_VERSION, WORKFLOW_NAME, configure_stores, run_workflow

_OWNERS: dict[str, str] = {
    "DBOSRunClient": "harness_dbos.client",
    "dbos_config": "harness_dbos.config",
    "DBOSEffects": "harness_dbos.effects",
    "DBOSEngine": "harness_dbos.engine",
    "DEFAULT_QUEUE": "harness_dbos.runs",
    "RunHandle": "harness_dbos.runs",
    "JournalSerializer": "harness_dbos.serializer",
    "RunSpec": "harness.durable",
    "RunSummary": "harness.durable",
    "APP_VERSION": "harness_dbos.workflow",
    "WORKFLOW_NAME": "harness_dbos.workflow",
    "run_workflow": "harness_dbos.workflow",
    "configure_stores": "harness_dbos.workflow",
}
"""Where each public name is defined: imported on first use, so loading the entry point (``resolver``)
does not import the engine's SDK."""


def __getattr__(name: str) -> Any:
    """Import a public name from the module that owns it, on first use."""
    owner = _OWNERS.get(name)
    if owner is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(owner), name)
    globals()[name] = value
    return value
