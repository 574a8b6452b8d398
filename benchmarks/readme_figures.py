"""The figures the README quotes, generated from the commands that produce them.

The README's demo and replay paragraphs sit between ``<!-- readme-figures:NAME -->`` and
``<!-- /readme-figures:NAME -->`` markers; this script runs the command behind each one
(``harness demo --json --no-store``, ``harness replay FILE --budget 32000 --json``), renders
the paragraph from what it printed, and rewrites it in place::

    python benchmarks/readme_figures.py            # rewrite the README's figures
    python benchmarks/readme_figures.py --check    # exit 1, naming each figure, when they drifted

``tests/test_readme_figures.py`` runs ``--check``. The replay figures must match exactly (the
corpus file and the stack decide them). The demo explores harness's own source tree, whose
files and latest commit message change with every commit, so its token figures may move by
up to 10 % (and the saving by 3 points) before ``--check`` calls it drift. A region whose
command cannot run (the shared corpus is absent) is left as it is and reported as skipped.
"""

from __future__ import annotations

__all__ = ["REGIONS", "Region", "check", "main", "measure", "update"]

import argparse
import json
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


def _corpus_file(name: str) -> Path | None:
    from harness.testing import corpus_files

    return next((path for path in corpus_files() if path.name == name), None)


def _percent(fraction: float) -> str:
    return f"{round(100 * fraction)} %"


def _demo() -> dict[str, Any] | None:
    return _harness("demo", "--json", "--no-store")


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


@dataclass(frozen=True)
class Region:
    """A marked paragraph of the README and how to produce it.

    Attributes:
        name: The marker's name (``<!-- readme-figures:NAME -->``).
        run: Runs the command; ``None`` when it cannot run here (no corpus).
        render: The paragraph from the command's JSON.
        token_tolerance: Relative difference allowed on token figures (``0``: exact).
        percent_tolerance: Points allowed on the saving.
    """

    name: str
    run: Callable[[], dict[str, Any] | None]
    render: Callable[[Mapping[str, Any]], str]
    token_tolerance: float = 0.0
    percent_tolerance: int = 0


REGIONS = (
    Region("demo", _demo, _render_demo, token_tolerance=0.10, percent_tolerance=3),
    Region("replay-astroid", _astroid, _render_astroid),
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
        rendered[region.name] = None if report is None else _wrap(region.render(report))
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


_NUMBER = re.compile(r"(\d[\d,]*)( %)?")


def _numbers(text: str) -> list[tuple[int, bool]]:
    return [(int(m.group(1).replace(",", "")), bool(m.group(2))) for m in _NUMBER.finditer(text)]


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
                problems.append(f"{name}: the README quotes {old:,}{unit}, the command prints {new:,}{unit}")
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
