"""What DBOS journals for a harness run, against the transcript, and what each step costs.

For a run of ``--steps`` tool steps with ``--output-bytes`` tool outputs (200 and 5 KB by
default, the issue's figures) of the durable-testing scenario agent
(:mod:`harness.testing.durable`, no compaction), on an SQLite system database (or, with
``--postgres DSN``, a fresh PostgreSQL database) and an SQLite session store:

* the bytes DBOS stored: ``operation_outputs`` (the step outputs), the workflow's input and
  result, and every text column of every DBOS system table;
* the raw transcript (``dump_messages`` of the session's transcript);
* what passing the whole history to every model unit would have cost (the sum over the
  model units of the request's size in our wire JSON);
* wall time of the DBOS run against the plain loop (``Agent.run`` in process on the same
  kind of store), and the overhead per unit (model request or tool call).

``python plugins/harness-dbos/benchmarks/journal.py`` prints a Markdown table; ``--json
out.json`` saves the figures (``benchmarks/engines.py`` collects them).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from harness import HarnessExperimentalWarning, Session, dump_messages, open_store
from harness.core.effects import InProcessEffects, ModelRequestUnit
from harness.core.messages import CanonicalMessage
from harness.testing.durable import BLOCKED_FILE, SCENARIO_ENV, Scenario, scenario_agent

PROMPT = "Run the scenario."


class _Measuring(InProcessEffects):
    """The plain loop's effects, summing the whole request of every model unit."""

    def __init__(self) -> None:
        self.whole_history_bytes = 0
        self.model_units = 0
        self.tool_units = 0

    async def model_request(self, unit: ModelRequestUnit) -> CanonicalMessage:
        self.model_units += 1
        self.whole_history_bytes += len(dump_messages(list(unit.messages)))
        return await super().model_request(unit)

    async def tool_call(self, unit: Any) -> Any:
        self.tool_units += 1
        return await super().tool_call(unit)


def _scenario(folder: Path, steps: int, output_bytes: int) -> Scenario:
    records = folder / "records"
    records.mkdir(parents=True, exist_ok=True)
    (records / BLOCKED_FILE).write_text("{}")
    return Scenario(
        record_dir=str(records), steps=steps, output_bytes=output_bytes, compaction=False, record_bodies=False
    )


async def _plain(folder: Path, steps: int, output_bytes: int, effects: InProcessEffects) -> float:
    scenario = _scenario(folder, steps, output_bytes)
    store = open_store(f"sqlite:///{folder / 'plain.db'}")
    try:
        session = Session.create(store=store)
        agent = scenario_agent(scenario)
        started = time.perf_counter()
        await agent.run(PROMPT, session, effects=effects)
        return time.perf_counter() - started
    finally:
        store.close()


def _dbos(folder: Path, steps: int, output_bytes: int, system_db: str) -> tuple[float, str]:
    from harness_dbos import DBOSEngine

    scenario = _scenario(folder, steps, output_bytes)
    os.environ[SCENARIO_ENV] = scenario.to_json()
    store_url = f"sqlite:///{folder / 'durable.db'}"
    engine = DBOSEngine(
        system_db,
        store_url=store_url,
        agent="harness.testing.durable:make_agent",
        listen=False,
        polling_interval=0.05,
    )
    engine.launch()

    async def run() -> tuple[float, str]:
        started = time.perf_counter()
        summary = await (await engine.start(PROMPT)).result()
        return time.perf_counter() - started, summary.session_id

    try:
        elapsed, session_id = asyncio.run(run())
    finally:
        engine.shutdown()
    return elapsed, session_id


