"""A run on a real Temporal dev server equals a plain run: results, stored session, request bodies."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from harness_temporal import TemporalEngine, create_worker
from harness_temporal.testing import DevServer

from harness.errors import SessionNotFoundError, WorkflowIncompatibleError
from harness.session import Session
from harness.stores import open_store
from harness.testing.durable import (
    SCENARIO_ENV,
    Scenario,
    canonical_history,
    recorded_requests,
    reference_run,
    request_bodies,
)


def stored_session(url: str, session_id: str) -> tuple[bytes, bytes]:
    """The canonical bytes of a stored session's view and of its whole transcript."""
    store = open_store(url)
    try:
        session = Session.open(store, session_id)
        return canonical_history(session.messages), canonical_history(session.transcript())
    finally:
        store.close()


async def test_run_equals_a_plain_run_with_compaction(
    engine_for: Callable[[Scenario], TemporalEngine], tmp_path: Path, queue: str
) -> None:
    scenario = Scenario(record_dir=str(tmp_path / "records"), steps=12, compaction=True)
    engine = engine_for(scenario)
    async with create_worker(await engine.client(), task_queue=queue):
        handle = await engine.start("Do the work.", session_id="e2e-session")
        result = await handle.result()
        size = await handle.history_size()
    reference = await reference_run(scenario, "Do the work.", "e2e-session", tmp_path / "reference")
    assert result.output == reference.output
    assert result.iterations == reference.iterations
    view, transcript = stored_session(engine.store_url, "e2e-session")
    assert view == canonical_history(reference.session.messages)
    # The log keeps every step, the compacted view does not.
    assert b'"call_12"' in transcript
    assert b'"call_1"' in transcript
    assert b'"call_1"' not in view
    # Byte-identical requests, summarizer calls included, each sent once.
    bodies = request_bodies(tmp_path / "records")
    assert bodies == request_bodies(tmp_path / "reference")
    assert len(recorded_requests(tmp_path / "records")) == len(bodies)
    assert any(r.capability for r in recorded_requests(tmp_path / "records"))
    assert size["events"] > 0
    assert size["payload_bytes"] > 0


async def test_history_stays_within_a_small_factor_of_the_transcript(
    engine_for: Callable[[Scenario], TemporalEngine], tmp_path: Path, queue: str
) -> None:
    steps, output = 30, 2000
    scenario = Scenario(
        record_dir=str(tmp_path / "records"), steps=steps, output_bytes=output, compaction=False
    )
    engine = engine_for(scenario)
    async with create_worker(await engine.client(), task_queue=queue):
        handle = await engine.start("Do the work.")
        await handle.result()
        size = await handle.history_size()
    transcript = len(stored_session(engine.store_url, handle.session_id)[1])
    whole = sum(len(r.body) for r in recorded_requests(tmp_path / "records"))
    assert transcript > steps * output
    # Each message is journaled about twice (as an activity's result, then in the next delta).
    assert size["bytes"] < 4 * transcript, (size, transcript)
    # Passing the whole history per unit would have cost several times more, growing with steps.
    assert whole > 5 * size["payload_bytes"], (whole, size)


def test_dev_server_fixture_answers(temporal_server: DevServer) -> None:
    host, _, port = temporal_server.address.rpartition(":")
    assert host == "127.0.0.1"
    assert int(port) > 0
    assert temporal_server.process.poll() is None
    assert (temporal_server.directory / "temporal.db").exists()


@pytest.mark.parametrize("missing", ["harness.testing.durable:no_such_agent"])
async def test_an_agent_that_does_not_load_fails_the_start(
    temporal_server: DevServer, tmp_path: Path, missing: str
) -> None:
    from harness.errors import AgentLoadError

    engine = TemporalEngine(
        temporal_server.address, store_url=f"sqlite:///{tmp_path / 's.db'}", agent=missing
    )
    with pytest.raises(AgentLoadError, match="no_such_agent"):
        await engine.start("hi")


async def test_a_fresh_run_on_a_worker_with_another_agent_fails_typed(
    engine_for: Callable[[Scenario], TemporalEngine],
    tmp_path: Path,
    queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scenario = Scenario(record_dir=str(tmp_path / "records"), steps=2, compaction=False)
    engine = engine_for(scenario)
    engine.fingerprint()  # taken here, with the starting process's agent
    changed = Scenario(record_dir=str(tmp_path / "records"), steps=2, compaction=True)
    monkeypatch.setenv(SCENARIO_ENV, changed.to_json())  # the worker builds another stack
    async with create_worker(await engine.client(), task_queue=queue):
        handle = await engine.start("Do the work.", session_id="fresh-changed")
        with pytest.raises(WorkflowIncompatibleError) as caught:
            await handle.result()
    assert caught.value.changed == ("capabilities",)
    assert caught.value.run_id == handle.workflow_id
    assert recorded_requests(tmp_path / "records") == []
    store = open_store(engine.store_url)
    try:
        with pytest.raises(SessionNotFoundError):
            store.load("fresh-changed")
    finally:
        store.close()


def test_harness_worker_temporal_is_served_by_the_plugin() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from harness.cli import main; main()", "worker", "temporal", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Usage: harness worker temporal" in done.stdout
    assert "--task-queue" in done.stdout
