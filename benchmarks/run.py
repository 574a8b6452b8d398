"""Benchmarks for harness, side by side with pydantic-ai-harness in the same run.

Usage::

    uv run python benchmarks/run.py                       # every group, sizes 100, 1,000, 10,000
    uv run python benchmarks/run.py --reference           # + pydantic-ai-harness 0.62.0, as ratios
    uv run python benchmarks/run.py --groups capabilities --sizes 1000 --json out.json
    uv run python benchmarks/sessions.py                  # the session stores alone, as Markdown

``--reference`` creates ``benchmarks/.ref-venv`` (once) holding ``pydantic-ai-harness==0.62.0``
and runs ``reference_cases.py`` there in a subprocess on the same synthetic histories, so both
sides are measured on one machine in one run. Ratios are reference time / harness time: 10.0
means harness is ten times faster.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _timing import Measurement  # noqa: E402

REFERENCE_VENV = HERE / ".ref-venv"
REFERENCE_REQUIREMENT = "pydantic-ai-harness==0.62.0"

Group = Callable[[list[int]], Iterable[Measurement]]


def _groups() -> dict[str, Group]:
    from cases_capabilities import capability_cases
    from cases_core import core_cases
    from cases_loop import loop_cases
    from cases_middleware import middleware_cases
    from cases_providers import provider_cases
    from sessions import session_cases

    return {
        "core": core_cases,
        "capabilities": capability_cases,
        "loop": loop_cases,
        "middleware": middleware_cases,
        "providers": provider_cases,
        "sessions": session_cases,
    }


def reference_python() -> Path:
    """Create the reference virtual environment on first use and return its interpreter.

    The same helper as ``harness eval --reference`` (:func:`harness.eval.reference.reference_python`),
    with this folder and only the reference distribution.
    """
    from harness.eval.reference import reference_python as create

    return create(REFERENCE_VENV, [REFERENCE_REQUIREMENT])


def run_reference(sizes: list[int]) -> dict[tuple[str, int], float]:
    """Time the reference's cases in its own environment; ``(case, size) -> median µs``."""
    python = reference_python()
    completed = subprocess.run(
        [str(python), str(HERE / "reference_cases.py"), ",".join(map(str, sizes))],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    rows: list[dict[str, Any]] = json.loads(completed.stdout)
    return {(row["case"], int(row["size"])): float(row["median_us"]) for row in rows}


def render(results: list[Measurement], reference: dict[tuple[str, int], float]) -> str:
    """A plain-text table of the results, with reference figures and ratios where known."""
    header = f"{'group':<13}{'case':<38}{'size':>7}{'harness µs':>14}{'reference µs':>15}{'ratio':>9}  note"
    lines = [header, "-" * len(header)]
    for m in results:
        ref = reference.get((m.case, m.size))
        ref_text = f"{ref:>15.1f}" if ref is not None else f"{'':>15}"
        ratio = f"{ref / m.median_us:>8.1f}x" if ref is not None and m.median_us > 0 else f"{'':>9}"
        lines.append(f"{m.group:<13}{m.case:<38}{m.size:>7}{m.median_us:>14.1f}{ref_text}{ratio}  {m.note}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the selected benchmark groups and print (and optionally save) the figures."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100,1000,10000", help="comma-separated history sizes")
    parser.add_argument(
        "--groups",
        default="core,capabilities,loop,middleware,providers,sessions",
        help="comma-separated groups",
    )
    parser.add_argument("--reference", action="store_true", help="also run pydantic-ai-harness 0.62.0")
    parser.add_argument("--json", type=Path, help="write the figures to this JSON file")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    warnings.simplefilter("ignore")
    groups = _groups()
    results: list[Measurement] = []
    for name in args.groups.split(","):
        if name not in groups:
            parser.error(f"unknown group {name!r}; choose from {', '.join(groups)}")
        for measurement in groups[name](sizes):
            results.append(measurement)
            label = f"{measurement.group}/{measurement.case}@{measurement.size}"
            print(f"  {label}: {measurement.median_us:.1f} µs", file=sys.stderr)
    reference = run_reference(sizes) if args.reference else {}
    if args.reference and "sessions" in args.groups.split(","):
        from sessions import reference_figures

        reference.update(reference_figures(sizes))
    print(render(results, reference))
    if args.json:
        payload = {
            "harness": [m.as_json() for m in results],
            "reference": [
                {"case": case, "size": size, "median_us": value} for (case, size), value in reference.items()
            ],
        }
        args.json.write_text(json.dumps(payload, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