def measure(steps: int, output_bytes: int, postgres: str | None = None) -> dict[str, Any]:
    """Run the scenario plainly and as a DBOS workflow; return the figures.

    Args:
        steps: Tool steps of the run.
        output_bytes: Size of each tool output.
        postgres: A PostgreSQL server's DSN: the system database is a fresh database on it
            (dropped afterwards) instead of an SQLite file.
    """
    from harness_dbos.testing import journal_sizes, temporary_database

    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="harness-dbos-bench-")))
        if postgres is not None:
            system_db = stack.enter_context(temporary_database(postgres, prefix="harness_dbos_bench"))
        else:
            system_db = f"sqlite:///{folder / 'dbos.sqlite'}"
        measuring = _Measuring()
        asyncio.run(_plain(folder / "measure", steps, output_bytes, measuring))
        plain_seconds = asyncio.run(_plain(folder / "plain", steps, output_bytes, InProcessEffects()))
        dbos_seconds, session_id = _dbos(folder / "dbos", steps, output_bytes, system_db)
        sizes = journal_sizes(system_db)
        store = open_store(f"sqlite:///{folder / 'dbos' / 'durable.db'}")
        try:
            transcript = len(dump_messages(Session.open(store, session_id).transcript()))
        finally:
            store.close()
    units = measuring.model_units + measuring.tool_units
    return {
        "engine": "dbos",
        "system_database": "postgresql" if postgres is not None else "sqlite",
        "steps": steps,
        "output_bytes": output_bytes,
        "model_units": measuring.model_units,
        "tool_units": measuring.tool_units,
        "dbos_steps": sizes.steps,
        "transcript_bytes": transcript,
        "operation_outputs_bytes": sizes.operation_outputs,
        "workflow_input_bytes": sizes.inputs,
        "workflow_output_bytes": sizes.results,
        "system_tables_bytes": sizes.tables,
        "whole_history_bytes": measuring.whole_history_bytes,
        "journal_ratio": round(sizes.operation_outputs / max(1, transcript), 3),
        "tables_ratio": round(sizes.tables / max(1, transcript), 3),
        "whole_history_ratio": round(measuring.whole_history_bytes / max(1, transcript), 3),
        "plain_seconds": round(plain_seconds, 3),
        "dbos_seconds": round(dbos_seconds, 3),
        "overhead_ms_per_unit": round(1000 * (dbos_seconds - plain_seconds) / max(1, units), 3),
    }


def _kb(value: int) -> str:
    return f"{value / 1024:,.1f} KiB"


def table(figures: dict[str, Any]) -> str:
    """The figures as a Markdown table."""
    f = figures
    transcript = max(1, f["transcript_bytes"])
    rows = [
        ("raw transcript", _kb(f["transcript_bytes"]), "1.00x"),
        (
            "DBOS `operation_outputs` (step outputs)",
            _kb(f["operation_outputs_bytes"]),
            f"{f['journal_ratio']:.2f}x",
        ),
        ("DBOS system tables, all text columns", _kb(f["system_tables_bytes"]), f"{f['tables_ratio']:.2f}x"),
        (
            "whole history passed to every model unit",
            _kb(f["whole_history_bytes"]),
            f"{f['whole_history_ratio']:.1f}x",
        ),
        (
            "workflow input + result",
            _kb(f["workflow_input_bytes"] + f["workflow_output_bytes"]),
            f"{(f['workflow_input_bytes'] + f['workflow_output_bytes']) / transcript:.3f}x",
        ),
    ]
    lines = [
        f"DBOS on {f['system_database']}: {f['steps']} steps, {f['output_bytes']} B tool outputs, "
        f"{f['model_units']} model units + {f['tool_units']} tool units ({f['dbos_steps']} DBOS steps)",
        "",
        "| what | bytes | vs transcript |",
        "|---|---:|---:|",
        *(f"| {a} | {b} | {c} |" for a, b, c in rows),
        "",
        "| run | seconds | per unit |",
        "|---|---:|---:|",
        f"| plain loop (`Agent.run`, SQLite store) | {f['plain_seconds']:.2f} | "
        f"{1000 * f['plain_seconds'] / max(1, f['model_units'] + f['tool_units']):.2f} ms |",
        f"| DBOS workflow ({f['system_database']} system database) | {f['dbos_seconds']:.2f} | "
        f"{1000 * f['dbos_seconds'] / max(1, f['model_units'] + f['tool_units']):.2f} ms |",
        f"| **overhead per unit** | | **{f['overhead_ms_per_unit']:.2f} ms** |",
    ]
    return "\n".join(lines)


def main() -> None:
    """Parse the command line, measure, print, save."""
    parser = argparse.ArgumentParser(description="DBOS journal size and per-step overhead.")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--output-bytes", type=int, default=5000)
    parser.add_argument("--json", type=Path, default=None, help="save the figures here")
    parser.add_argument(
        "--postgres",
        default=None,
        metavar="DSN",
        help="system database on this PostgreSQL server (a fresh database)",
    )
    args = parser.parse_args()
    warnings.simplefilter("ignore", HarnessExperimentalWarning)
    figures = measure(args.steps, args.output_bytes, args.postgres)
    print(table(figures))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
