"""The README's examples run as printed and print what their comments say; its tables match the code."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

from harness_tool_limits import LimitHit, ToolLimitExceeded, ToolLimits

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
RUNNABLE = ("Blocking a call", "Stopping the run")


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.S | re.M)
    assert match is not None, f"README.md has no '## {title}' section"
    return match.group(1)


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def flat(text: str) -> str:
    return " ".join(text.split())


def test_the_examples_run_and_print_what_their_comments_say(tmp_path: Path) -> None:
    code = "\n".join(block for title in RUNNABLE for block in python_blocks(section(title)))
    script = tmp_path / "readme_example.py"
    script.write_text("import warnings\nwarnings.simplefilter('ignore')\n" + code)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    expected = [comment.strip() for comment in re.findall(r"print\(.*\)\s+# (.*)$", code, re.M)]
    assert done.stdout.splitlines() == expected
    assert (tmp_path / "sessions.db").is_file()


def test_the_parameter_table_lists_every_parameter() -> None:
    rows = [line for line in section("Parameters").splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == list(inspect.signature(ToolLimits).parameters)


def test_the_messages_shown_are_the_codes() -> None:
    shown = flat(section("What the model sees"))
    assert LimitHit("search", "c", "tool", 2, 2).message() in shown
    assert LimitHit("search", "c", "run", 20, 20).message() in shown
    error = ToolLimitExceeded(LimitHit("search", "call_2", "tool", 2, 2))
    assert str(error) in flat(section("Errors"))
