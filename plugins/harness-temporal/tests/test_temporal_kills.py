"""SIGKILL a real worker process mid-run: a new worker finishes it, nothing is done twice."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from harness_temporal import TemporalEngine

from harness.core.messages import TextPart, ToolReturnPart
from harness.durable.resume import OUTCOME_UNKNOWN_CONTENT
from harness.errors import WorkflowIncompatibleError
from harness.session import Session
from harness.stores import open_store
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

Spawn = Callable[[Scenario], subprocess.Popen[bytes]]
PROMPT = "Do the work."


async def _kill_at_block(worker: subprocess.Popen[bytes], records: Path) -> None:
    await asyncio.to_thread(wait_for, records / BLOCKED_FILE, 60, process=worker)
    worker.send_signal(signal.SIGKILL)
    await asyncio.to_thread(worker.wait, 10)


def _stored(url: str, session_id: str) -> Session:
    store = open_store(url)
    try:
        session = Session.open(store, session_id)
        session.store = None
        return session
    finally:
        store.close()


async def _crash_and_resume(
    scenario: Scenario, engine: TemporalEngine, spawn: Spawn, session_id: str
) -> tuple[Session, subprocess.Popen[bytes], subprocess.Popen[bytes]]:
    first = spawn(scenario)
    handle = await engine.start(PROMPT, session_id=session_id)
    await _kill_at_block(first, Path(scenario.record_dir))
    second = spawn(scenario)
    result = await asyncio.wait_for(handle.result(), 90)
    assert result.session_id == session_id
    return _stored(engine.store_url, session_id), first, second


@pytest.mark.parametrize(
    ("block_tool", "block_request", "compaction"),
    [(4, None, False), (None, 5, True)],
    ids=["during-idempotent-tool", "during-model-request-with-compaction"],
)
async def test_killed_worker_resumes_to_the_same_history(
    engine_for: Callable[[Scenario], TemporalEngine],
    spawn_worker: Spawn,
    tmp_path: Path,
    block_tool: int | None,
    block_request: int | None,
    compaction: bool,
) -> None:
    records = tmp_path / "records"
    scenario = Scenario(
        record_dir=str(records),
        steps=8,
        compaction=compaction,
        block_tool=block_tool,
        block_request=block_request,
    )
    engine = engine_for(scenario)
    stored, first, second = await _crash_and_resume(scenario, engine, spawn_worker, "kill-session")
    reference = await reference_run(scenario, PROMPT, "kill-session", tmp_path / "reference")
    assert canonical_history(stored.messages) == canonical_history(reference.session.messages)
    assert_exactly_once(records)
    # Byte-identical requests to an uninterrupted run's (compaction and LimitWarner active in one case).
    assert request_bodies(records) == request_bodies(tmp_path / "reference")
    pids = {r.pid for r in recorded_requests(records)}
    assert pids == {first.pid, second.pid}
    if block_tool is not None:
        starts = [c for c in recorded_tool_calls(records) if c.call_id == "call_4" and c.event == "start"]
        assert [c.pid for c in starts] == [first.pid, second.pid]  # the idempotent tool ran again
    else:
        blocked = [r for r in recorded_requests(records) if r.pid == first.pid][-1]
        again = [r for r in recorded_requests(records) if r.pid == second.pid and r.body == blocked.body]
        assert len(again) == 1  # the request in flight was sent once more, by the new worker


async def test_killed_during_a_non_idempotent_tool_answers_outcome_unknown(
    engine_for: Callable[[Scenario], TemporalEngine], spawn_worker: Spawn, tmp_path: Path
) -> None:
    records = tmp_path / "records"
    scenario = Scenario(record_dir=str(records), steps=6, block_tool=3, idempotent=False, compaction=False)
    engine = engine_for(scenario)
    stored, first, _ = await _crash_and_resume(scenario, engine, spawn_worker, "email-session")
    assert_exactly_once(records)
    emails = [c for c in recorded_tool_calls(records) if c.tool == "send_email"]
    assert [(c.event, c.pid) for c in emails] == [("start", first.pid)]  # never run again
    answers = [
        p
        for m in stored.messages
        for p in m.parts
        if isinstance(p, ToolReturnPart) and p.tool_call_id == "call_3"
    ]
    assert [p.content for p in answers] == [OUTCOME_UNKNOWN_CONTENT]
    assert stored.ledger["call_3"].status != "started"
    final = stored.messages[-1]
    text = " ".join(p.content for p in final.parts if isinstance(p, TextPart))
    assert final.kind == "response"
    assert "Done after 6 steps" in text


async def test_an_incompatible_agent_on_resume_is_refused(
    engine_for: Callable[[Scenario], TemporalEngine], spawn_worker: Spawn, tmp_path: Path
) -> None:
    records = tmp_path / "records"
    scenario = Scenario(record_dir=str(records), steps=6, block_tool=3, compaction=False)
    engine = engine_for(scenario)
    first = spawn_worker(scenario)
    handle = await engine.start(PROMPT, session_id="changed-session")
    await _kill_at_block(first, records)
    before = _stored(engine.store_url, "changed-session")
    changed = Scenario(record_dir=str(records), steps=6, block_tool=3, compaction=True)  # a new stack
    spawn_worker(changed)
    with pytest.raises(WorkflowIncompatibleError, match="capabilities") as caught:
        await asyncio.wait_for(handle.result(), 60)
    assert caught.value.run_id == handle.workflow_id
    assert "capabilities" in caught.value.changed
    after = _stored(engine.store_url, "changed-session")
    assert after.revision == before.revision  # the session was not touched
    assert canonical_history(after.messages) == canonical_history(before.messages)


async def test_a_worker_stopped_gracefully_writes_nothing_while_evicted(
    engine_for: Callable[[Scenario], TemporalEngine], spawn_worker: Spawn, tmp_path: Path
) -> None:
    """SIGTERM: the worker shuts down and evicts the run; its clean-up must not write a "stopped" session."""
    records = tmp_path / "records"
    scenario = Scenario(record_dir=str(records), steps=6, block_tool=3, compaction=False)
    engine = engine_for(scenario)
    first = spawn_worker(scenario)
    handle = await engine.start(PROMPT, session_id="term-session")
    await asyncio.to_thread(wait_for, records / BLOCKED_FILE, 60, process=first)
    before = _stored(engine.store_url, "term-session")
    first.send_signal(signal.SIGTERM)
    status = await asyncio.to_thread(first.wait, 30)
    assert status == 0, (tmp_path / "worker-1.log").read_text(errors="replace")
    after = _stored(engine.store_url, "term-session")
    assert after.revision == before.revision
    spawn_worker(scenario)
    await asyncio.wait_for(handle.result(), 90)
    reference = await reference_run(scenario, PROMPT, "term-session", tmp_path / "reference")
    final = _stored(engine.store_url, "term-session")
    assert canonical_history(final.messages) == canonical_history(reference.session.messages)
    assert_exactly_once(records)
