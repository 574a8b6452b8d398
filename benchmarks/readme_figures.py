"""The figures the README quotes, generated from the commands that produce them.

The README's demo, replay and "Which stack should I use?" figures sit between
``<!-- readme-figures:NAME -->`` and ``<!-- /readme-figures:NAME -->`` markers; this script runs
the command behind each one (``harness demo --json --no-store``, ``harness demo --no-store`` for
the example output block, ``harness replay FILE --budget 32000 --json``, one
``harness eval CORPUS --json`` for the "Which stack" regions), renders the region from what it
printed, and rewrites it in place::

    python benchmarks/readme_figures.py            # rewrite the README's figures
    python benchmarks/readme_figures.py --check    # exit 1, naming each figure, when they drifted

``tests/test_readme_figures.py`` runs ``--check``. The replay figures must match exactly (the
corpus file and the stack decide them). The demo explores harness's own source tree, whose
files and latest commit message change with every commit, so its token figures (in the
paragraph and the example output block) may move by
up to 10 % (and the saving by 3 points) before ``--check`` calls it drift. A region whose
command cannot run (the shared corpus is absent) is left as it is and reported as skipped. The
"Which stack" table's pydantic-ai-harness rows are outside the regions: ``--reference`` builds
its environment from PyPI, too slow and networked for a check.
"""

from __future__ import annotations

__all__ = ["REGIONS", "Region", "check", "main", "measure", "update"]

import argparse
import functools
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
ASTROID = "mini-swe-agent-astroid-1333-deepseek-chat.json"


