"""A recording ending with unanswered tool calls (a crashed agent's) replays up to its last response."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from harness.cli import cli
from harness.core import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart
from harness.history import check_invariants
from harness.replay.model import NO_RECORDED_RESULT, recording_end, replay_history
from harness.wire import dump_messages


def crashed_recording() -> list[CanonicalMessage]:
    """Two reads answered, then a response whose two calls the crashed agent never answered."""
    messages = [CanonicalMessage.user("Find the bug in app.py.")]
    for i in range(2):
        call = ToolCallPart(tool_name="read_file", args={"path": f"{i}.py"}, tool_call_id=f"r{i}")
        messages.append(CanonicalMessage.response(TextPart(content=f"Reading {i}."), call))
        messages.append(
            CanonicalMessage.request(
                ToolReturnPart(tool_name="read_file", content=f"body {i}", tool_call_id=f"r{i}")
            )
        )
    messages.append(
        CanonicalMessage.response(
            ToolCallPart(tool_name="read_file", args={"path": "2.py"}, tool_call_id="r2"),
            ToolCallPart(tool_name="run_tests", args={}, tool_call_id="t1"),
        )
    )
    return messages


async def test_replay_stops_after_the_last_recorded_response() -> None:
    recording = crashed_recording()
    session, results = await replay_history(recording)
    assert results == []  # the one turn never ended in the recording
    replayed = session.messages
    assert [m.kind for m in replayed] == [m.kind for m in recording] + ["request"]
    assert [m.tool_calls for m in replayed[: len(recording)]] == [m.tool_calls for m in recording]
    answers = [p for p in replayed[-1].parts if isinstance(p, ToolReturnPart)]
    assert [(p.tool_call_id, p.content) for p in answers] == [
        ("r2", NO_RECORDED_RESULT),
        ("t1", NO_RECORDED_RESULT),
    ]
    assert check_invariants(replayed) == []


def test_recording_end_says_where_it_stopped() -> None:
    recording = crashed_recording()
    where = recording_end(recording)
    assert where is not None
    assert "2 unanswered tool call(s)" in where
    assert "message 6 of 6, response 3 of 3" in where
    assert "read_file (r2), run_tests (t1)" in where
    assert "\n" not in where
    assert recording_end(recording[:-1]) is not None  # ends with a tool result: a request
    assert recording_end([*recording[:-1], CanonicalMessage.response(TextPart(content="done"))]) is None
    assert recording_end([]) is None


def test_harness_replay_reports_where_the_recording_stopped(tmp_path: Path) -> None:
    path = tmp_path / "crashed.json"
    path.write_bytes(dump_messages(crashed_recording()))
    runner = CliRunner()
    result = runner.invoke(cli, ["replay", str(path), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["recorded_responses"] == 3
    assert "unanswered tool call(s)" in report["stopped"]
    text = runner.invoke(cli, ["replay", str(path)])
    assert text.exit_code == 0, text.output
    assert "Traceback" not in text.output
    assert "note: the recording ends with 2 unanswered tool call(s)" in " ".join(text.output.split())
