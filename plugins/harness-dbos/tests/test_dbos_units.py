"""The pieces on their own: serializer, workflow input and result, the hook, the command line."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from harness_dbos import JournalSerializer, RunSpec, RunSummary
from harness_dbos.config import system_database_url
from harness_dbos.resolver import resolve_engine

from harness.durable import StoreReference
from harness.errors import WorkflowIncompatibleError
from harness.hooks import PluginManager


def test_serializer_writes_strings_verbatim_and_pickles_the_rest() -> None:
    serializer = JournalSerializer()
    text = '{"at":"x","response":{"kind":"response","parts":[]}}'
    assert serializer.serialize(text) == "=" + text
    assert serializer.deserialize(serializer.serialize(text)) == text
    assert serializer.deserialize(serializer.serialize("")) == ""
    value: dict[str, Any] = {"args": ("a", 1), "kwargs": {}}
    stored = serializer.serialize(value)
    assert not stored.startswith("=")
    assert serializer.deserialize(stored) == value
    error = WorkflowIncompatibleError("changed", run_id="w", changed=("tools",))
    back = serializer.deserialize(serializer.serialize(error))
    assert isinstance(back, WorkflowIncompatibleError)
    assert (back.run_id, back.changed) == ("w", ("tools",))


def test_spec_and_summary_round_trip() -> None:
    spec = RunSpec(
        agent="pkg.mod:agent",
        store=StoreReference(url="sqlite:///s.db"),
        session_id="abc",
        prompt="héllo",
        fingerprint={"model": "1", "tools": "2"},
        started_at=datetime(2026, 1, 2, 3, 4, 5, 678, tzinfo=UTC),
        working_directory="/w",
    )
    assert RunSpec.from_json(spec.to_json()) == spec
    assert RunSpec.from_json(spec.to_text()) == spec
    summary = RunSummary("wf", "abc", "out", 7, 3, 12, {"request_tokens": 5}, 2)
    assert RunSummary.from_json(summary.to_json()) == summary


@pytest.mark.parametrize(
    "text", ["not json", "[]", '{"version": 99}', '{"version": 1, "agent": "a"}', '{"version": 2}'], ids=str
)
def test_a_spec_of_another_version_or_shape_is_refused_with_a_typed_error(text: str) -> None:
    with pytest.raises(WorkflowIncompatibleError):
        RunSpec.from_json(text)


def test_system_database_urls(tmp_path: Path) -> None:
    assert system_database_url("postgres://u@h/db") == "postgresql://u@h/db"
    assert system_database_url("sqlite:///x.sqlite") == "sqlite:///x.sqlite"
    assert system_database_url(tmp_path / "a.sqlite") == f"sqlite:///{tmp_path / 'a.sqlite'}"


def test_the_entry_point_answers_resolve_engine_for_dbos_only() -> None:
    manager = PluginManager()
    manager.load_entrypoint_plugins()
    command = manager.resolve_engine("dbos")
    assert isinstance(command, click.Command)
    assert command is resolve_engine("DBOS")
    assert resolve_engine("temporal") is None


def test_harness_worker_dbos_shows_the_worker_options() -> None:
    from harness.cli import cli

    result = CliRunner().invoke(cli, ["worker", "dbos", "--help"])
    assert result.exit_code == 0, result.output
    for option in ("--system-db", "--queue", "--concurrency", "--executor-id", "--adopt"):
        assert option in result.output
