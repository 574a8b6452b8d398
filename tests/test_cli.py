"""The ``harness`` command line, driven through click's test runner."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import cli
from harness.history import check_invariants
from harness.session import Session
from harness.wire import load_messages


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_stats_reports_every_file(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "history.json"
    path.write_bytes(
        b'[{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hello there"}]},'
        b' {"kind": "response", "parts": [{"part_kind": "text", "content": "hi"}]}]'
    )
    result = runner.invoke(cli, ["stats", str(path)])
    assert result.exit_code == 0, result.output
    assert "history.json" in result.output
    assert "clean" in result.output


def test_bad_json_is_a_clear_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.cli import main

    path = tmp_path / "broken.json"
    path.write_text('[{"kind": "request", "parts": [')
    with pytest.raises(SystemExit) as exit_info:
        main(["stats", str(path)])
    assert exit_info.value.code == 2
    out = capsys.readouterr().out
    assert "WireFormatError" in out


def test_compact_writes_a_valid_smaller_history_and_never_the_input(
    runner: CliRunner, tmp_path: Path, corpus_file: Path
) -> None:
    output = tmp_path / "compacted.json"
    result = runner.invoke(cli, ["compact", str(corpus_file), "--target", "0.3", "--output", str(output)])
    assert result.exit_code == 0, result.output
    original = load_messages(corpus_file.read_bytes())
    compacted = load_messages(output.read_bytes())
    assert check_invariants(compacted) == []
    assert len(compacted) <= len(original)
    refused = runner.invoke(cli, ["compact", str(corpus_file), "--output", str(corpus_file)])
    assert refused.exit_code != 0
    assert load_messages(corpus_file.read_bytes()) == original


def test_plugins_lists_the_capability_plugins(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["plugins"])
    assert result.exit_code == 0, result.output
    for name in (
        "sliding_window",
        "clear_tool_results",
        "dedupe_file_reads",
        "limit_warner",
        "summarizing",
        "tiered",
    ):
        assert name in result.output


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


def test_the_cli_does_not_bury_its_output_under_experimental_warnings() -> None:
    import subprocess
    import sys

    completed = subprocess.run(
        [sys.executable, "-W", "default", "-c", "from harness.cli import main; main(['plugins'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "sliding_window" in completed.stdout
    assert "HarnessExperimentalWarning" not in completed.stderr
