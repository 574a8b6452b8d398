"""``harness demo``: the example agent explores the package's own source tree, offline."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import harness
from harness.cli import cli
from harness.history import check_invariants
from harness.session import Session

PACKAGE = Path(harness.__file__).resolve().parent


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture(scope="module")
def demo_json(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("demo")
    result = CliRunner().invoke(cli, ["demo", "--json", "--session-dir", str(folder)])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_demo_keeps_every_request_under_the_budget(demo_json: dict[str, Any]) -> None:
    report = demo_json
    assert report["root"] == str(PACKAGE)
    assert report["ok"] is True
    assert report["budget"] == 8000
    assert report["over_budget"] == []
    assert report["peak_tokens_with"] <= 8000 < report["peak_tokens_without"]
    assert report["total_tokens_with"] < report["total_tokens_without"]
    assert report["saved_tokens"] == report["total_tokens_without"] - report["total_tokens_with"]
    assert report["unpaired_requests"] == 0
    assert report["same_answer_without_stack"] is True
    rows = report["requests"]
    assert [row["index"] for row in rows] == list(range(1, len(rows) + 1))
    assert sum(row["tokens_with"] for row in rows) == report["total_tokens_with"]
    strategies = {event["capability"] for row in rows for event in row["events"]}
    assert {"dedupe_file_reads", "clear_tool_results", "tiered"} <= strategies
    assert "tiered[dedupe_file_reads" in report["stack"]
    assert "limit_warner" in report["stack"]


def test_demo_answer_describes_the_real_source_tree(demo_json: dict[str, Any]) -> None:
    answer = demo_json["output"]
    largest = max((p for p in PACKAGE.glob("*.py")), key=lambda p: (p.stat().st_size, p.name))
    lines = len(largest.read_text().splitlines())
    assert f"{largest.name}: {lines:,} lines" in answer
    assert "cli/" in answer
    assert "models/" in answer
    assert demo_json["tool_calls"] >= 10


def test_demo_session_is_saved_and_clean(demo_json: dict[str, Any]) -> None:
    assert demo_json["invariants_clean"] is True
    assert demo_json["session_roundtrip"] is True
    saved = Session.load(demo_json["session_path"])
    assert check_invariants(saved.messages, persisted=True) == []
    assert saved.current_model == "scripted"


def test_demo_prints_events_table_and_chart(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["demo", "--session-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "compaction before request" in out
    assert "dedupe_file_reads:" in out
    assert "tokens sent per request: █ with the stack" in out
    assert "every request within the 8,000-token budget" in out
    assert "invariants: clean" in out
    # Events are printed as they happen: before the request they precede, before the table.
    assert out.index("compaction before request") < out.index("┏")


def test_demo_over_another_folder_and_a_budget_it_cannot_meet(runner: CliRunner, tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    for i in range(3):
        (root / f"m{i}.py").write_text("".join(f"def f{j}(x):\n    return x * {j}\n" for j in range(120)))
    args = ["demo", "--json", "--root", str(root), "--session-dir", str(tmp_path / "s")]
    ok = runner.invoke(cli, [*args, "--budget", "8000"])
    assert ok.exit_code == 0, ok.output
    assert "m0.py: 240 lines" in json.loads(ok.output)["output"]
    # No stack and a budget far below one file: requests over it make the exit status 1.
    over = runner.invoke(cli, [*args, "--budget", "500", "--stack", ""])
    assert over.exit_code == 1, over.output
    report = json.loads(over.output)
    assert report["over_budget"]
    assert report["ok"] is False


def test_demo_plot_writes_a_png(runner: CliRunner, tmp_path: Path) -> None:
    target = tmp_path / "chart.png"
    result = runner.invoke(cli, ["demo", "--json", "--plot", str(target), "--session-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_plot_without_matplotlib_is_a_usage_error(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    result = runner.invoke(cli, ["demo", "--plot", str(tmp_path / "x.png"), "--session-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "pip install 'harness-loop[plot]'" in result.output
    assert not (tmp_path / "x.png").exists()


def test_demo_without_the_example_agent(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    real = importlib.import_module

    def missing(name: str, package: str | None = None) -> Any:
        if name.startswith("harness_coding_agent"):
            raise ImportError(name)
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", missing)
    result = runner.invoke(cli, ["demo"])
    assert result.exit_code == 2
    assert "CodingAgentMissingError" in result.output
    assert "pip install ./examples/coding-agent ./plugins/harness-*" in result.output


def test_demo_bad_stack_is_a_usage_error(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["demo", "--stack", "no_such_capability"])
    assert result.exit_code == 2
    assert "unknown capability 'no_such_capability'" in result.output


def test_demo_help_has_examples(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["demo", "--help"])
    assert result.exit_code == 0
    assert "Examples:" in result.output
    assert "harness demo --budget 6000 --plot demo.png" in result.output


def test_no_store_leaves_the_default_store_untouched(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    for name in ("HARNESS_STORE", "HARNESS_SESSION_DIR"):
        monkeypatch.delenv(name, raising=False)
    result = runner.invoke(cli, ["demo", "--no-store", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["store"] == "sqlite:///:memory:"
    assert report["session_roundtrip"] is True  # still checkpointed, reloaded and compared
    assert not (tmp_path / "xdg").exists(), "the demo added a session to the default store"
    plain = runner.invoke(cli, ["demo", "--no-store"])
    assert plain.exit_code == 0, plain.output
    assert "kept in memory only (--no-store)" in plain.stdout
    assert not (tmp_path / "xdg").exists()
    both = runner.invoke(cli, ["demo", "--no-store", "--store", str(tmp_path / "s.db")])
    assert both.exit_code == 2
    assert "--no-store cannot be combined with --store" in both.output
