"""What the installed ``harness`` command prints into a pipe: widths, words, warnings, no leftovers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core import CanonicalMessage, TextPart
from harness.wire import dump_messages

HARNESS = str(Path(sys.executable).with_name("harness"))
_BOX = set("┏┃┡│├└━─")


def harness(
    *args: str, cwd: Path, columns: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run ``harness`` into a pipe; ``COLUMNS`` only when given (a parent's readline may set it).

    The default session store goes under ``cwd/xdg``, never the real home.
    """
    base = {
        k: v for k, v in os.environ.items() if k not in ("COLUMNS", "HARNESS_STORE", "HARNESS_SESSION_DIR")
    }
    base["XDG_DATA_HOME"] = str(cwd / "xdg")
    if columns is not None:
        base["COLUMNS"] = columns
    return subprocess.run(
        [HARNESS, *args],
        capture_output=True,
        text=True,
        env={**base, **env},
        cwd=cwd,
        timeout=180,
        check=False,
    )


def table_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line[:1] in _BOX]


@pytest.fixture(scope="module")
def demo_in_a_pipe(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    scratch = tmp_path_factory.mktemp("tmpdir")
    return harness("demo", cwd=scratch, TMPDIR=str(scratch)), scratch


def test_the_demo_table_fits_80_columns_in_a_pipe(
    demo_in_a_pipe: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    completed, _ = demo_in_a_pipe
    assert completed.returncode == 0, completed.stderr
    lines = table_lines(completed.stdout)
    assert len(lines) > 10
    assert max(map(len, lines)) <= 80
    chart = [line for line in completed.stdout.splitlines() if "← compacted" in line]
    assert chart
    assert max(map(len, chart)) <= 80


def test_the_demo_table_follows_columns(tmp_path: Path) -> None:
    completed = harness("demo", cwd=tmp_path, columns="64", TMPDIR=str(tmp_path))
    assert completed.returncode == 0, completed.stderr
    lines = table_lines(completed.stdout)
    assert max(map(len, lines)) <= 64
    chart = [line for line in completed.stdout.splitlines() if "← compacted" in line]
    assert max(map(len, chart)) <= 64


def test_the_demo_speaks_words_and_leaves_no_temporary_folder(
    demo_in_a_pipe: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    completed, scratch = demo_in_a_pipe
    last = completed.stdout.strip().splitlines()[-1]
    assert last == "invariants: clean; session reloaded identical: yes; same answer without the stack: yes"
    assert "True" not in completed.stdout
    assert "False" not in completed.stdout
    stored = f"saved in sqlite:///{scratch / 'xdg' / 'harness' / 'sessions.db'}: raw log"
    assert stored in completed.stdout.splitlines()[-2]
    assert "harness sessions show" in completed.stdout.splitlines()[-2]
    assert list(scratch.glob("harness-demo-*")) == []


def test_the_demo_keeps_the_session_where_it_is_told(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    completed = harness("demo", "--session-dir", str(kept), cwd=tmp_path, TMPDIR=str(tmp_path))
    assert completed.returncode == 0, completed.stderr
    (saved,) = kept.glob("*.json")
    assert f"saved in file://{kept} ({saved}): raw log" in completed.stdout
    assert list(tmp_path.glob("harness-demo-*")) == []
    report = json.loads(harness("demo", "--json", cwd=tmp_path, TMPDIR=str(tmp_path)).stdout)
    assert report["session_path"] is None
    assert report["store"] == f"sqlite:///{tmp_path / 'xdg' / 'harness' / 'sessions.db'}"
    assert report["session_roundtrip"] is True
    assert list(tmp_path.glob("harness-demo-*")) == []


def test_a_wide_table_is_not_cut_in_a_pipe(tmp_path: Path) -> None:
    completed = harness("plugins", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert "…" not in completed.stdout
    assert "before_model_request" in completed.stdout
    assert "harness-sliding-window" in completed.stdout


def test_python_warnings_are_one_line_each(tmp_path: Path) -> None:
    history = tmp_path / "history.json"
    history.write_bytes(
        dump_messages([CanonicalMessage.user("hi"), CanonicalMessage.response(TextPart("yo"))])
    )
    empty_cache = tmp_path / "tiktoken-cache"
    empty_cache.mkdir()
    completed = harness(
        "stats",
        str(history),
        str(history),
        "--model",
        "gpt-4o",
        cwd=tmp_path,
        TIKTOKEN_CACHE_DIR=str(empty_cache),
    )
    assert completed.returncode == 0, completed.stderr
    lines = completed.stderr.splitlines()
    assert len(lines) == 1, completed.stderr
    assert lines[0].startswith("warning: The o200k_base tokenizer file is not available offline")
    assert "ApproximateTokenCountWarning" not in completed.stderr
    assert ".py:" not in completed.stderr
