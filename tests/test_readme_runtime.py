"""The README's examples for streaming, middleware, approval and logs run, and print what they say."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
SECTIONS = (
    "Streaming",
    "Middleware: wrapping model calls, tool calls and runs",
    "Human approval of tool calls",
    "Logs and telemetry",
    "Continuity across compaction",
)


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.S | re.M)
    assert match is not None, f"README.md has no '## {title}' section"
    return match.group(1)


def blocks() -> list[tuple[str, int, str]]:
    found: list[tuple[str, int, str]] = []
    for title in SECTIONS:
        for index, code in enumerate(re.findall(r"^```python\n(.*?)^```", section(title), re.S | re.M)):
            found.append((title, index, code))
    return found


def run(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "example.py"
    script.write_text("import warnings\nwarnings.simplefilter('ignore')\n" + code)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env |= {"OPENAI_API_KEY": "sk-unused", "ANTHROPIC_API_KEY": "sk-unused"}  # constructed, never called
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_each_section_has_a_runnable_example() -> None:
    titles = {title for title, _, _ in blocks()}
    assert titles == set(SECTIONS)


@pytest.mark.parametrize(("title", "index", "code"), blocks(), ids=[f"{t[:12]}-{i}" for t, i, _ in blocks()])
def test_the_example_runs(title: str, index: int, code: str, tmp_path: Path) -> None:
    done = run(code, tmp_path)
    assert done.returncode == 0, f"{title} example {index}: {done.stderr}"
    comments = re.findall(r"print\(.*\)[ \t]+# (.+)$", code, re.M)
    for expected in comments:  # an example's "# <output>" comment is what it prints
        assert expected.strip() in done.stdout, f"{title} example {index} did not print {expected!r}"


def test_the_approval_example_prints_what_the_text_says(tmp_path: Path) -> None:
    (code,) = re.findall(r"^```python\n(.*?)^```", section("Human approval of tool calls"), re.S | re.M)
    lines = run(code, tmp_path).stdout.splitlines()
    assert lines == [
        "awaiting_approval ['c1', 'c2', 'c3'] []",
        "completed ['ann@example.com', 'bob@example.com']",
        "sent to ann@example.com / The user rejected this call: too many recipients"
        " / sent to bob@example.com",
    ]


def test_the_streaming_example_streams_text_and_tool_events(tmp_path: Path) -> None:
    code = re.findall(r"^```python\n(.*?)^```", section("Streaming"), re.S | re.M)[0]
    out = run(code, tmp_path).stdout
    assert "[calling read_file(" in out
    assert "[read_file returned 'contents of a']" in out
    assert out.rstrip().endswith("All files read. completed")


def test_the_continuity_example_pauses_and_sends_the_receipt_on_resume(tmp_path: Path) -> None:
    (code,) = re.findall(r"^```python\n(.*?)^```", section("Continuity across compaction"), re.S | re.M)
    lines = run(code, tmp_path).stdout.splitlines()
    assert lines[0] == "paused_after_compaction"
    assert lines[-1] == "completed done"
    receipts = lines[1:-1]
    assert receipts
    assert set(receipts) == {"[harness] The conversation was compacted before this request:"}
