"""Longer kill suites (``-m slow``): kill points with compaction, and many runs on two workers."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from harness_temporal import TemporalEngine

from harness.testing.durable import (
    BLOCKED_FILE,
    Scenario,
    assert_exactly_once,
    canonical_history,
    recorded_requests,
    recorded_tool_calls,
    reference_run,
    request_bodies,
    wait_for,
)

from .test_temporal_kills import PROMPT, _crash_and_resume, _stored

Spawn = Callable[[Scenario], subprocess.Popen[bytes]]
pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _only_when_selected(request: pytest.FixtureRequest) -> None:
    markexpr = str(request.config.getoption("markexpr", "") or "")
    if os.environ.get("HARNESS_SLOW") != "1" and ("slow" not in markexpr or "not slow" in markexpr):
        pytest.skip("a slow fault-injection suite: run it with -m slow (or HARNESS_SLOW=1)")


@pytest.mark.parametrize(
    ("block_tool", "block_request"),
    [(None, 1), (None, 4), (None, 9), (2, None), (7, None), (11, None)],
)
async def test_kill_points_with_compaction_replay_byte_identical(
    engine_for: Callable[[Scenario], TemporalEngine],
    spawn_worker: Spawn,
    tmp_path: Path,
    block_tool: int | None,
    block_request: int | None,
) -> None:
    records = tmp_path / "records"
    scenario = Scenario(
        record_dir=str(records), steps=12, compaction=True, block_tool=block_tool, block_request=block_request
    )
    engine = engine_for(scenario)
    stored, _, _ = await _crash_and_resume(scenario, engine, spawn_worker, "slow-session")
    reference = await reference_run(scenario, PROMPT, "slow-session", tmp_path / "reference")
    assert canonical_history(stored.messages) == canonical_history(reference.session.messages)
    assert request_bodies(records) == request_bodies(tmp_path / "reference")
    assert any(r.capability for r in recorded_requests(records))  # the summarizer ran
    assert_exactly_once(records)


def in_flight_repeats_only(records: Path, victim: int) -> list[str]:
    """What was done twice other than each run's last unit on the killed worker (which may run once more).

    With many runs on the killed worker, every run it was serving had a unit in flight: a
    request that reached the model, or an idempotent tool that may even have ended, whose
    result never reached Temporal. That unit is retried; nothing else may be.
    """
    problems: list[str] = []
    requests = recorded_requests(records)
    tools = recorded_tool_calls(records)
    for run in sorted({r.run for r in requests if r.run is not None}):
        last_request = [r.digest for r in requests if r.run == run and r.pid == victim][-1:]
        last_tool = [c.call_id for c in tools if c.run == run and c.pid == victim and c.event == "start"][-1:]
        counts: dict[str, int] = {}
        for record in requests:
            if record.run == run:
                counts[record.digest] = counts.get(record.digest, 0) + 1
        for digest, count in counts.items():
            if count > (2 if digest in last_request else 1):
                problems.append(f"run {run}: a request reached the model {count} times")
        starts: dict[str, list[str]] = {}
        for call in tools:
            if call.run == run and call.event == "start":
                starts.setdefault(call.call_id, []).append(call.tool)
        for call_id, names in starts.items():
            allowed = 2 if call_id in last_tool and names[0] == "work" else 1
            if len(names) > allowed:
                problems.append(f"run {run}: tool call {call_id} started {len(names)} times")
    return problems


async def test_many_runs_on_two_workers_one_killed(
    engine_for: Callable[[Scenario], TemporalEngine], spawn_worker: Spawn, tmp_path: Path
) -> None:
    records = tmp_path / "records"
    scenario = Scenario(record_dir=str(records), steps=6, block_tool=4, compaction=False)
    engine = engine_for(scenario)
    workers = [spawn_worker(scenario), spawn_worker(scenario)]
    sessions = [f"many-{i}" for i in range(8)]
    handles = [await engine.start(PROMPT, session_id=s) for s in sessions]
    await asyncio.to_thread(wait_for, records / BLOCKED_FILE, 60)
    blocked_pid = int(json.loads((records / BLOCKED_FILE).read_text())["pid"])
    victim = next(w for w in workers if w.pid == blocked_pid)
    victim.send_signal(signal.SIGKILL)
    await asyncio.to_thread(victim.wait, 10)
    spawn_worker(scenario)
    results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 120)
    assert [r.session_id for r in results] == sessions
    assert in_flight_repeats_only(records, victim.pid) == []
    for session_id in sessions:
        reference = await reference_run(scenario, PROMPT, session_id, tmp_path / f"reference-{session_id}")
        stored = _stored(engine.store_url, session_id)
        assert canonical_history(stored.messages) == canonical_history(reference.session.messages)
