"""The journaled JSON round-trips, and the plugin answers ``harness worker temporal``."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from click.testing import CliRunner
from harness_temporal.cli import main, worker
from harness_temporal.resolver import resolve_engine
from harness_temporal.units import (
    ActivityOptions,
    RunSpec,
    decode_message,
    decode_parts,
    decode_settings,
    decode_tools,
    encode_message,
    encode_parts,
    encode_settings,
    encode_tools,
    fingerprint_digest,
)

from harness.core.messages import CanonicalMessage, SystemPromptPart, TextPart, ToolCallPart, UserPromptPart
from harness.core.model import ModelSettings, ToolDefinition
from harness.durable import RunSpec as DurableRunSpec
from harness.durable import StoreReference
from harness.errors import WorkflowIncompatibleError


def test_messages_parts_settings_and_tools_round_trip_through_json() -> None:
    message = CanonicalMessage.response(
        TextPart("hi"), ToolCallPart(tool_call_id="c1", tool_name="work", args={"n": 1})
    )
    assert decode_message(json.loads(json.dumps(encode_message(message)))) == message
    parts = (SystemPromptPart("be brief"), UserPromptPart("scoped"))
    assert decode_parts(json.loads(json.dumps(encode_parts(parts)))) == parts
    assert decode_parts(encode_parts(())) == ()
    settings = ModelSettings(max_tokens=10, temperature=0.5, extra={"seed": 3})
    assert decode_settings(json.loads(json.dumps(encode_settings(settings)))) == settings
    tools = (
        ToolDefinition("work", "does work", {"type": "object", "properties": {"n": {"type": "integer"}}}),
    )
    assert decode_tools(json.loads(json.dumps(encode_tools(tools)))) == tools


def test_run_spec_round_trips_and_the_digest_follows_the_fingerprint() -> None:
    spec = RunSpec(
        run=DurableRunSpec(
            agent="pkg.mod:agent",
            store=StoreReference.named("app"),
            session_id="s1",
            prompt="hi",
            fingerprint={"model": "a", "tools": "b"},
            started_at=datetime(2026, 12, 7, tzinfo=UTC),
            working_directory="/w",
        ),
        options=ActivityOptions(heartbeat=2, model_attempts=5),
    )
    assert RunSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec
    assert spec.store == StoreReference.named("app")


def test_a_spec_of_an_older_harness_temporal_is_refused_with_a_typed_error() -> None:
    old: dict[str, object] = {
        "agent": "a",
        "store": "sqlite:///x.db",
        "session_id": "s",
        "fingerprint": {},
        "working_directory": "/",
    }
    with pytest.raises(WorkflowIncompatibleError, match="another harness-temporal"):
        RunSpec.from_json(old)
    assert fingerprint_digest({"model": "a", "tools": "b"}) == fingerprint_digest(
        {"tools": "b", "model": "a"}
    )
    assert fingerprint_digest({"model": "a"}) != fingerprint_digest({"model": "b"})


def test_resolve_engine_answers_temporal_only() -> None:
    assert resolve_engine("temporal") is worker
    assert resolve_engine("Temporal") is worker
    assert resolve_engine("dbos") is None


def test_worker_command_documents_its_options() -> None:
    result = CliRunner().invoke(main, ["worker", "--help"])
    assert result.exit_code == 0
    for option in ("--address", "--task-queue", "--agent", "--store", "--sticky-timeout"):
        assert option in result.output
