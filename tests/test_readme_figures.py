"""The figures the README quotes are what the commands print: ``benchmarks/readme_figures.py --check``."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

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


@pytest.fixture(scope="module")
def figures() -> Any:
    """The script, loaded once: its one ``harness eval`` of the corpus is cached for every test here."""
    return _script()


@pytest.fixture(scope="module")
def measured(figures: Any) -> dict[str, str | None]:
    rendered: dict[str, str | None] = figures.measure()
    return rendered


def _readme() -> str:
    return (REPO / "README.md").read_text(encoding="utf-8")


def test_the_readme_quotes_what_the_commands_print(
    figures: Any, measured: dict[str, str | None], capsys: pytest.CaptureFixture[str]
) -> None:
    assert figures.check(_readme(), measured) == []  # fix: python benchmarks/readme_figures.py
    assert figures.main(["--check"]) == 0, capsys.readouterr().out  # the command line, on the cached eval


def _drifted(text: str, name: str, old: str, new: str) -> str:
    start = text.index(f"<!-- readme-figures:{name} -->")
    end = text.index(f"<!-- /readme-figures:{name} -->")
    region = text[start:end]
    assert old in region
    return text[:start] + region.replace(old, new, 1) + text[end:]


def test_a_drifted_figure_fails_the_check_and_the_rewrite_fixes_it(
    figures: Any, measured: dict[str, str | None]
) -> None:
    text = _readme()
    demo = {"demo": measured["demo"]}
    assert figures.check(text, demo) == []
    region = text[text.index("<!-- readme-figures:demo -->") :]
    saving = region.split(" without (", 1)[1].split(" %", 1)[0]  # the quoted saving, e.g. "57"
    wrong = _drifted(text, "demo", f"({saving} %", f"({int(saving) - 16} %")
    problems = figures.check(wrong, demo)
    assert problems == [f"demo: the README quotes {int(saving) - 16} %, the command prints {saving} %"]
    assert figures.check(figures.update(wrong, demo), demo) == []


def test_the_demo_output_block_is_what_the_demo_prints(figures: Any, measured: dict[str, str | None]) -> None:
    block = measured["demo-output"]
    assert block is not None
    assert block.startswith("```\n  request ")
    assert block.endswith("\n```")
    assert "compaction before request" in block
    first_event = next(line for line in block.splitlines() if "compaction before request" in line)
    tokens = first_event.split(" messages, ", 1)[1].split(" tokens", 1)[0]  # e.g. "7,121→5,509"
    after = tokens.split("→")[1]
    wrong = _drifted(
        _readme(), "demo-output", f"→{after} tokens", f"→{int(after.replace(',', '')) * 2:,} tokens"
    )
    only = {"demo-output": block}
    assert figures.check(wrong, only) != []  # twice the tokens is beyond the 10 % the demo may move
    assert figures.check(figures.update(wrong, only), only) == []


def test_a_which_stack_figure_that_drifts_fails_the_check(
    figures: Any, measured: dict[str, str | None]
) -> None:
    table = measured["which-stack-table"]
    if table is None:
        pytest.skip("the transcript corpus is not present (HARNESS_CORPUS)")
    only = {"which-stack-table": table}
    row = next(line for line in table.splitlines() if line.startswith("| 8,000 | **tiered**"))
    recall = row.split(" | ")[2]  # "**81.5 %**"
    wrong = _drifted(_readme(), "which-stack-table", row, row.replace(recall, "**71.5 %**", 1))
    printed = recall.strip("*")
    assert figures.check(wrong, only) == [
        f"which-stack-table: the README quotes 71.5 %, the command prints {printed}"
    ]
    assert figures.check(figures.update(wrong, only), only) == []


def test_a_goal_met_that_is_no_longer_met_fails_the_check(
    figures: Any, measured: dict[str, str | None]
) -> None:
    goals = measured["which-stack-goals"]
    if goals is None:
        pytest.skip("the transcript corpus is not present (HARNESS_CORPUS)")
    only = {"which-stack-goals": goals}
    row = next(line for line in goals.splitlines() if line.startswith("| 16,000: older continuation"))
    wrong = _drifted(_readme(), "which-stack-goals", row, row.rsplit("|", 2)[0] + "| maybe |")
    assert figures.check(wrong, only) == [
        "which-stack-goals: the README's wording differs from what the command prints"
    ]


def test_without_the_corpus_the_which_stack_figures_are_skipped(
    figures: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(figures, "_corpus_files", list)
    uncached = figures._eval.__wrapped__  # not the run the other tests share
    regions = tuple(
        dataclasses.replace(r, run=uncached) for r in figures.REGIONS if r.name.startswith("which-stack")
    )
    rendered = figures.measure(regions)
    assert rendered == {"which-stack-choice": None, "which-stack-table": None, "which-stack-goals": None}
    text = _readme()
    assert figures.check(text, rendered, regions) == []
    assert figures.update(text, rendered) == text
