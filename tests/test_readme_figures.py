"""The figures the README quotes are what the commands print: ``benchmarks/readme_figures.py --check``."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "readme_figures.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_figures", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("readme_figures", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_readme_quotes_what_the_commands_print() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr  # fix: python benchmarks/readme_figures.py


def test_a_drifted_figure_fails_the_check_and_the_rewrite_fixes_it() -> None:
    figures: Any = _script()
    text = (REPO / "README.md").read_text(encoding="utf-8")
    demo = {"demo": figures.measure(tuple(r for r in figures.REGIONS if r.name == "demo"))["demo"]}
    assert figures.check(text, demo) == []
    start = text.index("<!-- readme-figures:demo -->")
    end = text.index("<!-- /readme-figures:demo -->")
    region = text[start:end]
    saving = region.split(" without (", 1)[1].split(" %", 1)[0]  # the quoted saving, e.g. "57"
    wrong = text[:start] + region.replace(f"({saving} %", f"({int(saving) - 16} %", 1) + text[end:]
    problems = figures.check(wrong, demo)
    assert problems == [f"demo: the README quotes {int(saving) - 16} %, the command prints {saving} %"]
    assert figures.check(figures.update(wrong, demo), demo) == []
