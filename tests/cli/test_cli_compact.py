"""``harness compact``: the manifest, --dry-run, atomic output, --in-place, stacks and errors."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from harness.cli import cli
from harness.core import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart
from harness.history import check_invariants
from harness.session import Session
from harness.wire import dump_messages, load_messages

CLEAR = "clear_tool_results:keep_pairs=1,max_fraction=0.5"


def _history(turns: int = 6) -> list[CanonicalMessage]:
    messages = [CanonicalMessage.user("refactor the project")]
    for turn in range(turns):
        call_id = f"c{turn}"
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=call_id, tool_name="bash", args={"command": f"cat f{turn}.py"})
            )
        )
        messages.append(
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=call_id, tool_name="bash", content=f"line {turn}\n" * 60)
            )
        )
    messages.append(CanonicalMessage.response(TextPart("done")))
    return messages


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def history_file(tmp_path: Path) -> Path:
    path = tmp_path / "history.json"
    path.write_bytes(dump_messages(_history()))
    return path


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def _manifest(result: Result) -> dict[str, Any]:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_manifest_lists_each_edit(runner: CliRunner, history_file: Path) -> None:
    report = _manifest(
        runner.invoke(cli, ["compact", str(history_file), "--stack", CLEAR, "--json", "--dry-run"])
    )
    assert report["stack"] == CLEAR
    assert report["dry_run"] is True
    assert report["written"] is None
    (edit,) = report["edits"]
    assert edit["capability"] == "clear_tool_results"
    assert edit["tool_calls_cleared"] == 5
    assert edit["cleared_tool_call_ids"] == ["c0", "c1", "c2", "c3", "c4"]
    assert edit["tool_calls_dropped"] == 0
    assert edit["messages_before"] == edit["messages_after"] == 14
    assert edit["tokens_before"] == report["tokens_before"]
    assert edit["tokens_after"] == report["tokens_after"] < report["tokens_before"]
    assert report["invariants"]["clean"] is True


def test_table_output_and_nothing_written_without_out(
    runner: CliRunner, history_file: Path, tmp_path: Path
) -> None:
    before = _snapshot(tmp_path)
    result = runner.invoke(cli, ["compact", str(history_file), "--stack", CLEAR])
    assert result.exit_code == 0, result.output
    assert "clear_tool_results" in result.output
    assert "14 → 14" in result.output
    assert "nothing written: pass --out FILE or --in-place" in result.output
    assert _snapshot(tmp_path) == before


def test_dry_run_leaves_every_file_untouched(runner: CliRunner, history_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    before = _snapshot(tmp_path)
    for extra in (["--out", str(out)], ["--in-place"]):
        result = runner.invoke(cli, ["compact", str(history_file), "--stack", CLEAR, "--dry-run", *extra])
        assert result.exit_code == 0, result.output
        assert "dry run: nothing written" in result.output
    assert _snapshot(tmp_path) == before
    assert not out.exists()


def test_out_writes_a_valid_smaller_history(runner: CliRunner, history_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "compacted.json"
    report = _manifest(
        runner.invoke(cli, ["compact", str(history_file), "--stack", CLEAR, "--out", str(out), "--json"])
    )
    assert report["written"] == str(out)
    compacted = load_messages(out.read_bytes())
    assert check_invariants(compacted) == []
    assert len(compacted) == len(_history())
    assert compacted != _history()
    assert load_messages(history_file.read_bytes()) == _history()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["compacted.json", "history.json"]  # no temp or .bak


def test_out_never_replaces_the_input_or_an_existing_file_unasked(
    runner: CliRunner, history_file: Path, tmp_path: Path
) -> None:
    original = history_file.read_bytes()
    refused = runner.invoke(cli, ["compact", str(history_file), "--stack", CLEAR, "--out", str(history_file)])
    assert refused.exit_code == 2
    assert "--in-place" in refused.stderr
    assert history_file.read_bytes() == original
    existing = tmp_path / "existing.json"
    existing.write_text("keep me")
    refused = runner.invoke(cli, ["compact", str(history_file), "--stack", CLEAR, "--out", str(existing)])
    assert refused.exit_code == 2
    assert "--force" in refused.stderr
    assert existing.read_text() == "keep me"
    forced = runner.invoke(
        cli, ["compact", str(history_file), "--stack", CLEAR, "--out", str(existing), "--force"]
    )
    assert forced.exit_code == 0, forced.output
    assert check_invariants(load_messages(existing.read_bytes())) == []
    both = runner.invoke(cli, ["compact", str(history_file), "--out", str(existing), "--in-place"])
    assert both.exit_code == 2
    assert "exclude each other" in both.stderr
    folder = runner.invoke(cli, ["compact", str(history_file), "--out", str(tmp_path)])
    assert folder.exit_code == 2


def test_in_place_keeps_a_backup(runner: CliRunner, history_file: Path) -> None:
    original = history_file.read_bytes()
    result = runner.invoke(cli, ["compact", str(history_file), "--stack", CLEAR, "--in-place"])
    assert result.exit_code == 0, result.output
    assert f"previous version kept as {history_file}.bak.1" in result.output
    assert history_file.with_name("history.json.bak.1").read_bytes() == original
    compacted = load_messages(history_file.read_bytes())
    assert compacted != _history()
    assert check_invariants(compacted) == []


def test_a_session_stays_a_session(runner: CliRunner, tmp_path: Path) -> None:
    session = Session.new(messages=_history(), current_model="m1")
    path = session.save(tmp_path / "session.json")
    out = tmp_path / "compacted-session.json"
    stack = "sliding_window:max_messages=6,keep_messages=4"
    report = _manifest(
        runner.invoke(cli, ["compact", str(path), "--stack", stack, "--out", str(out), "--json"])
    )
    assert report["format"] == "session"
    reloaded = Session.load(out)
    assert reloaded.session_id == session.session_id
    assert reloaded.current_model == "m1"
    assert len(reloaded.messages) == report["messages_after"] < len(_history())
    assert reloaded.total_tokens == report["tokens_after"]
    assert check_invariants(reloaded.messages) == []


@pytest.mark.parametrize(
    ("stack", "fragments"),
    [
        ("clear_tool_result:keep_pairs=3", ["unknown capability 'clear_tool_result'", "did you mean"]),
        ("sliding_window:max_token=5", ["unknown parameter 'max_token'", "accepted: max_messages"]),
        ("sliding_window:max_tokens=lots", ["parameter 'max_tokens'", "expected int | None, got 'lots'"]),
        ("sliding_window:max_tokens=", ["expected int | None, got ''"]),
        ("tiered[sliding_window", ["missing ']'", "column 7"]),
        ("a:b", ["expected '=' after parameter 'b'"]),
    ],
)
def test_bad_stack_strings_exit_2_and_touch_nothing(
    runner: CliRunner, history_file: Path, tmp_path: Path, stack: str, fragments: list[str]
) -> None:
    out = tmp_path / "out.json"
    before = _snapshot(tmp_path)
    result = runner.invoke(cli, ["compact", str(history_file), "--stack", stack, "--out", str(out)])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: StackConfigError: --stack")
    for fragment in fragments:
        assert fragment in result.stderr
    assert result.stdout == ""
    assert _snapshot(tmp_path) == before


def test_a_corrupt_input_is_never_touched(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "corrupt.json"
    path.write_bytes(b'[{"kind": "request", "parts": [{"part_kind": "user-prompt"')
    before = _snapshot(tmp_path)
    for extra in (["--in-place"], ["--out", str(tmp_path / "o.json")], ["--dry-run"]):
        result = runner.invoke(cli, ["compact", str(path), "--stack", CLEAR, *extra])
        assert result.exit_code == 2
        assert "HistoryFileError" in result.stderr
    assert _snapshot(tmp_path) == before
    session = tmp_path / "session.json"
    session.write_text('{"version": 2, "messages": [')
    before = _snapshot(tmp_path)
    result = runner.invoke(cli, ["compact", str(session), "--in-place"])
    assert result.exit_code == 2
    assert _snapshot(tmp_path) == before


def test_violations_in_the_result_exit_1_and_write_nothing(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "dangling.json"
    path.write_bytes(
        dump_messages(
            [
                CanonicalMessage.user("go"),
                CanonicalMessage.response(
                    ToolCallPart(tool_call_id="c1", tool_name="bash", args={"command": "ls"})
                ),
                CanonicalMessage.user("never answered"),
            ]
        )
    )
    out = tmp_path / "out.json"
    result = runner.invoke(cli, ["compact", str(path), "--stack", "", "--out", str(out), "--json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["invariants"]["clean"] is False
    assert report["written"] is None
    assert "nothing was written" in result.stderr
    assert not out.exists()


def test_stack_from_config_files(
    runner: CliRunner, history_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "custom.toml"
    config.write_text(
        '[[stack]]\nname = "sliding_window"\nmax_messages = 6\nkeep_messages = 4\n\n'
        f"[stacks]\nclear = {json.dumps(CLEAR)}\n"
    )
    report = _manifest(runner.invoke(cli, ["compact", str(history_file), "--config", str(config), "--json"]))
    assert [e["capability"] for e in report["edits"]] == ["sliding_window"]
    report = _manifest(
        runner.invoke(
            cli, ["compact", str(history_file), "--config", str(config), "--stack-name", "clear", "--json"]
        )
    )
    assert report["stack"] == CLEAR
    monkeypatch.chdir(tmp_path)
    (tmp_path / "harness.toml").write_text(f"stack = {json.dumps(CLEAR)}\n")
    report = _manifest(runner.invoke(cli, ["compact", str(history_file), "--json"]))
    assert report["stack"] == CLEAR
    report = _manifest(
        runner.invoke(cli, ["compact", str(history_file), "--stack", "dedupe_file_reads", "--json"])
    )
    assert report["stack"] == "dedupe_file_reads"
    bad = runner.invoke(cli, ["compact", str(history_file), "--stack-name", "nope"])
    assert bad.exit_code == 2
    assert "no stack named 'nope'" in bad.stderr
    missing = runner.invoke(cli, ["compact", str(history_file), "--config", str(tmp_path / "missing.toml")])
    assert missing.exit_code == 2


def test_default_stack_and_window(
    runner: CliRunner, history_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    report = _manifest(runner.invoke(cli, ["compact", str(history_file), "--json"]))
    assert report["stack"].startswith("tiered[dedupe_file_reads clear_tool_results")
    assert report["window"] == report["tokens_before"]
    assert report["tokens_after"] < report["tokens_before"]
    assert report["invariants"]["clean"] is True


def test_if_needed_lets_the_triggers_decide(runner: CliRunner, history_file: Path) -> None:
    args = ["compact", str(history_file), "--stack", CLEAR, "--json"]
    assert _manifest(runner.invoke(cli, [*args, "--if-needed", "--window", "1000000"]))["edits"] == []
    over = runner.invoke(cli, [*args, "--if-needed", "--window", "100"])
    assert over.exit_code == 3  # still over the tiny window
    assert json.loads(over.stdout)["edits"] != []


def test_trace_plugins_shows_each_hook_call(runner: CliRunner, history_file: Path) -> None:
    result = runner.invoke(
        cli,
        [
            "compact",
            str(history_file),
            "--stack",
            f"dedupe_file_reads {CLEAR}",
            "--if-needed",
            "--window",
            "100",
        ],
        env={"HARNESS_TRACE_PLUGINS": "1"},
    )
    assert result.exit_code == 3, result.output  # still over the tiny window
    lines = [line for line in result.stderr.splitlines() if line.startswith("harness-trace: ")]
    assert lines[0] == "harness-trace: before_model_request -> dedupe_file_reads (14 messages)"
    assert any(
        line.startswith("harness-trace: before_model_request <- clear_tool_results: ") for line in lines
    )
    assert "harness-trace" not in result.stdout
    quiet = runner.invoke(
        cli, ["compact", str(history_file), "--stack", CLEAR], env={"HARNESS_TRACE_PLUGINS": "0"}
    )
    assert "harness-trace" not in quiet.stderr


def test_compact_every_corpus_file(
    runner: CliRunner, corpus_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no configuration file: the built-in default stack
    out = tmp_path / "compacted.json"
    original = corpus_file.read_bytes()
    report = _manifest(runner.invoke(cli, ["compact", str(corpus_file), "--out", str(out), "--json"]))
    assert report["stack"].startswith("tiered[")
    compacted = load_messages(out.read_bytes())
    assert check_invariants(compacted) == []
    assert len(compacted) == report["messages_after"] <= report["messages_before"]
    assert corpus_file.read_bytes() == original
    assert os.listdir(tmp_path) == ["compacted.json"]
