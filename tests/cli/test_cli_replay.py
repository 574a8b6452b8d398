"""``harness replay``: a recorded transcript re-run with and without a stack."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import cli
from harness.cli.demo.measure import ComparedRequest, Comparison
from harness.core import CanonicalMessage, SystemPromptPart, TextPart, ToolCallPart, ToolReturnPart
from harness.testing import corpus_files
from harness.tokens import TokenCounter
from harness.wire import dump_messages


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def reading_session(reads: int) -> list[CanonicalMessage]:
    first = CanonicalMessage.user("Find the bug in app.py.")
    messages = [first.replace(parts=(SystemPromptPart("You are a recorded agent."), *first.parts))]
    for i in range(reads):
        call_id = f"r{i}"
        messages.append(
            CanonicalMessage.response(
                TextPart(f"Reading ({i})."),
                ToolCallPart(tool_call_id=call_id, tool_name="read_file", args={"path": "app.py"}),
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
    path = tmp_path / "session.json"
    path.write_bytes(dump_messages(reading_session(10)))
    return path


def test_replay_measures_each_request_with_and_without(runner: CliRunner, recording: Path) -> None:
    result = runner.invoke(cli, ["replay", str(recording), "--budget", "4000", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    rows = report["requests"]
    assert len(rows) == report["recorded_responses"] == 11
    # Without the stack every request re-sends the whole recording so far, system prompt included.
    counter = TokenCounter()
    history = reading_session(10)
    assert rows[0]["tokens_without"] == counter.count_messages(history[:1])
    assert rows[-1]["tokens_without"] == counter.count_messages(history[:-1])
    assert report["peak_tokens_without"] > 4000 >= report["peak_tokens_with"]
    assert report["total_tokens_with"] < report["total_tokens_without"]
    assert any(event["capability"] == "dedupe_file_reads" for row in rows for event in row["events"])
    assert report["ok"] is True
    assert report["invariants_clean"] is True


def test_replay_exits_1_when_a_request_exceeds_the_budget(runner: CliRunner, recording: Path) -> None:
    result = runner.invoke(cli, ["replay", str(recording), "--budget", "1000", "--stack", "", "--json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.output)
    assert report["over_budget"]
    assert report["ok"] is False
    assert report["total_tokens_with"] == report["total_tokens_without"]


def test_replay_prints_table_chart_and_totals(runner: CliRunner, recording: Path) -> None:
    result = runner.invoke(cli, ["replay", str(recording), "--budget", "4000"])
    assert result.exit_code == 0, result.output
    assert (
        f"harness replay: {recording} (22 messages, 11 recorded responses), budget 4,000 tokens"
        in result.output
    )
    assert "tokens sent per request" in result.output
    assert "11 requests:" in result.output
    assert "invariants: clean" in result.output


def test_replay_without_a_file_uses_the_embedded_transcript(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["replay", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["file"] is None
    assert report["peak_tokens_with"] <= 8000 < report["peak_tokens_without"]


def test_replay_plot(runner: CliRunner, recording: Path, tmp_path: Path) -> None:
    target = tmp_path / "out" / "tokens.png"
    result = runner.invoke(cli, ["replay", str(recording), "--budget", "4000", "--plot", str(target)])
    assert result.exit_code == 0, result.output
    assert target.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "the file is empty"),
        (b"{not json", "not valid JSON"),
        (b'{"files": []}', "a JSON object without a 'messages' key"),
        (b'[{"kind": "nonsense"}]', "not a valid message history"),
    ],
)
def test_replay_bad_files_are_usage_errors(
    runner: CliRunner, tmp_path: Path, content: bytes, message: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    result = runner.invoke(cli, ["replay", str(bad)])
    assert result.exit_code == 2
    assert message in result.output


def test_replay_missing_file_and_bad_options(runner: CliRunner, tmp_path: Path) -> None:
    assert runner.invoke(cli, ["replay", str(tmp_path / "nope.json")]).exit_code == 2
    assert runner.invoke(cli, ["replay", "--budget", "0"]).exit_code == 2
    bad_stack = runner.invoke(cli, ["replay", "--stack", "clear_tool_results:keep_pairs=lots"])
    assert bad_stack.exit_code == 2
    assert "keep_pairs" in bad_stack.output


def test_replay_help_has_examples(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["replay", "--help"])
    assert result.exit_code == 0
    assert "Examples:" in result.output
    assert "--plot tokens.png" in result.output


def test_replay_the_smallest_corpus_transcript(runner: CliRunner) -> None:
    files = sorted((p for p in corpus_files() if p.name != "manifest.json"), key=lambda p: p.stat().st_size)
    if not files:
        pytest.skip("corpus not available")
    result = runner.invoke(cli, ["replay", str(files[0]), "--budget", "32000", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["unpaired_requests"] == 0
    assert len(report["requests"]) == report["recorded_responses"]


def test_replay_progress_bar_is_drawn_on_stderr_when_asked(runner: CliRunner, recording: Path) -> None:
    shown = runner.invoke(cli, ["replay", str(recording), "--progress"])
    assert shown.exit_code == 0, shown.output
    assert "replaying with the stack" in shown.stderr
    assert "replaying" not in shown.stdout  # the figures stay clean for a pipe
    hidden = runner.invoke(cli, ["replay", str(recording), "--no-progress"])
    assert hidden.exit_code == 0, hidden.output
    assert "replaying" not in hidden.stderr
    # Not a terminal and no flag: no bar (CliRunner's stderr is not a terminal).
    assert "replaying" not in runner.invoke(cli, ["replay", str(recording)]).stderr


def test_the_requests_over_the_budget_are_named_as_requests_not_a_count(
    runner: CliRunner, recording: Path
) -> None:
    result = runner.invoke(cli, ["replay", str(recording), "--budget", "2000", "--stack", ""])
    assert result.exit_code == 1
    text = " ".join(result.stdout.split())
    assert "over the 2,000-token budget: requests 3-11 (9 requests)" in text
    assert "requests over the" not in text


def test_one_request_over_the_budget_is_named_as_that_request(tmp_path: Path, runner: CliRunner) -> None:
    path = tmp_path / "two.json"
    path.write_bytes(dump_messages(reading_session(1)))
    result = runner.invoke(cli, ["replay", str(path), "--budget", "500", "--stack", ""])
    assert result.exit_code == 1
    assert "over the 500-token budget: request 2\n" in result.stdout


def test_a_tiny_loss_is_never_a_negative_zero_fraction() -> None:
    rows = (ComparedRequest(1, 1, 1, 100_000, 100_001), ComparedRequest(2, 1, 1, 100_000, 100_000))
    report = Comparison(rows).as_json()
    assert report["saved_tokens"] == -1
    assert math.copysign(1.0, report["saved_fraction"]) == 1.0
    assert json.dumps(report["saved_fraction"]) == "0.0"


def test_a_compaction_that_changed_nothing_says_so(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "four.json"
    path.write_bytes(dump_messages(reading_session(4)))
    stack = "tiered[dedupe_file_reads]:max_tokens=300,target_tokens=100"
    result = runner.invoke(cli, ["replay", str(path), "--budget", "100000", "--stack", stack])
    assert result.exit_code == 0, result.output
    lines = [" ".join(line.split()) for line in result.stdout.splitlines()]
    assert (
        "compaction before request 2: tiered: no tier changed the history (3 messages, 1,055 tokens; "
        "tried dedupe_file_reads)" in lines
    )
    # a roll-up line only ever follows the edits it sums up
    for index, line in enumerate(lines):
        if "roll-up of the edits above" in line:
            assert "dedupe_file_reads:" in lines[index - 1]
    (row_2,) = [line for line in lines if line.startswith("│ 2 ")]
    assert row_2.endswith("│ - │")  # no edit before request 2
    (chart_2,) = [line for line in lines if line.startswith("2 ") and "/" in line]
    assert "compacted" not in chart_2
