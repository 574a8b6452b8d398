"""The README's examples run as printed and print what their comments say; its tables match the code."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

from harness_model_fallback import KIND_ERRORS, KINDS, PROVIDER_SETTINGS, ModelFallback

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.S | re.M)
    assert match is not None, f"README.md has no '## {title}' section"
    return match.group(1)


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def test_the_example_runs_and_prints_what_its_comments_say(tmp_path: Path) -> None:
    code = "\n".join(python_blocks(section("A fallback, end to end")))
    script = tmp_path / "readme_example.py"
    script.write_text("import warnings\nwarnings.simplefilter('ignore')\n" + code)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    expected = [comment.strip() for comment in re.findall(r"print\(.*\)\s+# (.*)$", code, re.M)]
    assert done.stdout.splitlines() == expected


def test_the_parameter_table_lists_every_parameter() -> None:
    rows = [line for line in section("Parameters").splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == list(inspect.signature(ModelFallback).parameters)


def test_the_kind_table_matches_the_code() -> None:
    rows = [line for line in section("Which errors fall back").splitlines() if line.startswith("| `")]
    assert [(row.split("`")[1], row.split("`")[3]) for row in rows] == [
        (kind, KIND_ERRORS[kind].__name__) for kind in KINDS
    ]


def test_the_strip_rules_listed_are_the_defaults() -> None:
    text = section("Settings")
    for family, keys in PROVIDER_SETTINGS.items():
        match = re.search(rf"^\* `{family}`: (.*?)(?=^\* |^$)", text, re.S | re.M)
        assert match is not None
        assert set(re.findall(r"`(\w+)`", match.group(1))) == keys
