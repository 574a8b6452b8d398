"""``--format``, JSON Lines, gzip and ``-`` on every command that reads a history file."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness.cli import cli
from harness.cli._app import read_history_file
from harness.core import TextPart, ToolCallPart, ToolReturnPart
from harness.errors import HistoryFileError
from harness.wire import load_messages

OPENAI: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "list the files"},
    {
        "role": "assistant",
        "content": None,
        "refusal": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"command": "ls"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "a.py\nb.py"},
    {"role": "assistant", "content": "Two files."},
]

ANTHROPIC: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "system": "Be brief.",
    "messages": [
        {"role": "user", "content": "list the files"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "ls will do", "signature": "sig"},
                {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "One file."}]},
    ],
}

CLAUDE_CODE: list[dict[str, Any]] = [
    {"type": "summary", "summary": "Listing files", "leafUuid": "u3"},
    {
        "type": "user",
        "uuid": "u1",
        "timestamp": "2026-01-01T00:00:00Z",
        "message": {"role": "user", "content": "ls"},
    },
    {
        "type": "assistant",
        "uuid": "u2",
        "timestamp": "2026-01-01T00:00:01Z",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-opus-4-5",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}],
        },
    },
    {
        "type": "user",
        "uuid": "u3",
        "timestamp": "2026-01-01T00:00:02Z",
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}],
        },
        "toolUseResult": {"stdout": "a.py", "stderr": ""},
    },
    {
        "type": "assistant",
        "uuid": "u4",
        "timestamp": "2026-01-01T00:00:03Z",
        "message": {
            "id": "msg_2",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": "a.py"}],
        },
    },
]


def _jsonl(records: list[dict[str, Any]]) -> bytes:
    return b"\n".join(json.dumps(record).encode() for record in records) + b"\n"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    paths = {
        "openai": tmp_path / "openai.json",
        "anthropic": tmp_path / "anthropic.json",
        "claude": tmp_path / "session.jsonl.gz",
    }
    paths["openai"].write_text(json.dumps(OPENAI))
    paths["anthropic"].write_text(json.dumps(ANTHROPIC))
    paths["claude"].write_bytes(gzip.compress(_jsonl(CLAUDE_CODE)))
    return paths


def _inspect(runner: CliRunner, *args: str, stdin: bytes | None = None) -> dict[str, Any]:
    result = runner.invoke(cli, ["inspect", "--json", *args], input=stdin)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_inspect_reads_openai_and_anthropic_histories_as_what_they_are(
    runner: CliRunner, files: dict[str, Path]
) -> None:
    """The bug: these files were read as legacy prompts and reported invariant violations."""
    openai = _inspect(runner, str(files["openai"]))
    assert (openai["message_format"], openai["requests"], openai["responses"]) == ("openai", 2, 2)
    assert openai["parts"] == {
        "system-prompt": 1,
        "user-prompt": 1,
        "tool-call": 1,
        "tool-return": 1,
        "text": 1,
    }
    assert openai["invariants"]["clean"]
    anthropic = _inspect(runner, str(files["anthropic"]))
    assert anthropic["message_format"] == "anthropic"
    assert anthropic["parts"]["thinking"] == 1
    assert anthropic["invariants"]["clean"]


def test_a_gzipped_claude_code_transcript_from_standard_input(
    runner: CliRunner, files: dict[str, Path]
) -> None:
    report = _inspect(runner, "-", stdin=files["claude"].read_bytes())
    assert report["file"] == "-"
    assert (report["message_format"], report["json_lines"], report["compression"]) == (
        "anthropic",
        True,
        "gzip",
    )
    assert report["skipped_records"] == {"summary": 1}
    assert report["messages"] == 4
    assert report["invariants"]["clean"]
    text = runner.invoke(cli, ["inspect", str(files["claude"])])
    assert text.exit_code == 0, text.output
    assert "(anthropic messages, JSON Lines, gzip)" in text.stdout
    assert "skipped 1 records without a message (summary 1)" in text.stdout


def test_format_forces_a_reader_and_a_mismatch_says_so(runner: CliRunner, files: dict[str, Path]) -> None:
    forced = _inspect(runner, "--format", "openai", str(files["openai"]))
    assert forced["message_format"] == "openai"
    result = runner.invoke(cli, ["inspect", "--format", "anthropic", str(files["openai"])])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: HistoryFileError: ")
    assert "anthropic format, message 3, field 'role'" in result.stderr
    assert "try format 'openai'" in result.stderr
    bad = runner.invoke(cli, ["inspect", "--format", "csv", str(files["openai"])])
    assert bad.exit_code == 2
    assert "'auto', 'pydantic-ai', 'openai', 'anthropic'" in bad.output


def test_an_unknown_shape_names_what_was_seen_and_what_is_accepted(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "responses.json"
    path.write_text(json.dumps([{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]))
    result = runner.invoke(cli, ["inspect", str(path)])
    assert result.exit_code == 2
    assert "OpenAI Responses API items, which harness does not read" in result.stderr
    assert "accepted formats: pydantic-ai" in result.stderr
    assert "invariant" not in result.stderr + result.stdout


def test_stats_reads_every_format_at_once(runner: CliRunner, files: dict[str, Path]) -> None:
    result = runner.invoke(cli, ["stats", "--json", *(str(path) for path in files.values())])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["files"]
    assert [row["message_format"] for row in rows] == ["openai", "anthropic", "anthropic"]
    assert [row["violations"] for row in rows] == [0, 0, 0]
    assert [row["skipped_records"] for row in rows] == [0, 0, 1]
    table = runner.invoke(cli, ["stats", "--format", "auto", str(files["openai"])])
    assert "openai" in table.stdout


def test_compact_writes_a_foreign_history_in_the_wire_format_and_refuses_in_place(
    runner: CliRunner, files: dict[str, Path], tmp_path: Path
) -> None:
    source = files["openai"]
    before = source.read_bytes()
    refused = runner.invoke(cli, ["compact", str(source), "--in-place", "--stack", ""])
    assert refused.exit_code == 2
    assert "--in-place would replace" in refused.output
    assert "(openai messages)" in refused.output
    assert source.read_bytes() == before
    out = tmp_path / "compacted.json"
    written = runner.invoke(cli, ["compact", str(source), "--stack", "", "--out", str(out), "--json"])
    assert written.exit_code == 0, written.output
    messages = load_messages(out.read_bytes())
    assert messages[1].parts == (
        ToolCallPart(tool_call_id="call_1", tool_name="bash", args='{"command": "ls"}'),
    )
    assert messages[2].parts == (
        ToolReturnPart(tool_call_id="call_1", tool_name="bash", content="a.py\nb.py"),
    )
    assert messages[3].parts == (TextPart("Two files."),)
    piped = runner.invoke(cli, ["compact", "-", "--in-place", "--stack", ""], input=before)
    assert piped.exit_code == 2
    assert "--in-place cannot replace standard input" in piped.output


def test_replay_reads_a_claude_code_transcript(runner: CliRunner, files: dict[str, Path]) -> None:
    result = runner.invoke(cli, ["replay", str(files["claude"]), "--json", "--no-progress", "--stack", ""])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["file"] == str(files["claude"])
    assert len(report["requests"]) == 2
    assert report["invariants_clean"] is True


def test_read_history_file_reports_what_it_read(files: dict[str, Path]) -> None:
    history = read_history_file(files["claude"])
    assert (history.kind, history.format, history.json_lines, history.compression) == (
        "history",
        "anthropic",
        True,
        "gzip",
    )
    assert history.skipped == {"summary": 1}
    assert not history.rewritable
    assert history.described == "anthropic messages, JSON Lines, gzip"
    assert read_history_file(files["openai"], format="openai").format == "openai"


def test_a_session_file_from_standard_input_is_refused(tmp_path: Path, runner: CliRunner) -> None:
    document = json.dumps({"version": 2, "session_id": "s", "messages": []}).encode()
    result = runner.invoke(cli, ["inspect", "-"], input=document)
    assert result.exit_code == 2
    assert "session file is read from its own file" in result.stderr
    empty = runner.invoke(cli, ["inspect", "-"], input=b"")
    assert empty.exit_code == 2
    assert "standard input is empty" in empty.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "a"}\n{"role": \n')
    with pytest.raises(HistoryFileError, match=r"bad.jsonl: line 2: not valid JSON Lines"):
        read_history_file(bad)
