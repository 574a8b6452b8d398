"""The ``harness`` command line: help, exit codes, shared helpers, ``stats`` and ``sessions``."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import cli, main
from harness.cli._app import load_history_file, read_history_file
from harness.core import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart
from harness.errors import HistoryFileError, SessionLoadError
from harness.session import Session
from harness.wire import dump_messages

GOOD = (
    b'[{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hello there"}]},'
    b' {"kind": "response", "parts": [{"part_kind": "text", "content": "hi"}]}]'
)


def _dangling() -> bytes:
    return dump_messages(
        [
            CanonicalMessage.user("go"),
            CanonicalMessage.response(
                ToolCallPart(tool_call_id="c1", tool_name="bash", args={"command": "ls"})
            ),
            CanonicalMessage.user("never answered"),
        ]
    )


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


# --------------------------------------------------------------------------------------
# Help and exit codes
# --------------------------------------------------------------------------------------

MY_COMMANDS = ("compact", "hooks", "inspect", "plugins", "sessions", "stats")


def test_top_level_help_lists_the_commands_and_the_exit_codes(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["--help"])
    assert result.exit_code == 0
    for command in MY_COMMANDS:
        assert command in result.output
    assert "130 interrupted" in result.output
    assert "Examples:" in result.output


@pytest.mark.parametrize("command", MY_COMMANDS)
def test_every_command_has_help_with_examples(runner: CliRunner, command: str) -> None:
    result = runner.invoke(cli, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Examples:" in result.output
    assert f"harness {command}" in result.output.split("Examples:")[1]


def test_usage_errors_exit_2(runner: CliRunner) -> None:
    assert runner.invoke(cli, ["inspect"]).exit_code == 2
    assert runner.invoke(cli, ["inspect", "--no-such-option", "x"]).exit_code == 2
    assert runner.invoke(cli, ["no-such-command"]).exit_code == 2


def test_main_reports_harness_errors_on_stderr_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "broken.json"
    path.write_text('[{"kind": "request", "parts": [')
    with pytest.raises(SystemExit) as exit_info:
        main(["stats", str(path)])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("error: HistoryFileError: ")
    assert str(path) in captured.err
    assert "Traceback" not in captured.err
    assert captured.out == ""


def test_main_returns_the_exit_code_of_a_command_that_found_a_problem(tmp_path: Path) -> None:
    path = tmp_path / "dangling.json"
    path.write_bytes(_dangling())
    with pytest.raises(SystemExit) as exit_info:
        main(["inspect", str(path)])
    assert exit_info.value.code == 1


def test_main_exits_130_when_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "h.json"
    path.write_bytes(GOOD)

    def interrupt(_: Path, **_options: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(importlib.import_module("harness.cli.inspect_cmd"), "read_history_file", interrupt)
    with pytest.raises(SystemExit) as exit_info:
        main(["inspect", str(path)])
    assert exit_info.value.code == 130
    assert "interrupted" in capsys.readouterr().err


def test_main_maps_usage_errors_to_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["inspect", "/no/such/file.json"])
    assert exit_info.value.code == 2
    assert "does not exist" in capsys.readouterr().err


def test_main_returns_none_on_success(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    path.write_bytes(GOOD)
    assert main(["stats", str(path)]) is None


def test_the_cli_does_not_bury_its_output_under_experimental_warnings() -> None:
    completed = subprocess.run(
        [sys.executable, "-W", "default", "-c", "from harness.cli import main; main(['plugins'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "sliding_window" in completed.stdout
    assert "HarnessExperimentalWarning" not in completed.stderr


# --------------------------------------------------------------------------------------
# History files
# --------------------------------------------------------------------------------------


def test_read_history_file_detects_histories_and_sessions(tmp_path: Path) -> None:
    history = tmp_path / "h.json"
    history.write_bytes(GOOD)
    loaded = read_history_file(history)
    assert loaded.kind == "history"
    assert loaded.session is None
    assert load_history_file(history) == loaded.messages
    assert len(loaded.messages) == 2
    session = Session.new(messages=loaded.messages)
    session_path = session.save(tmp_path / "s.json")
    as_session = read_history_file(session_path)
    assert as_session.kind == "session"
    assert as_session.session is not None
    assert as_session.session.session_id == session.session_id
    assert as_session.messages == loaded.messages


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"", "the file is empty"),
        (b"  \n", "the file is empty"),
        (b"[1, 2", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b"42", "a JSON scalar"),
        (b'{"version": 2}', "a JSON object without a 'messages' key"),
        (b'[{"kind": "request", "parts": [{"part_kind": "tool-return"}]}]', "not a valid message history"),
    ],
)
def test_bad_history_files_name_the_file_and_the_problem(
    tmp_path: Path, content: bytes, fragment: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(HistoryFileError) as info:
        read_history_file(path)
    assert fragment in str(info.value)
    assert str(info.value).startswith(str(path))


def test_a_corrupt_session_is_a_session_load_error(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('{"version": 99, "messages": []}')
    with pytest.raises(SessionLoadError, match="unknown version"):
        read_history_file(path)


def test_a_folder_is_not_a_history(tmp_path: Path) -> None:
    with pytest.raises(HistoryFileError, match="is a folder"):
        read_history_file(tmp_path)


# --------------------------------------------------------------------------------------
# stats and sessions
# --------------------------------------------------------------------------------------


def test_stats_reports_every_file(runner: CliRunner, tmp_path: Path) -> None:
    first = tmp_path / "history.json"
    first.write_bytes(GOOD)
    second = tmp_path / "other.json"
    second.write_bytes(
        dump_messages(
            [
                CanonicalMessage.user("go"),
                CanonicalMessage.response(
                    ToolCallPart(tool_call_id="c1", tool_name="bash", args={"command": "ls"})
                ),
                CanonicalMessage.request(
                    ToolReturnPart(tool_call_id="c1", tool_name="bash", content="a.py b.py")
                ),
                CanonicalMessage.response(TextPart("done")),
            ]
        )
    )
    result = runner.invoke(cli, ["stats", str(first), str(second)])
    assert result.exit_code == 0, result.output
    assert "history.json" in result.output
    assert "other.json" in result.output
    assert "clean" in result.output
    rows = json.loads(runner.invoke(cli, ["stats", "--json", str(first), str(second)]).stdout)["files"]
    assert [row["messages"] for row in rows] == [2, 4]
    assert rows[1]["tool_calls"] == 1
    assert rows[1]["violations"] == 0


def test_stats_exits_1_on_violations_and_2_on_bad_files(runner: CliRunner, tmp_path: Path) -> None:
    broken = tmp_path / "dangling.json"
    broken.write_bytes(_dangling())
    result = runner.invoke(cli, ["stats", str(broken)])
    assert result.exit_code == 1
    assert "violations" in result.output
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    result = runner.invoke(cli, ["stats", str(broken), str(bad)])
    assert result.exit_code == 2
    assert "HistoryFileError" in result.stderr


def test_sessions_lists_saved_sessions_newest_first(runner: CliRunner, tmp_path: Path) -> None:
    older = Session.create(tmp_path, current_model="old-model")
    older.save()
    newer = Session.create(tmp_path, current_model="new-model")
    newer.save()
    (tmp_path / "junk_session.json").write_text("{not json")
    result = runner.invoke(cli, ["sessions", "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.output.index(newer.session_id) < result.output.index(older.session_id)
    assert "unreadable" in result.output
    document = json.loads(runner.invoke(cli, ["sessions", "--dir", str(tmp_path), "--json"]).stdout)
    assert [s["session_id"] for s in document["sessions"]] == [newer.session_id, older.session_id]
    assert document["sessions"][0]["model"] == "new-model"
    assert [Path(p["path"]).name for p in document["problems"]] == ["junk_session.json"]


def test_stack_strings_in_the_help_examples_are_valid(runner: CliRunner) -> None:
    import re

    from harness.config import build_stack, parse_stack

    texts = [runner.invoke(cli, ["--help"]).output]
    texts += [runner.invoke(cli, [command, "--help"]).output for command in MY_COMMANDS]
    specs = [spec for text in texts for spec in re.findall(r'--stack "([^"]+)"', text)]
    assert len(specs) >= 2
    for spec in specs:
        assert build_stack(parse_stack(spec), context_window=100_000)
