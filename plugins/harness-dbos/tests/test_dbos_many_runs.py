"""Many runs enqueued on one PostgreSQL system database, two worker processes, one SIGKILLed halfway.

Both workers run one run at a time (``--concurrency 1``), so the worker that the scenario
blocks (the first to reach a run's third model request) runs nothing else when it is
killed: the only effect in flight is that request. Once half the runs have finished, that
worker is SIGKILLed and started again with its executor id, and DBOS resumes its run there.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from harness_dbos import DBOSRunClient
from harness_dbos.scenarios import AGENT, PROMPT, stored_session
from harness_dbos.testing import WorkerProcess, count_workflows

from harness.testing.durable import (
    BLOCKED_FILE,
    SCENARIO_ENV,
    Scenario,
    assert_exactly_once,
    recorded_requests,
    wait_for,
)


async def _many_runs(
    runs: int,
    system_db: str,
    store_url: str,
    record_dir: Path,
    spawn: Callable[..., WorkerProcess],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scenario = Scenario(
        record_dir=str(record_dir), steps=4, output_bytes=200, block_request=3, compaction=False
    )
    monkeypatch.setenv(SCENARIO_ENV, scenario.to_json())
    workers = {
        name: spawn(system_db, env=scenario.env(), executor_id=name, concurrency=1) for name in ("w1", "w2")
    }
    client = DBOSRunClient(system_db, store_url=store_url, agent=AGENT, polling_interval=0.1)
    try:
        handles = [await client.enqueue(PROMPT) for _ in range(runs)]
        await asyncio.to_thread(wait_for, record_dir / BLOCKED_FILE, 90, what="a blocked run")
        await asyncio.to_thread(
            wait_for, lambda: count_workflows(system_db, "SUCCESS") >= runs // 2, 120, what="half the runs"
        )
        blocked_pid = json.loads((record_dir / BLOCKED_FILE).read_text())["pid"]
        (victim,) = [name for name, worker in workers.items() if worker.pid == blocked_pid]
        workers[victim].kill()
        assert count_workflows(system_db, "SUCCESS") < runs  # the blocked run is not done
        spawn(system_db, env=scenario.env(), executor_id=victim, concurrency=1)
        summaries = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 180)
    finally:
        client.close()
    assert count_workflows(system_db, "SUCCESS") == runs
    assert sorted(s.session_id for s in summaries) == sorted(h.session_id for h in handles if h.session_id)
    assert_exactly_once(record_dir)
    arrivals = recorded_requests(record_dir)
    for summary in summaries:
        assert summary.output is not None
        assert summary.output.startswith("Done after 4 steps")
        mine = [r for r in arrivals if r.run == summary.session_id]
        finals = [r for r in mine if r.body == mine[-1].body]
        assert len(finals) == 1  # the run's final request reached the model exactly once
        assert len({r.body for r in mine}) == summary.iterations == 5
        stored_session(store_url, summary.session_id)  # loads, and its history is valid


async def test_six_runs_two_workers_one_killed_every_run_completes_exactly_once(
    pg_system_db: str,
    pg_store_url: str,
    record_dir: Path,
    spawn: Callable[..., WorkerProcess],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await _many_runs(6, pg_system_db, pg_store_url, record_dir, spawn, monkeypatch)


def _slow_selected(request: pytest.FixtureRequest) -> bool:
    markexpr = str(request.config.getoption("markexpr", "") or "")
    return os.environ.get("HARNESS_SLOW") == "1" or ("slow" in markexpr and "not slow" not in markexpr)


@pytest.mark.slow
async def test_twenty_runs_two_workers_one_killed_every_run_completes_exactly_once(
    request: pytest.FixtureRequest,
    pg_system_db: str,
    pg_store_url: str,
    record_dir: Path,
    spawn: Callable[..., WorkerProcess],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not _slow_selected(request):
        pytest.skip("a slow fault-injection suite: run it with -m slow (or HARNESS_SLOW=1)")
    await _many_runs(20, pg_system_db, pg_store_url, record_dir, spawn, monkeypatch)
