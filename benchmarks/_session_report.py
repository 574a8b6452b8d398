"""The session benchmarks' report: the reference side (pydantic-ai-harness) and Markdown tables.

``reference_sessions.py`` runs in the reference environment (``benchmarks/.ref-venv``,
created by ``run.py``'s :func:`~run.reference_python`); this module starts it and renders
both sides' figures (see ``sessions.py``).
"""

from __future__ import annotations

__all__ = ["reference_figures", "render_markdown", "run_reference"]

import json
import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _session_workload import source

if TYPE_CHECKING:
    from sessions import SessionMeasurement

HERE = Path(__file__).resolve().parent
DEFAULT_STEPS = 1_000


def run_reference(sizes: list[int], storage_steps: int) -> list[dict[str, Any]]:
    """pydantic-ai-harness 0.62's stores on the same workload, in its own environment."""
    from run import reference_python

    script = HERE / "reference_sessions.py"
    completed = subprocess.run(
        [str(reference_python()), str(script), ",".join(map(str, sizes)), str(storage_steps)],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    rows: list[dict[str, Any]] = json.loads(completed.stdout)
    return rows


def reference_figures(sizes: list[int]) -> dict[tuple[str, int], float]:
    """The reference's timings by ``(case, size)``, for ``run.py --reference`` (storage left out)."""
    rows = run_reference(sizes, DEFAULT_STEPS)
    return {
        (str(r["case"]), int(r["size"])): float(r["median_us"])
        for r in rows
        if r.get("bytes_on_disk") is None
    }


def render_markdown(results: list[SessionMeasurement], reference: list[dict[str, Any]]) -> str:
    """The figures as Markdown tables (time per operation, then storage)."""
    ref = {(str(r["case"]), int(r["size"])): r for r in reference}
    lines = [
        f"Workload: {source()}.",
        "",
        "| case | messages | median µs | p95 µs | whole-file µs | file / store "
        "| reference µs | ref / harness |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for m in results:
        if m.bytes_on_disk is not None:
            continue
        base = f"{m.baseline_us:,.0f}" if m.baseline_us else ""
        ratio = f"{m.baseline_us / m.median_us:,.1f}x" if m.baseline_us else ""
        r = ref.get((m.case, m.size))
        ref_text = f"{float(r['median_us']):,.0f}" if r else ""
        ref_ratio = f"{float(r['median_us']) / m.median_us:,.1f}x" if r else ""
        p95_text = f"{m.p95_us:,.0f}" if m.p95_us is not None else ""
        lines.append(
            f"| {m.case} | {m.size:,} | {m.median_us:,.0f} | {p95_text} | {base} | {ratio} "
            f"| {ref_text} | {ref_ratio} |"
        )
    lines += [
        "",
        "| store | steps | bytes on disk | raw transcript | ratio | vacuumed ratio | edits "
        "| µs per agent step |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for m in results:
        if m.bytes_on_disk is None or not m.raw_bytes:
            continue
        vacuumed = m.extra.get("vacuumed_bytes")
        vac = f"{vacuumed / m.raw_bytes:.2f}x" if vacuumed else ""
        lines.append(
            f"| {m.case} | {m.size:,} | {m.bytes_on_disk:,} | {m.raw_bytes:,} | "
            f"{m.bytes_on_disk / m.raw_bytes:.2f}x | {vac} | {int(m.extra.get('edits', 0))} "
            f"| {m.median_us:,.0f} |"
        )
    matched = {(m.case, m.size) for m in results}
    others = [
        r for r in reference if r.get("bytes_on_disk") is None and (r["case"], int(r["size"])) not in matched
    ]
    if others:
        lines += ["", "| pydantic-ai-harness case | messages | median µs | p95 µs |", "|---|---:|---:|---:|"]
        lines += [
            f"| {r['case']} | {int(r['size']):,} | {float(r['median_us']):,.0f} | {float(r['p95_us']):,.0f} |"
            for r in others
        ]
    lines += ["", "| reference storage | steps | bytes on disk | raw transcript | ratio | µs per step |"]
    lines += ["|---|---:|---:|---:|---:|---:|"]
    for r in reference:
        if r.get("bytes_on_disk") is not None:
            raw = int(r.get("raw_bytes") or 0)
            ratio = f"{int(r['bytes_on_disk']) / raw:.2f}x" if raw else ""
            lines.append(
                f"| {r['case']} (pydantic-ai-harness) | {int(r['size']):,} | {int(r['bytes_on_disk']):,} | "
                f"{raw:,} | {ratio} | {float(r['median_us']):,.0f} |"
            )
    return "\n".join(lines)
