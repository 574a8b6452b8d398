"""harness runs as Temporal workflows: every model request, tool call and summarizer call an activity.

See the README. The public names::

    from harness_temporal import TemporalEngine, run_worker

    engine = TemporalEngine("127.0.0.1:7233", store_url="sqlite:///runs.db", agent="myapp:agent")
    handle = await engine.start("Do the task.")
    print((await handle.result()).output)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "ActivityOptions",
    "HarnessActivities",
    "HarnessRun",
    "RunHandle",
    "RunSpec",
    "TemporalEffects",
    "TemporalEngine",
    "TemporalRunError",
    "TemporalRunResult",
    "create_worker",
    "run_worker",
]

if TYPE_CHECKING:
    from harness_temporal.activities import HarnessActivities
    from harness_temporal.engine import (
        RunHandle,
        TemporalEngine,
        TemporalRunResult,
        create_worker,
        run_worker,
    )
    from harness_temporal.errors import TemporalRunError
    from harness_temporal.units import ActivityOptions, RunSpec
    from harness_temporal.workflow import HarnessRun, TemporalEffects

_OWNERS: dict[str, str] = {
    "HarnessActivities": "harness_temporal.activities",
    "RunHandle": "harness_temporal.engine",
    "TemporalEngine": "harness_temporal.engine",
    "TemporalRunResult": "harness_temporal.engine",
    "create_worker": "harness_temporal.engine",
    "run_worker": "harness_temporal.engine",
    "TemporalRunError": "harness_temporal.errors",
    "ActivityOptions": "harness_temporal.units",
    "RunSpec": "harness_temporal.units",
    "HarnessRun": "harness_temporal.workflow",
    "TemporalEffects": "harness_temporal.workflow",
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
