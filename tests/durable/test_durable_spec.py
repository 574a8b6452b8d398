"""What a durable run journals: its spec, naming the store by a reference that is never a credential."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness import MaskedURL
from harness.durable import (
    RunSpec,
    RunStarter,
    RunSummary,
    StoreDirectory,
    StoreReference,
    failure_from_json,
    failure_to_json,
    store_reference,
)
from harness.errors import (
    EngineBoundaryError,
    StoreCredentialsError,
    StoreResolutionError,
    WorkflowIncompatibleError,
)
from harness.models.test import TestModel
from harness.run import Agent

SECRET_URL = "postgresql://app:TopSecret@db/agents?sslpassword=Other"


def test_a_url_with_a_password_is_refused_with_how_to_name_the_store_instead() -> None:
    with pytest.raises(StoreCredentialsError) as caught:
        store_reference(SECRET_URL)
    message = str(caught.value)
    assert "TopSecret" not in message
    assert "Other" not in message
    assert "--store NAME=URL" in message
    assert "store='@NAME'" in message
    assert "strip_credentials=True" in message


def test_opting_in_journals_the_url_without_its_credentials() -> None:
    reference = store_reference(SECRET_URL, strip_credentials=True)
    assert reference == StoreReference(url="postgresql://app@db/agents")
    assert "TopSecret" not in json.dumps(reference.to_json())


def test_names_urls_and_paths_become_references(tmp_path: Path) -> None:
    assert store_reference("@prod") == StoreReference.named("prod")
    assert store_reference(StoreReference.named("x")) == StoreReference.named("x")
    assert store_reference("sqlite:///s.db") == StoreReference(url="sqlite:///s.db")
    assert store_reference(tmp_path / "s.db") == StoreReference(url=f"sqlite:///{tmp_path / 's.db'}")
    assert store_reference(MaskedURL("postgresql://app@db/x")).url == "postgresql://app@db/x"
    with pytest.raises(ValueError, match="credentials"):
        StoreReference(url=SECRET_URL)
    with pytest.raises(ValueError, match="either a name or a URL"):
        StoreReference()
    with pytest.raises(ValueError, match="without spaces"):
        StoreReference.named("a b")


def test_a_spec_round_trips_and_an_older_or_foreign_one_is_refused() -> None:
    spec = RunSpec(
        agent="pkg.mod:agent",
        store=StoreReference.named("prod"),
        session_id="s1",
        prompt="héllo",
        fingerprint={"model": "1"},
        started_at=datetime(2026, 12, 7, 10, 0, tzinfo=UTC),
        working_directory="/w",
    )
    assert RunSpec.from_json(spec.to_json()) == spec
    assert RunSpec.from_json(spec.to_text()) == spec
    version_one = {"version": 1, "agent": "a", "store_url": "sqlite:///x.db"}
    for bad in (version_one, "not json", [], {"version": 2}, {**spec.to_json(), "store": "sqlite:///x"}):
        with pytest.raises(WorkflowIncompatibleError):
            RunSpec.from_json(bad)


def test_a_starter_builds_specs_with_the_agents_fingerprint_and_never_a_password() -> None:
    calls: list[str] = []

    def load(reference: str) -> Agent:
        calls.append(reference)
        return Agent(TestModel())

    starter = RunStarter("pkg:agent", SECRET_URL, load=load, strip_credentials=True)
    first, second = starter.spec("one"), starter.spec("two", session_id="s2")
    assert calls == ["pkg:agent"]  # loaded once, for the fingerprint
    assert first.session_id != second.session_id == "s2"
    assert first.fingerprint == second.fingerprint
    assert "TopSecret" not in first.to_text()
    with pytest.raises(StoreCredentialsError):
        RunStarter("pkg:agent", SECRET_URL, load=load)


def test_the_worker_resolves_names_and_stripped_urls_with_its_own_credentials() -> None:
    directory = StoreDirectory.from_options(
        ["prod=postgresql://app:TopSecret@db/agents", "sqlite:////var/lib/s.db"],
        environ={"HARNESS_STORE": "postgresql://other@db2/x"},
    )
    assert directory.resolve(StoreReference.named("prod")).reveal() == "postgresql://app:TopSecret@db/agents"
    stripped = store_reference("postgresql://app:TopSecret@db/agents", strip_credentials=True)
    assert directory.resolve(stripped).reveal() == "postgresql://app:TopSecret@db/agents"
    assert directory.resolve(StoreReference(url="postgresql://x@y/z")).reveal() == "postgresql://x@y/z"
    assert "default" in directory  # --store URL without a name wins over HARNESS_STORE
    assert directory.url("default") == MaskedURL("sqlite:////var/lib/s.db")
    assert "TopSecret" not in repr(directory)
    with pytest.raises(StoreResolutionError, match=r"no store named 'staging' \(it knows: default, prod\)"):
        directory.resolve(StoreReference.named("staging"))


def test_a_libpq_string_option_is_a_url_not_a_name() -> None:
    directory = StoreDirectory.from_options(["host=db user=app dbname=agents"], environ={})
    assert directory.url("default") == MaskedURL("host=db user=app dbname=agents")
    with pytest.raises(StoreResolutionError, match="given twice"):
        StoreDirectory.from_options(["a=sqlite:///x.db", "a=sqlite:///y.db"], environ={})


def test_a_summary_round_trips() -> None:
    summary = RunSummary("wf", "s", "out", 3, 2, 9, {"request_tokens": 4}, 1)
    assert RunSummary.from_json(summary.to_json()) == summary
    with pytest.raises(WorkflowIncompatibleError):
        RunSummary.from_json({"output": "x"})


def test_a_harness_error_crosses_as_json_and_a_foreign_class_never_does() -> None:
    error = WorkflowIncompatibleError("changed", run_id="w", changed=("tools",))
    error.add_note("a note")
    data = failure_to_json(error)
    assert data is not None
    back = failure_from_json(json.loads(json.dumps(data)))
    assert isinstance(back, WorkflowIncompatibleError)
    assert (str(back), back.run_id, back.changed, back.__notes__) == ("changed", "w", ("tools",), ["a note"])
    boundary = failure_from_json(
        failure_to_json(EngineBoundaryError("harness-temporal", "RunContext.messages"))
    )
    assert isinstance(boundary, EngineBoundaryError)
    assert boundary.field == "RunContext.messages"
    assert failure_to_json(ValueError("x")) is None
    assert failure_from_json({"type": "os:system", "args": ["echo hi"]}) is None
    assert failure_from_json({"type": "builtins:ValueError", "args": ["x"]}) is None
    assert failure_from_json({"type": "harness.errors:NoSuchError", "args": []}) is None