def _harness(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [str(Path(sys.executable).with_name("harness")), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
        check=False,
    )
    if done.returncode not in (0, 1):
        raise RuntimeError(f"harness {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _corpus_files() -> list[Path]:
    """The shared corpus's transcripts (``[]`` when it is absent)."""
    from harness.testing import corpus_files as files

    return files()


def _corpus_file(name: str) -> Path | None:
    return next((path for path in _corpus_files() if path.name == name), None)


def _percent(fraction: float) -> str:
    return f"{round(100 * fraction)} %"


def _demo() -> dict[str, Any] | None:
    return _harness("demo", "--json", "--no-store")


def _demo_output() -> dict[str, Any] | None:
    """The lines ``harness demo`` prints around its first compaction, as it prints them."""
    done = subprocess.run(
        [str(Path(sys.executable).with_name("harness")), "demo", "--no-store"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
        check=False,
        env={**os.environ, "COLUMNS": "1000", "NO_COLOR": "1"},
    )
    if done.returncode not in (0, 1):
        raise RuntimeError(f"harness demo failed ({done.returncode}): {done.stderr.strip()}")
    lines = done.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if line.lstrip().startswith("compaction before request"))
    after = next(i for i in range(first, len(lines)) if lines[i].lstrip().startswith("request"))
    return {"lines": [line.rstrip() for line in lines[first - 1 : after + 1]]}


def _render_demo_output(report: Mapping[str, Any]) -> str:
    return "```\n" + "\n".join(report["lines"]) + "\n```"


def _render_demo(report: Mapping[str, Any]) -> str:
    requests = report["requests"]
    added = [row for row in requests if row["saved"] < 0]
    warner = ""
    if added:
        most = max(-row["saved"] for row in added)
        which = "one request" if len(added) == 1 else f"{len(added)} requests"
        shown = "visible in the table as a negative saving"
        warner = f" (the limit warner adds up to {most:,} tokens to {which}, {shown})"
    within = (
        f"every request within the {report['budget']:,}-token budget"
        if not report["over_budget"]
        else f"requests {', '.join(map(str, report['over_budget']))} over the {report['budget']:,}-token "
        "budget"
    )
    return (
        "Measured on this repository (the figures move a little as the source tree changes): "
        f"{len(requests)} model requests and {report['tool_calls']} tool calls; "
        f"**{report['total_tokens_with']:,} input tokens with the stack against "
        f"{report['total_tokens_without']:,} without ({_percent(report['saved_fraction'])} saved), "
        f"peak request {report['peak_tokens_with']:,} tokens against {report['peak_tokens_without']:,}**, "
        f"{within}{warner}."
    )


def _astroid() -> dict[str, Any] | None:
    path = _corpus_file(ASTROID)
    return None if path is None else _harness("replay", str(path), "--budget", "32000", "--json")


def _render_astroid(report: Mapping[str, Any]) -> str:
    return (
        f"Example on a {report['recorded_responses']}-response mini-swe-agent session of the shared corpus "
        f"(`{ASTROID}`) with the default stack and a {report['budget']:,}-token budget: "
        f"**{report['total_tokens_without']:,} input tokens without the stack, "
        f"{report['total_tokens_with']:,} with it ({_percent(report['saved_fraction'])} saved); "
        f"peak request {report['peak_tokens_without']:,} → {report['peak_tokens_with']:,} tokens**, "
        f"{report['edit_count']} compaction edits, invariants "
        f"{'clean' if report['invariants_clean'] else 'BROKEN'}:"
    )


@functools.cache
def _eval() -> dict[str, Any] | None:
    """``harness eval`` of the three presets on the whole corpus, run once for both regions that quote it."""
    files = [str(path) for path in _corpus_files()]
    return _harness("eval", *files, "--json") if files else None


def _row(report: Mapping[str, Any], stack: str, budget: int) -> Mapping[str, Any]:
    return next(r for r in report["summary"] if r["stack"] == stack and r["budget"] == budget)


def _recall(row: Mapping[str, Any], name: str) -> str:
    return f"{100 * row['recall'][name]['recall']:.1f} %"


def _millions(value: float) -> str:
    return f"{value / 1e6:.2f}M"


def _render_choice(report: Mapping[str, Any]) -> str:
    tiered, window = _row(report, "tiered", 16000), _row(report, "clear+window", 16000)
    cheaper = 1 - window["cost"]["anthropic"] / tiered["cost"]["anthropic"]
    older = "older_continuation"
    points = 100 * (tiered["recall"][older]["recall"] - window["recall"][older]["recall"])
    return (
        "`clear+window` (clearing and the window, no summary) is the stack to choose only when a summary "
        f"must never be written: at 16,000 tokens it is {_percent(cheaper)} cheaper but keeps "
        f"{round(points)} points less of what the agent uses next."
    )


def _render_table(report: Mapping[str, Any]) -> str:
    first = report["summary"][0]
    lead = _wrap(
        "The figures behind this, from `harness eval ../shared/corpus/*-*.json` (the "
        f"{first['files']} transcripts of `../shared/corpus`: mini-swe-agent, SWE-agent and Claude Code "
        f"runs, {first['requests']:,} requests per stack and budget; cl100k counts; summaries by the "
        "offline extractive digest; cost priced by Anthropic's rules in units of the base input price). "
        '"Older continuation" counts only the identifiers the next response uses that come from messages '
        "older than the ones just added: what had to survive compaction. Task and constraint recall is "
        f"{'100 %' if _all_kept(report) else 'below 100 %'} and invalid contexts are "
        f"{report['invalid_contexts']} in every row."
    )
    lines = [
        "| budget | stack | older continuation | errors | artifacts | Anthropic cost | cache busts "
        "| over budget (unavoidable) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for budget in report["budgets"]:
        for stack in ("tiered", "clear+window"):
            row = _row(report, stack, budget)
            bold = _bold if stack == "tiered" else str
            over = f"{row['over_budget']} ({row['over_budget_unavoidable']})" if row["over_budget"] else "0"
            lines.append(
                f"| {budget:,} | {bold(stack)} | {bold(_recall(row, 'older_continuation'))} "
                f"| {bold(_recall(row, 'error'))} | {_recall(row, 'artifact')} "
                f"| {_millions(row['cost']['anthropic'])} | {row['cache_busts']} | {over} |"
            )
    plain = [_row(report, "none", budget) for budget in report["budgets"]]
    lines.append(
        f"| — | uncompacted | 100 % | 100 % | 100 % | {_millions(plain[0]['cost']['anthropic'])} | "
        f"{plain[0]['cache_busts']} | {' / '.join(str(row['over_budget']) for row in plain)} |"
    )
    return lead + "\n\n" + "\n".join(lines)


def _yes(met: bool) -> str:
    return "yes" if met else "no"


def _times(ratio: float) -> str:
    return "\u00d7" + f"{ratio:.1f}".removesuffix(".0")  # the multiplication sign


def _render_goals(report: Mapping[str, Any]) -> str:
    """The goals table: "before this work" is the stack measured at its start (fixed), "now" is measured."""
    small, middle = _row(report, "tiered", 8000), _row(report, "tiered", 16000)
    older = [100 * row["recall"]["older_continuation"]["recall"] for row in (small, middle)]
    errors = [100 * row["recall"]["error"]["recall"] for row in (small, middle)]
    cost = small["cost"]["anthropic"]
    kept = _all_kept(report) and report["invalid_contexts"] == 0
    avoidable = small["over_budget"] - small["over_budget_unavoidable"]
    unavoidable = "all unavoidable" if avoidable == 0 else f"{avoidable} avoidable"
    doubled = errors[0] >= 2 * 12.0 and errors[1] >= 2 * 23.6
    rows = [
        "| goal | before this work | now | met? |",
        "|---|---:|---:|---|",
        "| 8,000: older continuation ≥ 85 % at a cost ≤ today's | 74.9 % at 1.50M | "
        f"{older[0]:.1f} % at {_millions(cost)} | "
        f"recall {_yes(older[0] >= 85)}, cost {_yes(cost <= 1.50e6)} |",
        f"| 16,000: older continuation ≥ 94 % | 86.5 % | {older[1]:.1f} % | {_yes(older[1] >= 94)} |",
        "| error recall at least doubled | 12.0 % / 23.6 % (8k / 16k) | "
        f"{errors[0]:.1f} % / {errors[1]:.1f} % | "
        f"{_yes(doubled)} ({_times(errors[0] / 12.0)}, {_times(errors[1] / 23.6)}) |",
        f"| 0 invalid contexts; task and constraint recall 100 % | yes | {_yes(kept)} | {_yes(kept)} |",
        "| no request over budget a stack could have brought under it | 14 at 8k | "
        f"{small['over_budget']} at 8k, {unavoidable} | {_yes(avoidable == 0)} |",
    ]
    return "\n".join(rows)


def _bold(text: str) -> str:
    return f"**{text}**"


def _all_kept(report: Mapping[str, Any]) -> bool:
    return all(
        row["recall"][name]["visible"] == row["recall"][name]["due"]
        for row in report["summary"]
        for name in ("task", "constraint")
    )


@dataclass(frozen=True)
class Region:
    """A marked paragraph of the README and how to produce it.

    Attributes:
        name: The marker's name (``<!-- readme-figures:NAME -->``).
        run: Runs the command; ``None`` when it cannot run here (no corpus).
        render: The paragraph from the command's JSON.
        token_tolerance: Relative difference allowed on token figures (``0``: exact).
        percent_tolerance: Points allowed on the saving.
        wrap: Whether the paragraph is re-wrapped (not a code block).
    """

    name: str
    run: Callable[[], dict[str, Any] | None]
    render: Callable[[Mapping[str, Any]], str]
    token_tolerance: float = 0.0
    percent_tolerance: int = 0
    wrap: bool = True


REGIONS = (
    Region("demo", _demo, _render_demo, token_tolerance=0.10, percent_tolerance=3),
    Region("demo-output", _demo_output, _render_demo_output, token_tolerance=0.10, wrap=False),
    Region("replay-astroid", _astroid, _render_astroid),
    Region("which-stack-choice", _eval, _render_choice),
    Region("which-stack-table", _eval, _render_table, wrap=False),
    Region("which-stack-goals", _eval, _render_goals, wrap=False),
)


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(
        rf"(<!-- readme-figures:{re.escape(name)} -->\n)(.*?)(\n<!-- /readme-figures:{re.escape(name)} -->)",
        re.S,
    )


def _wrap(text: str, width: int = 110) -> str:
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return "\n".join(lines)


def measure(regions: tuple[Region, ...] = REGIONS) -> dict[str, str | None]:
    """Each region's paragraph as the commands print it now (``None``: its command cannot run here)."""
    rendered: dict[str, str | None] = {}
    for region in regions:
        report = region.run()
        if report is None:
            rendered[region.name] = None
        else:
            text = region.render(report)
            rendered[region.name] = _wrap(text) if region.wrap else text
    return rendered


def update(text: str, rendered: Mapping[str, str | None]) -> str:
    """``text`` (the README) with each measured region replaced by its paragraph.

    Raises:
        ValueError: A region's markers are missing.
    """
    for name, paragraph in rendered.items():
        pattern = _pattern(name)
        if pattern.search(text) is None:
            raise ValueError(
                f"README has no <!-- readme-figures:{name} --> ... <!-- /readme-figures:{name} --> region"
            )
        if paragraph is not None:
            text = pattern.sub(lambda match, p=paragraph: match.group(1) + p + match.group(3), text)
    return text


_NUMBER = re.compile(r"(\d[\d,]*(?:\.\d+)?)( %)?")


def _numbers(text: str) -> list[tuple[float, bool]]:
    return [(float(m.group(1).replace(",", "")), bool(m.group(2))) for m in _NUMBER.finditer(text)]


def _shown(value: float) -> str:
    return f"{int(value):,}" if value.is_integer() else f"{value:,}"


def check(text: str, rendered: Mapping[str, str | None], regions: tuple[Region, ...] = REGIONS) -> list[str]:
    """The drifted figures of ``text``, one message each (empty: the README matches the commands)."""
    problems: list[str] = []
    by_name = {region.name: region for region in regions}
    for name, paragraph in rendered.items():
        match = _pattern(name).search(text)
        if match is None:
            problems.append(f"{name}: the README has no readme-figures region for it")
            continue
        if paragraph is None or " ".join(match.group(2).split()) == " ".join(paragraph.split()):
            continue
        region = by_name[name]
        quoted, measured = _numbers(match.group(2)), _numbers(paragraph)
        if len(quoted) != len(measured):
            said = " ".join(match.group(2).split())
            problems.append(
                f"{name}: the README says {said!r}, the command prints {' '.join(paragraph.split())!r}"
            )
            continue
        before = len(problems)
        for (old, is_percent), (new, _) in zip(quoted, measured, strict=True):
            if is_percent:
                drifted = abs(old - new) > region.percent_tolerance
            else:
                drifted = abs(old - new) > region.token_tolerance * abs(new)
            if drifted:
                unit = " %" if is_percent else ""
                problems.append(
                    f"{name}: the README quotes {_shown(old)}{unit}, the command prints {_shown(new)}{unit}"
                )
        if len(problems) == before and region.token_tolerance == 0 and region.percent_tolerance == 0:
            problems.append(f"{name}: the README's wording differs from what the command prints")
    return problems


def main(argv: list[str] | None = None) -> int:
    """Rewrite the README's figures, or with ``--check`` report their drift (exit 1)."""
    parser = argparse.ArgumentParser(description="The figures the README quotes, from the commands.")
    parser.add_argument("--check", action="store_true", help="report drift instead of rewriting")
    parser.add_argument("--readme", type=Path, default=README, help="the README to check or rewrite")
    args = parser.parse_args(argv)
    text = args.readme.read_text(encoding="utf-8")
    rendered = measure()
    for name, paragraph in rendered.items():
        if paragraph is None:
            print(f"skipped {name}: its command cannot run here (is the shared corpus present?)")
    if args.check:
        problems = check(text, rendered)
        for problem in problems:
            print(f"drift: {problem}")
        if problems:
            print(f"run: python benchmarks/{Path(__file__).name} (rewrites {args.readme})")
        return 1 if problems else 0
    new = update(text, rendered)
    if new != text:
        args.readme.write_text(new, encoding="utf-8")
        print(f"rewrote the figures of {args.readme}")
    else:
        print(f"{args.readme}: the figures are current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
