"""``harness eval`` end to end: tables, the ``--json`` schema, ``--plot``, bad input, a corpus file."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import cli
from harness.core import CanonicalMessage
from harness.eval import EvalStack, evaluate, evaluate_history, extract_probes
from harness.testing import corpus_files
from harness.wire import dump_messages

RECALL_CLASSES = ["task", "constraint", "artifact", "error", "continuation", "older_continuation"]


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def recording(tmp_path: Path, bug_fix: list[CanonicalMessage]) -> Path:
    path = tmp_path / "bug-fix.json"
    path.write_bytes(dump_messages(bug_fix))
    return path


def _json(runner: CliRunner, *args: str) -> dict[str, object]:
    result = runner.invoke(cli, ["eval", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_json_document_schema(runner: CliRunner, recording: Path) -> None:
    document = _json(runner, str(recording), "--stack", "none", "--stack", "tiered", "--budget", "8000")
    assert document["schema_version"] == 1
    assert document["files"] == [str(recording)]
    assert document["budgets"] == [8000]
    assert [s["label"] for s in document["stacks"]] == ["none", "tiered"]  # type: ignore[index]
    assert set(document["prices"]) == {"anthropic", "openai"}  # type: ignore[arg-type]
    assert document["invalid_contexts"] == 0
    summary = document["summary"]
    assert isinstance(summary, list)
    assert [(row["side"], row["stack"], row["budget"]) for row in summary] == [
        ("harness", "none", 8000),
        ("harness", "tiered", 8000),
    ]
    none = summary[0]
    assert set(none) == {
        "side",
        "stack",
        "spec",
        "budget",
        "files",
        "requests",
        "total_tokens",
        "peak_tokens",
        "over_budget",
        "over_budget_unavoidable",
        "cost",
        "cached_tokens",
        "cache_busts",
        "invalid_contexts",
        "recall",
        "compactions",
        "summarizer_calls",
        "summaries_sent",
    }
    assert none["requests"] == 4
    assert list(none["recall"]) == RECALL_CLASSES
    # nothing is compacted: every due probe is visible at every request
    for name in RECALL_CLASSES:
        entry = none["recall"][name]
        assert entry["visible"] == entry["due"]
    assert none["recall"]["task"] == {"visible": 8, "due": 8, "recall": 1.0}
    assert none["cache_busts"] == 0
    runs = document["runs"]
    assert isinstance(runs, list)
    assert len(runs) == 2
    assert runs[0]["file"] == str(recording)


def test_tables_per_budget(runner: CliRunner, recording: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "300")
    result = runner.invoke(
        cli, ["eval", str(recording), "--stack", "none", "--budget", "8000", "--budget", "16000"]
    )
    assert result.exit_code == 0, result.output
    assert "budget 8,000 tokens" in result.output
    assert "budget 16,000 tokens" in result.output
    for header in ("older cont.", "Anthropic cost", "OpenAI cost", "cache busts", "invalid", "over budget"):
        assert header in result.output
    assert "invalid contexts: 0" in result.output


def test_default_stacks_and_budgets(recording: Path) -> None:
    report = evaluate([recording], processes=1)
    assert [s.label for s in report.stacks] == ["tiered", "clear+window", "none"]
    assert report.budgets == (8000, 16000, 32000)
    assert len(report.runs) == 9
    assert report.stacks[0].spec.startswith("tiered[dedupe_file_reads")


def test_the_pool_gives_the_figures_of_one_process(recording: Path) -> None:
    alone = evaluate([recording], ["tiered", "none"], [8000], processes=1)
    pooled = evaluate([recording], ["tiered", "none"], [8000], processes=2)
    strip = [{**r.as_json(), "seconds": 0} for r in alone.runs]
    assert strip == [{**r.as_json(), "seconds": 0} for r in pooled.runs]


def test_bad_stack_and_prices_are_usage_errors(runner: CliRunner, recording: Path, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["eval", str(recording), "--stack", "no_such_capability"])
    assert result.exit_code == 2
    assert "no_such_capability" in result.output
    prices = tmp_path / "prices.toml"
    prices.write_text("[providers.openai]\ncache_read = 'free'\n")
    result = runner.invoke(cli, ["eval", str(recording), "--stack", "none", "--prices", str(prices)])
    assert result.exit_code == 2
    assert "PricesFileError" in result.output
    assert "providers.openai.cache_read" in result.output


def test_prices_file_changes_the_costs(runner: CliRunner, recording: Path, tmp_path: Path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text("[providers.openai]\nminimum_prefix = 100000\n")
    default = _json(runner, str(recording), "--stack", "none", "--budget", "8000")
    changed = _json(runner, str(recording), "--stack", "none", "--budget", "8000", "--prices", str(prices))
    row, other = default["summary"][0], changed["summary"][0]  # type: ignore[index]
    assert other["cost"]["openai"] == other["total_tokens"]  # nothing reaches the minimum: full price
    assert row["cost"]["openai"] <= other["cost"]["openai"]
    assert changed["prices_file"] == str(prices)


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="matplotlib is not installed")
def test_plot_writes_a_png(runner: CliRunner, recording: Path, tmp_path: Path) -> None:
    out = tmp_path / "tradeoff.png"
    result = runner.invoke(
        cli,
        [
            "eval",
            str(recording),
            "--stack",
            "none",
            "--stack",
            "tiered",
            "--budget",
            "8000",
            "--plot",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"chart written to {out}" in result.output


async def test_evaluate_history_on_a_corpus_file() -> None:
    files = [f for f in corpus_files() if f.stem == "swe-agent-test-repo-function-calling"]
    if not files:
        pytest.skip("the transcript corpus is not present (HARNESS_CORPUS)")
    from harness.wire import load_history

    history = load_history(files[0])
    probes = extract_probes(history)
    plain = await evaluate_history(history, EvalStack("none", ""), 8000, probes=probes)
    assert plain.requests == probes.requests
    assert plain.invalid_contexts == 0
    for name in RECALL_CLASSES:
        visible, due = plain.recall[name]
        assert visible == due, name
    tiered = await evaluate_history(
        history, EvalStack("tiered-small", "tiered[sliding_window]:target_fraction=0.5"), 2000
    )
    assert tiered.invalid_contexts == 0
    assert tiered.total_tokens < plain.total_tokens


def test_cli_on_the_small_corpus_files(runner: CliRunner) -> None:
    small = [str(f) for f in corpus_files() if f.stat().st_size < 100_000]
    if not small:
        pytest.skip("the transcript corpus is not present (HARNESS_CORPUS)")
    document = _json(runner, *small, "--stack", "tiered", "--stack", "none", "--budget", "8000")
    assert document["invalid_contexts"] == 0
    tiered, none = document["summary"]  # type: ignore[misc]
    assert tiered["files"] == none["files"] == len(small)
    assert tiered["requests"] == none["requests"] > 0
    assert tiered["peak_tokens"] <= none["peak_tokens"]
    assert tiered["over_budget"] <= none["over_budget"]
    for name in RECALL_CLASSES:
        assert none["recall"][name]["visible"] == none["recall"][name]["due"], name


async def test_summaries_are_counted_with_the_requests_that_carry_them(
    bug_fix: list[CanonicalMessage],
) -> None:
    stack = EvalStack("summarize", "summarizing:keep_messages=2,max_messages=3,summarizer=digest")
    figures = await evaluate_history(bug_fix, stack, 8000)
    assert figures.summarizer_calls >= 1
    assert figures.summaries_sent == figures.summarizer_calls  # each summary reached the next request
    assert figures.compactions == figures.summarizer_calls
    assert figures.invalid_contexts == 0
    # cut off after a tool result: the compaction prepared for a request never made is not counted
    cut = await evaluate_history(bug_fix[:-1], stack, 8000)
    assert cut.requests == figures.requests - 1
    assert (figures.summarizer_calls, cut.summarizer_calls) == (2, 1)  # before requests 3 and 4; 3 only
    assert cut.summarizer_calls == cut.summaries_sent


def _table_lines(output: str) -> list[str]:
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("budget "))
    end = next(i for i, line in enumerate(lines) if "invalid contexts:" in line or line.startswith("  none:"))
    return lines[start:end]


@pytest.mark.parametrize("columns", [None, "100", "120"])
def test_the_tables_fit_the_width_and_no_cell_wraps(
    runner: CliRunner, recording: Path, monkeypatch: pytest.MonkeyPatch, columns: str | None
) -> None:
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)  # a pipe: 80 columns
    else:
        monkeypatch.setenv("COLUMNS", columns)
    width = int(columns or 80)
    args = ["eval", str(recording), "--stack", "none", "--stack", "clear+window", "--budget", "8000"]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    table = [line for line in _table_lines(result.output) if not line.startswith("columns left out")]
    assert max(len(line) for line in table) <= width, "\n".join(table)
    rows = [line for line in table if line.split()[:1] in (["none"], ["clear+window"])]
    assert len(rows) == 2  # one line per stack: nothing wrapped onto a second line
    assert "older cont." in result.output  # the most important figures are kept
    (note,) = [line for line in result.output.splitlines() if line.startswith("columns left out")]
    assert note.endswith("(--wide shows them)")
    assert "summaries (calls/sent)" in note


def test_wide_prints_every_column_on_one_line_per_stack(
    runner: CliRunner, recording: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    result = runner.invoke(cli, ["eval", str(recording), "--stack", "none", "--budget", "8000", "--wide"])
    assert result.exit_code == 0, result.output
    table = _table_lines(result.output)
    header = next(line for line in table if "stack" in line)
    for name in ("task", "constr.", "older cont.", "unavoidable", "OpenAI cost", "cache busts", "summaries"):
        assert name in header
    (row,) = [line for line in table if line.split()[:1] == ["none"]]
    assert len(row) > 100
    assert "columns left out" not in result.output


def test_plot_labels_of_coinciding_points_are_joined() -> None:
    from harness.cli.eval_cmd import plot_labels

    same = [(0.5, 100.0, "8k"), (0.5, 100.0, "16k"), (0.5, 100.0, "32k")]
    assert plot_labels(same) == [(0.5, 100.0, "8k/16k/32k")]
    apart = [(0.1, 50.0, "8k"), (0.3, 75.0, "16k"), (0.3004, 75.1, "32k")]
    assert plot_labels(apart) == [(0.1, 50.0, "8k"), (0.3, 75.0, "16k/32k")]
    assert plot_labels([]) == []
