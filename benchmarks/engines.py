"""Durable engines: what a run's units carry, and what each engine journals and costs per step.

For a run of ``--steps`` tool steps with ``--output-bytes`` tool outputs (200 and 5 KB by
default, the issue's figures), on the durable-testing scenario agent
(:mod:`harness.testing.durable`):

* **engine-neutral unit traffic** (always): every unit of the run measured in our wire
  JSON while it runs in process: the request deltas the units carry, the responses and
  tool outcomes they return, and what passing the whole history to every model unit would
  have cost (the peers' design), against the raw transcript;
* **each engine's journal and per-step overhead**, from the engine plugins' own
  benchmarks when they are installed: ``plugins/harness-dbos/benchmarks/journal.py``
  (DBOS's ``operation_outputs`` on SQLite) and ``plugins/harness-temporal/benchmarks/journal.py``
  (Temporal's workflow history on a dev server), each run as a subprocess with ``--json``.

``python benchmarks/engines.py`` prints Markdown tables; ``--json out.json`` saves the figures.
"""

from __future__ import annotations

__all__ = ["UnitTraffic", "main", "unit_traffic"]

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import attrs

from harness import HarnessExperimentalWarning, Session, dump_messages, open_store
from harness.core.effects import InProcessEffects, ModelRequestUnit, ToolCallUnit, ToolOutcome
from harness.core.messages import CanonicalMessage
from harness.testing.durable import Scenario, scenario_agent

ROOT = Path(__file__).resolve().parent.parent
ENGINE_BENCHMARKS = {
    "dbos": ROOT / "plugins" / "harness-dbos" / "benchmarks" / "journal.py",
    "temporal": ROOT / "plugins" / "harness-temporal" / "benchmarks" / "journal.py",
}


@attrs.define
class UnitTraffic:
    """What the units of one run carried, in bytes of our wire JSON."""

    steps: int
    output_bytes: int
    model_units: int = 0
    tool_units: int = 0
    delta_bytes: int = 0
    response_bytes: int = 0
    outcome_bytes: int = 0
    whole_history_bytes: int = 0
    transcript_bytes: int = 0

    @property
    def journal_bytes(self) -> int:
        """A delta journal: each request's delta, each response and each tool outcome."""
        return self.delta_bytes + self.response_bytes + self.outcome_bytes

    def as_json(self) -> dict[str, Any]:
        """The figures as a JSON object."""
        data = attrs.asdict(self)
        data["journal_bytes"] = self.journal_bytes
        data["journal_ratio"] = round(self.journal_bytes / max(1, self.transcript_bytes), 3)
        data["whole_history_ratio"] = round(self.whole_history_bytes / max(1, self.transcript_bytes), 3)
        return data


def _size(messages: list[CanonicalMessage]) -> int:
    return len(dump_messages(messages))


class _Measuring(InProcessEffects):
    """Runs every unit in process and measures what an engine would ship and journal."""

    deltas = True

    def __init__(self, traffic: UnitTraffic) -> None:
        self.traffic = traffic

    async def model_request(self, unit: ModelRequestUnit) -> CanonicalMessage:
        traffic = self.traffic
        traffic.model_units += 1
        traffic.whole_history_bytes += _size(list(unit.messages))
        if unit.delta is not None:
            delta = unit.delta
            carried = [*delta.added]
            if delta.system or delta.scoped:
                carried.append(CanonicalMessage.request(*delta.system, *delta.scoped))
            traffic.delta_bytes += _size(carried) if carried else 0
        else:
            traffic.delta_bytes += _size(list(unit.messages))
        response = await super().model_request(unit)
        traffic.response_bytes += _size([response])
        return response

    async def tool_call(self, unit: ToolCallUnit) -> ToolOutcome:
        self.traffic.tool_units += 1
        outcome = await super().tool_call(unit)
        self.traffic.outcome_bytes += len(json.dumps(outcome.to_json(), separators=(",", ":")).encode())
        return outcome


def unit_traffic(steps: int, output_bytes: int) -> UnitTraffic:
    """Run the scenario in process on a SQLite store and measure its units."""
    traffic = UnitTraffic(steps=steps, output_bytes=output_bytes)
    with tempfile.TemporaryDirectory() as folder:
        scenario = Scenario(
            record_dir=folder, steps=steps, output_bytes=output_bytes, compaction=False, record_bodies=False
        )
        store = open_store(f"sqlite:///{folder}/sessions.db")
        try:
            session = Session.create(store=store)
            agent = scenario_agent(scenario)
            asyncio.run(agent.run("Run the scenario.", session=session, effects=_Measuring(traffic)))
            traffic.transcript_bytes = _size(session.transcript())
        finally:
            store.close()
    return traffic


def _engine_figures(name: str, script: Path, steps: int, output_bytes: int) -> dict[str, Any] | None:
    if not script.exists():
        return None
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "figures.json"
        command = [sys.executable, str(script), "--steps", str(steps), "--output-bytes", str(output_bytes)]
        done = subprocess.run(
            [*command, "--json", str(out)], capture_output=True, text=True, env=os.environ.copy(), check=False
        )
        if done.returncode != 0 or not out.exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return {"engine": name, "error": " | ".join(tail) or f"exit code {done.returncode}"}
        return json.loads(out.read_text())


def _table(traffic: UnitTraffic) -> str:
    t = traffic
    rows = [
        ("raw transcript", t.transcript_bytes),
        ("request deltas carried by the model units", t.delta_bytes),
        ("responses returned by the model units", t.response_bytes),
        ("tool outcomes returned by the tool units", t.outcome_bytes),
        ("**a delta journal** (the three above)", t.journal_bytes),
        ("whole history passed to every model unit (the peers' design)", t.whole_history_bytes),
    ]
    lines = [
        f"Unit traffic: {t.steps} steps, {t.output_bytes:,}-byte tool outputs, "
        f"{t.model_units} model units, {t.tool_units} tool units",
        "",
        "| what | bytes | times the transcript |",
        "|---|---:|---:|",
    ]
    lines += [f"| {what} | {size:,} | {size / max(1, t.transcript_bytes):.2f} |" for what, size in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure and print; return the exit code."""
    warnings.simplefilter("ignore", HarnessExperimentalWarning)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--output-bytes", type=int, default=5000)
    parser.add_argument("--engines", default="dbos,temporal", help="comma-separated; empty for none")
    parser.add_argument("--json", type=Path, default=None, help="save the figures here")
    args = parser.parse_args(argv)
    traffic = unit_traffic(args.steps, args.output_bytes)
    print(_table(traffic))
    figures: dict[str, Any] = {"units": traffic.as_json(), "engines": {}}
    for name in [e for e in args.engines.split(",") if e]:
        found = _engine_figures(name, ENGINE_BENCHMARKS[name], args.steps, args.output_bytes)
        if found is None:
            print(f"\n{name}: not measured ({ENGINE_BENCHMARKS[name]} is missing)")
            continue
        figures["engines"][name] = found
        print(f"\n{name}: " + json.dumps(found, indent=None))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
