"""The README's example runs as printed and prints what its comments say; its tables match the code."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

from harness_otel import OTelPlugin, attributes

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.S | re.M)
    assert match is not None, f"README.md has no '## {title}' section"
    return match.group(1)


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def test_the_quick_start_runs_and_prints_what_its_comments_say(tmp_path: Path) -> None:
    code = "\n".join(python_blocks(section("Quick start")))
    script = tmp_path / "readme_example.py"
    script.write_text("import warnings\nwarnings.simplefilter('ignore')\n" + code)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    expected = [comment.strip() for comment in re.findall(r"print\(.*\)\s+# (.*)$", code, re.M)]
    assert len(expected) == 4
    assert done.stdout.splitlines() == expected


def test_the_parameter_table_lists_every_parameter() -> None:
    rows = [line for line in section("Parameters").splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == list(inspect.signature(OTelPlugin).parameters)


def test_every_attribute_the_plugin_writes_is_documented() -> None:
    names = {
        getattr(attributes, name)
        for name in attributes.__all__
        if not name.startswith(("OPERATION_", "OTHER"))
    }
    names.discard(attributes.OPERATION_NAME)
    documented = set(re.findall(r"`((?:gen_ai|harness|error)\.[a-z_.]+)`", README))
    assert names - documented == set()
    assert attributes.OPERATION_NAME in documented
    assert {
        attributes.OPERATION_INVOKE_AGENT,
        attributes.OPERATION_CHAT,
        attributes.OPERATION_EXECUTE_TOOL,
    } <= set(re.findall(r"`([a-z_]+)`", README))


def test_the_content_table_is_the_content_the_plugin_can_capture() -> None:
    rows = [line for line in section("Content capture").splitlines() if line.startswith("| `")]
    assert {row.split("`")[1] for row in rows} == {
        attributes.INPUT_MESSAGES,
        attributes.SYSTEM_INSTRUCTIONS,
        attributes.TOOL_DEFINITIONS,
        attributes.OUTPUT_MESSAGES,
        attributes.TOOL_CALL_ARGUMENTS,
        attributes.TOOL_CALL_RESULT,
    }
