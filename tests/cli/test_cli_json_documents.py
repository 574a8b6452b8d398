"""Every ``--json`` document: a schema version, the same event objects, roll-ups counted once.

Also the totals a person reads: what a stack added is never "-0% saved", and a first
request over the budget is called out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness.cli import cli
from harness.cli._json import SCHEMA_VERSION
from harness.core import CanonicalMessage, SystemPromptPart, TextPart, ToolCallPart, ToolReturnPart
from harness.wire import dump_messages

EVENT_KEYS = {
    "capability",
    "reason",
    "rollup",
    "messages_before",
    "messages_after",
    "tokens_before",
    "tokens_after",
    "tokens_saved",
    "tool_calls_cleared",
    "tool_calls_dropped",
    "cleared_tool_call_ids",
    "dropped_tool_call_ids",
    "details",
}


def _reads(reads: int, *, first_prompt: str = "Find the bug in app.py.") -> list[CanonicalMessage]:
    first = CanonicalMessage.user(first_prompt)
    messages = [first.replace(parts=(SystemPromptPart("You are a recorded agent."), *first.parts))]
    for i in range(reads):
        call_id = f"r{i}"
        messages.append(
            CanonicalMessage.response(
                TextPart(f"Reading ({i})."),
                ToolCallPart(tool_call_id=call_id, tool_name="read_file", args={"path": "a.py"}),
            )
        )
        body = "\n".join(f"def f{j}(x: int) -> int:\n    return x + {j + i}" for j in range(60))
        messages.append(
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=call_id, tool_name="read_file", content=body)
            )
        )
    messages.append(CanonicalMessage.response(TextPart("Found it.")))
    return messages


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    path = tmp_path / "recording.json"
    path.write_bytes(dump_messages(_reads(10)))
    return path


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("HARNESS_SESSION_DIR", str(tmp_path / "sessions"))
    monkeypatch.delenv("HARNESS_MODEL", raising=False)
    return CliRunner()


def document(runner: CliRunner, *args: str, code: int = 0) -> dict[str, Any]:
    result = runner.invoke(cli, list(args))
    assert result.exit_code == code, result.output
    parsed: object = json.loads(result.stdout)
    assert isinstance(parsed, dict), "every --json document is an object"
    return parsed  # pyright: ignore[reportUnknownVariableType]


def test_every_json_document_starts_with_the_schema_version(
    runner: CliRunner, recording: Path, tmp_path: Path
) -> None:
    file = str(recording)
    commands: list[list[str]] = [
        ["inspect", file, "--json"],
        ["compact", file, "--json", "--dry-run", "--window", "100000"],
        ["stats", file, "--json"],
        ["replay", file, "--json", "--budget", "100000"],
        ["demo", "--json"],
        ["plugins", "--json"],
        ["hooks", "--json"],
        ["run", "--json", "--root", str(tmp_path), "What is here?"],
        ["sessions", "--json", "--dir", str(tmp_path / "sessions")],
    ]
    for command in commands:
        parsed = document(runner, *command)
        assert next(iter(parsed)) == "schema_version", command
        assert parsed["schema_version"] == SCHEMA_VERSION == 1
    assert {"plugins", "hooks", "files"} <= {
        key
        for command in (["plugins", "--json"], ["hooks", "--json"], ["stats", file, "--json"])
        for key in document(runner, *command)
    }


def test_events_are_the_same_objects_in_every_command(
    runner: CliRunner, recording: Path, tmp_path: Path
) -> None:
    stack = "tiered[dedupe_file_reads clear_tool_results:keep_pairs=1]:target_tokens=2000"
    compacted = document(runner, "compact", str(recording), "--stack", stack, "--json", "--dry-run")
    replayed = document(runner, "replay", str(recording), "--stack", stack, "--json", "--budget", "4000")
    demo = document(runner, "demo", "--json")
    ran = document(runner, "run", "--json", "--root", str(Path(__file__).parent), "Explore this folder.")
    groups = {
        "compact": compacted["edits"],
        "replay": [e for r in replayed["requests"] for e in r["events"]],
        "demo": [e for r in demo["requests"] for e in r["events"]],
        "run": ran["compaction_events"],
    }
    for name, events in groups.items():
        assert events, name
        for event in events:
            assert isinstance(event, dict), (name, event)
            assert set(event) == EVENT_KEYS, name
            assert event["tokens_saved"] == event["tokens_before"] - event["tokens_after"]
            assert event["tool_calls_cleared"] == len(event["cleared_tool_call_ids"])


def test_a_tiered_roll_up_is_marked_and_not_counted_again(runner: CliRunner, recording: Path) -> None:
    stack = "tiered[dedupe_file_reads clear_tool_results:keep_pairs=1]:target_tokens=2000"
    replayed = document(runner, "replay", str(recording), "--stack", stack, "--json", "--budget", "4000")
    rollups = 0
    for request in replayed["requests"]:
        events = request["events"]
        rollups += sum(e["rollup"] for e in events)
        assert all(e["capability"] == "tiered" for e in events if e["rollup"])
        assert request["edits"] == sum(not e["rollup"] for e in events)
    assert rollups > 0
    assert replayed["edit_count"] == sum(r["edits"] for r in replayed["requests"])
    assert replayed["edit_count"] == sum(len(r["events"]) for r in replayed["requests"]) - rollups
    compacted = document(runner, "compact", str(recording), "--stack", stack, "--json", "--dry-run")
    assert [e["rollup"] for e in compacted["edits"]][-1] is True
    assert compacted["edit_count"] == len(compacted["edits"]) - 1
    table = runner.invoke(cli, ["replay", str(recording), "--stack", stack, "--budget", "4000"]).stdout
    total = next(line for line in table.splitlines() if "total" in line)
    assert total.rstrip(" │").split()[-1] == str(replayed["edit_count"])
    assert "tiered (roll-up of the edits above)" in table


def test_a_stack_that_adds_tokens_says_so(runner: CliRunner) -> None:
    stack = "limit_warner:max_context_fraction=0.01"  # a warning on every request, nothing removed
    result = runner.invoke(cli, ["replay", "--stack", stack, "--budget", "100000"])
    assert result.exit_code == 0, result.output
    assert "-0%" not in result.stdout
    assert "tokens added by the stack (<1% more)" in result.stdout
    assert "(<1% added)" in result.stdout  # the table's total
    report = document(runner, "replay", "--stack", stack, "--budget", "100000", "--json")
    assert report["saved_tokens"] < 0


def test_a_first_request_over_the_budget_is_called_out(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "big-first.json"
    path.write_bytes(dump_messages(_reads(2, first_prompt="Please look at this: " + "word " * 400)))
    result = runner.invoke(cli, ["replay", str(path), "--budget", "200"])
    assert result.exit_code == 1
    assert "the first request alone holds" in result.stdout
    assert "no stack can fit it" in result.stdout
    assert document(runner, "replay", str(path), "--budget", "200", "--json", code=1)[
        "first_request_over_budget"
    ]
    roomy = document(runner, "replay", str(path), "--budget", "100000", "--json")
    assert roomy["first_request_over_budget"] is False
    small_first = tmp_path / "small-first.json"
    small_first.write_bytes(dump_messages(_reads(10)))
    later = runner.invoke(cli, ["replay", str(small_first), "--budget", "400", "--stack", ""])
    assert later.exit_code == 1
    assert "the first request alone" not in later.stdout
