"""Workers SIGKILLed during a tool call and during a model request: a new worker resumes the run.

Each test enqueues one run of the durable scenario, lets a worker process (executor id
``w1``) run it until the scenario blocks (in a tool, or in the model), SIGKILLs it, starts
a new worker process with the same executor id (DBOS recovers the dead executor's pending
runs on launch) and waits for the run. The records of the scenario's model and tools show
what reached the model and which tools ran, in which process; the plain run of the same
scenario (``Agent.run`` in process) is the reference.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from harness_dbos import DBOSRunClient, RunSummary
from harness_dbos.scenarios import AGENT, PROMPT, plain_run, stored_session
from harness_dbos.testing import WorkerProcess

from harness import Session, open_store
from harness.durable.resume import OUTCOME_UNKNOWN_CONTENT
from harness.testing.durable import (
    BLOCKED_FILE,
    SCENARIO_ENV,
    Scenario,
    assert_exactly_once,
    recorded_requests,
    recorded_tool_calls,
    request_bodies,
    wait_for,
)

SESSION = "0123456789abcdef0123456789abcdef"


async def crash_and_resume(
    system_db: str,
    store_url: str,
    scenario: Scenario,
    spawn: Callable[..., WorkerProcess],
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[RunSummary, int, int]:
    """Run ``scenario`` in a worker, kill it at the block point, resume in a new one; (summary, pids)."""
    monkeypatch.setenv(SCENARIO_ENV, scenario.to_json())
    first = spawn(system_db, env=scenario.env(), executor_id="w1")
    client = DBOSRunClient(system_db, store_url=store_url, agent=AGENT, polling_interval=0.1)
    try:
        handle = await client.enqueue(PROMPT, SESSION)
        blocked = Path(scenario.record_dir) / BLOCKED_FILE
        await asyncio.to_thread(wait_for, blocked, 90, process=first.process, what="the block point")
        first.kill()
        second = spawn(system_db, env=scenario.env(), executor_id="w1")
        summary = await asyncio.wait_for(handle.result(), 120)
    finally:
        client.close()
    return summary, first.pid, second.pid


def _starts(record_dir: Path, call_id: str) -> list[int]:
    return [c.pid for c in recorded_tool_calls(record_dir) if c.call_id == call_id and c.event == "start"]


async def test_killed_in_an_idempotent_tool_the_tool_runs_again_and_the_history_is_the_same(
    sqlite_system_db: str,
    sqlite_store_url: str,
    record_dir: Path,
    tmp_path: Path,
    spawn: Callable[..., WorkerProcess],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scenario = Scenario(record_dir=str(record_dir), steps=6, block_tool=3, idempotent=True)
    summary, dead, alive = await crash_and_resume(
        sqlite_system_db, sqlite_store_url, scenario, spawn, monkeypatch
    )
    assert summary.output is not None
    assert summary.output.startswith("Done after 6 steps")
    assert_exactly_once(record_dir)
    assert _starts(record_dir, "call_3") == [dead, alive]  # interrupted, idempotent: run again
    for n in (1, 2):
        assert _starts(record_dir, f"call_{n}") == [dead]  # completed before the kill: never again
    for n in (4, 5, 6):
        assert _starts(record_dir, f"call_{n}") == [alive]
    view, transcript = stored_session(sqlite_store_url, SESSION)
    plain_view, plain_transcript, plain_bodies = await plain_run(scenario, SESSION, tmp_path)
    assert (view, transcript) == (plain_view, plain_transcript)
    assert request_bodies(record_dir) == plain_bodies


async def test_killed_in_a_tool_that_is_not_idempotent_the_model_is_told_the_outcome_is_unknown(
    sqlite_system_db: str,
    sqlite_store_url: str,
    record_dir: Path,
    spawn: Callable[..., WorkerProcess],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scenario = Scenario(record_dir=str(record_dir), steps=5, block_tool=2, idempotent=False, compaction=False)
    summary, dead, _ = await crash_and_resume(
        sqlite_system_db, sqlite_store_url, scenario, spawn, monkeypatch
    )
    assert summary.output is not None
    assert summary.output.startswith("Done after 5 steps")
    assert_exactly_once(record_dir, idempotent_tools=("work",))
    email = [c for c in recorded_tool_calls(record_dir) if c.call_id == "call_2"]
    assert [(c.tool, c.event, c.pid) for c in email] == [("send_email", "start", dead)]  # never ran again
    store = open_store(sqlite_store_url)
    try:
        session = Session.open(store, SESSION)
        returns = [
            part
            for message in session.transcript()
            for part in message.parts
            if getattr(part, "tool_call_id", None) == "call_2" and message.kind == "request"
        ]
        assert len(returns) == 1
        assert getattr(returns[0], "content", None) == OUTCOME_UNKNOWN_CONTENT
        assert session.ledger["call_2"].status != "started"
    finally:
        store.close()


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
async def test_killed_in_a_model_request_the_resumed_run_sends_byte_identical_requests(
    database: str,
    request: pytest.FixtureRequest,
    record_dir: Path,
    tmp_path: Path,
    spawn: Callable[..., WorkerProcess],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if database == "sqlite":
        system_db, store_url = (
            request.getfixturevalue("sqlite_system_db"),
            request.getfixturevalue("sqlite_store_url"),
        )
    else:
        system_db, store_url = (
            request.getfixturevalue("pg_system_db"),
            request.getfixturevalue("pg_store_url"),
        )
    # Tiered compaction (with summarizer calls) and LimitWarner active; killed after several compactions.
    scenario = Scenario(record_dir=str(record_dir), steps=12, block_request=14, compaction=True)
    summary, dead, alive = await crash_and_resume(system_db, store_url, scenario, spawn, monkeypatch)
    assert summary.output is not None
    assert summary.output.startswith("Done after 12 steps")
    assert_exactly_once(record_dir)
    arrivals = recorded_requests(record_dir)
    before = [r for r in arrivals if r.pid == dead]
    after = [r for r in arrivals if r.pid == alive]
    assert len(before) == 14
    assert any(r.capability for r in before)
    assert after[0].body == before[-1].body  # only the request in flight at the kill is seen again
    assert {r.body for r in before[:-1]}.isdisjoint({r.body for r in after})
    plain_view, plain_transcript, plain_bodies = await plain_run(scenario, SESSION, tmp_path)
    assert request_bodies(record_dir) == plain_bodies  # byte for byte, capability calls included
    assert stored_session(store_url, SESSION) == (plain_view, plain_transcript)
