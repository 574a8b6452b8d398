"""A run whose agent or journal changed between the crash and the resume is refused, typed, untouched."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from harness_dbos import DBOSRunClient
from harness_dbos.scenarios import AGENT, PROMPT
from harness_dbos.testing import WorkerProcess

from harness import open_store
from harness.durable import snapshot_session
from harness.errors import WorkflowIncompatibleError
from harness.testing.durable import BLOCKED_FILE, SCENARIO_ENV, Scenario, recorded_requests, wait_for

SESSION = "fedcba9876543210fedcba9876543210"


def _snapshot(store_url: str) -> str | None:
    store = open_store(store_url)
    try:
        return snapshot_session(store, SESSION)
    finally:
        store.close()


async def _refused(
    system_db: str,
    store_url: str,
    scenario: Scenario,
    resumed_with: Scenario,
    spawn: Callable[..., WorkerProcess],
    monkeypatch: pytest.MonkeyPatch,
    tamper: Callable[[], None] | None = None,
) -> WorkflowIncompatibleError:
    monkeypatch.setenv(SCENARIO_ENV, scenario.to_json())
    first = spawn(system_db, env=scenario.env(), executor_id="w1")
    client = DBOSRunClient(system_db, store_url=store_url, agent=AGENT, polling_interval=0.1)
    try:
        handle = await client.enqueue(PROMPT, SESSION)
        blocked = Path(scenario.record_dir) / BLOCKED_FILE
        await asyncio.to_thread(wait_for, blocked, 90, process=first.process, what="the block point")
        first.kill()
        if tamper is not None:
            tamper()
        before = _snapshot(store_url)
        requests_before = len(recorded_requests(scenario.record_dir))
        spawn(system_db, env=resumed_with.env(), executor_id="w1")
        with pytest.raises(WorkflowIncompatibleError) as caught:
            await asyncio.wait_for(handle.result(), 90)
    finally:
        client.close()
    assert before is not None
    assert _snapshot(store_url) == before  # the session was not touched
    assert len(recorded_requests(scenario.record_dir)) == requests_before  # nothing sent
    return caught.value


@pytest.mark.parametrize(
    ("change", "component"),
    [({"compaction": False}, "capabilities"), ({"steps": 9}, "settings")],
    ids=["stack", "settings"],
)
async def test_a_changed_agent_refuses_the_run(
    change: dict[str, Any],
    component: str,
    sqlite_system_db: str,
    sqlite_store_url: str,
    record_dir: Path,
    spawn: Callable[..., WorkerProcess],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scenario = Scenario(record_dir=str(record_dir), steps=6, block_tool=3)
    error = await _refused(
        sqlite_system_db, sqlite_store_url, scenario, attrs.evolve(scenario, **change), spawn, monkeypatch
    )
    assert component in error.changed
    assert error.run_id is not None
    assert error.run_id.startswith("harness-")
    assert component in str(error)


async def test_a_journal_that_does_not_fit_the_run_refuses_it(
    sqlite_system_db: str,
    sqlite_store_url: str,
    record_dir: Path,
    spawn: Callable[..., WorkerProcess],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scenario = Scenario(record_dir=str(record_dir), steps=6, block_tool=3, compaction=False)
    database = sqlite_system_db.removeprefix("sqlite:///")

    def tamper() -> None:  # as if the run had called a tool where this code makes a model request
        with sqlite3.connect(database) as conn:
            conn.execute(
                "UPDATE operation_outputs SET function_name = 'harness.tool_call:work' WHERE function_id = 2"
            )

    error = await _refused(
        sqlite_system_db, sqlite_store_url, scenario, scenario, spawn, monkeypatch, tamper=tamper
    )
    assert "diverged from its journal" in str(error)
