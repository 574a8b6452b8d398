"""``TestModel`` has a context window, so ``test`` works wherever a real model string does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import Agent
from harness.models.resolve import resolve_model
from harness.models.test import TEST_CONTEXT_WINDOW, TestModel


def test_the_test_model_reports_a_window() -> None:
    assert TEST_CONTEXT_WINDOW == 128_000
    assert TestModel().context_window == TEST_CONTEXT_WINDOW
    assert resolve_model("test").context_window == TEST_CONTEXT_WINDOW
    assert resolve_model("test:tiny").context_window == TEST_CONTEXT_WINDOW
    assert TestModel(context_window=5).context_window == 5
    assert TestModel(context_window=None).context_window is None  # an unknown window, on purpose


def test_a_window_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="context_window must be at least 1, got 0"):
        TestModel(context_window=0)


async def test_fraction_triggers_work_with_the_test_model() -> None:
    agent = Agent(TestModel(), capabilities=["tiered[sliding_window:keep_messages=2]:target_fraction=0.5"])
    result = await agent.run("go")
    assert result.output == "done"


def test_harness_run_with_the_test_model_needs_no_budget(tmp_path: Path) -> None:
    completed = subprocess.run(
        [str(Path(sys.executable).with_name("harness")), "run", "--model", "test", "--json", "hi"],
        capture_output=True,
        text=True,
        env={**os.environ, "HARNESS_SESSION_DIR": str(tmp_path)},
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    assert report["model"] == "test"
    assert report["output"] == "done"
    assert Path(report["session_path"]).parent == tmp_path
