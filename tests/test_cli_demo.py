"""``harness demo``, driven through click's test runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import cli
from harness.history import check_invariants
from harness.session import Session


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_demo_replays_the_embedded_session_within_the_window(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["demo", "--json", "--window", "8000", "--session-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["invariants_clean"] is True
    assert report["session_roundtrip"] is True
    assert report["event_count"] > 0
    assert report["tokens_saved"] > 0
    # The recording is far larger than the window; the stack keeps every request inside it.
    assert report["transcript_tokens"] > 2 * 8000
    assert report["peak_tokens"] < 8000
    assert "parser_step_7" in report["output"]
    saved = Session.load(report["session_path"])
    assert check_invariants(saved.messages, persisted=True) == []


def test_demo_prints_a_readable_table(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["demo", "--session-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "capability stack (experimental plugins): tiered(" in result.output
    assert "invariants: clean" in result.output


def test_demo_replays_a_corpus_transcript(runner: CliRunner, tmp_path: Path, corpus_file: Path) -> None:
    result = runner.invoke(
        cli,
        [
            "demo",
            "--json",
            "--transcript",
            str(corpus_file),
            "--window",
            "32000",
            "--session-dir",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["invariants_clean"] is True
    assert report["session_roundtrip"] is True
