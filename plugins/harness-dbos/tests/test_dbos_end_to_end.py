"""A run as a DBOS workflow, in process, on SQLite and on PostgreSQL: same session as a plain run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from harness_dbos import DBOSEngine, RunSummary
from harness_dbos.scenarios import AGENT, PROMPT, plain_run, stored_session, without_blocking
from harness_dbos.testing import journal_sizes

from harness.cli import cli
from harness.testing.durable import SCENARIO_ENV, Scenario, request_bodies


@pytest.fixture
def engines() -> Iterator[list[DBOSEngine]]:
    made: list[DBOSEngine] = []
    yield made
    for engine in made:
        engine.shutdown()


async def _check_end_to_end(
    system_db: str,
    store_url: str,
    record_dir: Path,
    tmp_path: Path,
    engines: list[DBOSEngine],
    monkeypatch: pytest.MonkeyPatch,
) -> RunSummary:
    scenario = Scenario(record_dir=str(record_dir), steps=8, compaction=True)
    monkeypatch.setenv(SCENARIO_ENV, scenario.to_json())
    without_blocking(record_dir)
    engine = DBOSEngine(system_db, store_url=store_url, agent=AGENT, polling_interval=0.1, listen=False)
    engines.append(engine)
    engine.launch()
    handle = await engine.start(PROMPT)
    summary = await handle.result()
    assert summary.session_id == handle.session_id
    assert summary.run_id == handle.workflow_id
    assert summary.output is not None
    assert summary.output.startswith("Done after 8 steps")
    assert summary.iterations == 9
    assert summary.usage["request_tokens"] > 0

    view, transcript = stored_session(store_url, summary.session_id)
    plain_view, plain_transcript, plain_bodies = await plain_run(scenario, summary.session_id, tmp_path)
    assert view == plain_view
    assert transcript == plain_transcript
    assert request_bodies(record_dir) == plain_bodies

    # A second run on the same session continues it, as a plain second run would.
    again = await (await engine.start("And once more.", summary.session_id)).result()
    assert again.session_id == summary.session_id
    assert again.revision > summary.revision

    sizes = journal_sizes(system_db)
    assert sizes.steps > 2 * 9  # snapshot + every model request and tool call, of both runs
    # Only unit outputs are journaled: far less than the transcript the requests were built from.
    assert sizes.operation_outputs < 2 * len(transcript)
    return summary


async def test_a_run_on_sqlite_writes_the_same_session_as_a_plain_run(
    sqlite_system_db: str,
    sqlite_store_url: str,
    record_dir: Path,
    tmp_path: Path,
    engines: list[DBOSEngine],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    summary = await _check_end_to_end(
        sqlite_system_db, sqlite_store_url, record_dir, tmp_path, engines, monkeypatch
    )
    shown = CliRunner().invoke(
        cli, ["sessions", "show", summary.session_id, "--json", "--store", sqlite_store_url]
    )
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)
    assert summary.session_id in json.dumps(data)


async def test_a_run_on_postgresql_writes_the_same_session_as_a_plain_run(
    pg_system_db: str,
    pg_store_url: str,
    record_dir: Path,
    tmp_path: Path,
    engines: list[DBOSEngine],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await _check_end_to_end(pg_system_db, pg_store_url, record_dir, tmp_path, engines, monkeypatch)
