"""The README's example runs as printed and prints what its comments say; its tables match the code."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

from harness_anthropic_context import NO_SUMMARY, PAUSE_TEXT, SUMMARY_PREFIX, AnthropicContextManagement

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.S | re.M)
    assert match is not None, f"README.md has no '## {title}' section"
    return match.group(1)


def flat(text: str) -> str:
    return " ".join(text.split())


def test_the_example_runs_and_prints_what_its_comments_say(tmp_path: Path) -> None:
    [code, *_] = re.findall(r"^```python\n(.*?)^```", section("Example"), re.S | re.M)
    script = tmp_path / "readme_example.py"
    script.write_text("import warnings\nwarnings.simplefilter('ignore')\n" + code)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    expected = [comment.strip() for comment in re.findall(r"print\(.*\)\s+# (.*)$", code, re.M)]
    assert len(expected) == code.count("print(")
    assert done.stdout.splitlines() == expected


def test_the_stack_string_shown_builds(tmp_path: Path) -> None:
    [stack] = re.findall(r"^```text\n(.*?)\n```", section("Example"), re.S | re.M)
    from harness import Agent
    from harness.models.anthropic import AnthropicModel

    agent = Agent(AnthropicModel("claude-sonnet-4-6", api_key="unused"), capabilities=stack)
    [capability] = [c for c in agent.plugin_manager.capabilities if isinstance(c, AnthropicContextManagement)]
    assert capability.clear_tool_uses == {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "input_tokens", "value": 30000},
        "keep": {"type": "tool_uses", "value": 3},
    }
    assert capability.compaction == {"type": "compact_20260112"}


def test_the_parameter_table_lists_every_parameter() -> None:
    rows = [line for line in section("Parameters").splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == list(
        inspect.signature(AnthropicContextManagement).parameters
    )


def test_the_texts_shown_are_the_codes() -> None:
    assert PAUSE_TEXT in flat(section("Pausing after a compaction"))
    switch = flat(section("When the provider changes"))
    assert SUMMARY_PREFIX in switch
    assert "NO_SUMMARY" in switch
    assert NO_SUMMARY.startswith("[")
