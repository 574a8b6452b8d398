"""harness runs as Temporal workflows: every model request, tool call and summarizer call an activity.

See the README. The public names::

    from harness_temporal import TemporalEngine, run_worker

    engine = TemporalEngine("127.0.0.1:7233", store_url="sqlite:///runs.db", agent="myapp:agent")
    handle = await engine.start("Do the task.")
    print((await handle.result()).output)
"""

from __future__ import annotations

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

from harness_temporal.activities import HarnessActivities
from harness_temporal.engine import RunHandle, TemporalEngine, TemporalRunResult, create_worker, run_worker
from harness_temporal.errors import TemporalRunError
from harness_temporal.units import ActivityOptions, RunSpec
from harness_temporal.workflow import HarnessRun, TemporalEffects
