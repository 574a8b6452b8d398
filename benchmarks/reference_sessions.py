"""Reference side of the session benchmarks: pydantic-ai-harness 0.62's SQLite stores, same workload.

Run by ``benchmarks/sessions.py --reference`` (and ``run.py --reference``) inside the
reference environment (``benchmarks/.ref-venv``); it imports nothing from harness and
prints one JSON list on stdout. Usage: ``reference_sessions.py <sizes> <steps>``.

pydantic-ai-harness has two comparable stores, both measured per step with the same
steps as the harness side (``_session_workload``):

* ``SqliteStepStore.save_snapshot`` (``StepPersistence``'s per-step snapshot: messages
  stored once by SHA-256, one reference row per message per snapshot) as
  ``session.checkpoint.sqlite``, and ``latest_snapshot`` as ``session.open.sqlite``;
  ``session.loop_step.sqlite`` adds the two tool-effect records of the step's calls;
* ``SqliteConversationStore.save`` (a revision-checked row holding the whole transcript)
  as ``session.conversation_save.sqlite``, ``get`` as ``session.conversation_get.sqlite``.

Storage (``session.storage.sqlite``): ``steps`` steps, one snapshot and two tool-effect
records per step, the history compacted every 20 steps by the reference's own
``ClearToolResults.compact`` (keep_pairs=3; its edits replace the history, as in a run),
then the file's size after ``PRAGMA wal_checkpoint(TRUNCATE)`` against the raw
transcript (every message as first written, as pydantic-ai JSON).
"""

from __future__ import annotations

import asyncio
import gc
import json
import sqlite3
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

warnings.simplefilter("ignore")
sys.path.insert(0, str(Path(__file__).parent))

from _session_workload import Step, first_prompt, steps, steps_for_messages  # noqa: E402
from opentelemetry.trace import NoOpTracer  # noqa: E402
from pydantic_ai import RunContext  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.test import TestModel  # noqa: E402
from pydantic_ai.usage import RunUsage  # noqa: E402
from pydantic_ai_harness.compaction import ClearToolResults  # noqa: E402
from pydantic_ai_harness.step_persistence import (  # noqa: E402
    ContinuableSnapshot,
    RunRecord,
    SqliteStepStore,
    ToolEffectRecord,
)
from pydantic_ai_harness.step_persistence.conversations import (  # noqa: E402
    ConversationSummary,
    SqliteConversationStore,
)

RUNS = 200
COMPACT_EVERY = 20


def step_messages(step: Step) -> tuple[ModelResponse, ModelRequest]:
    calls = [ToolCallPart("bash", {"command": c.command}, tool_call_id=c.call_id) for c in step.calls]
    parts: list[Any] = [TextPart(step.text), *calls] if step.text else calls
    returns = [ToolReturnPart("bash", c.result, tool_call_id=c.call_id) for c in step.calls]
    request = ModelRequest(parts=list(returns))
    return ModelResponse(parts=parts), request


def history(messages: int) -> list[ModelMessage]:
    out: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(first_prompt())])]
    for step in steps(steps_for_messages(messages)):
        out.extend(step_messages(step))
    return out


Timed = tuple[Callable[[], object], Callable[[], Awaitable[object]]]


async def batched(start: Callable[[int], Awaitable[Timed]], size: int, budget: float = 8.0) -> list[float]:
    """As the harness side: a fresh run every ``size / 20`` steps, so the history stays near ``size``."""
    per = max(1, min(RUNS, size // 20))
    samples: list[float] = []
    deadline = time.perf_counter() + budget
    first = steps_for_messages(size)
    while len(samples) < RUNS and (len(samples) < 5 or time.perf_counter() < deadline):
        prepare, operation = await start(first)
        gc.collect()
        for _ in range(min(per, RUNS - len(samples))):
            if len(samples) >= 5 and time.perf_counter() > deadline:
                break
            prepare()
            began = time.perf_counter_ns()
            await operation()
            samples.append((time.perf_counter_ns() - began) / 1_000)
        first += per
    return samples


def row(case: str, size: int, samples: list[float], **extra: Any) -> dict[str, Any]:
    ordered = sorted(samples)
    p95 = ordered[-1] if len(ordered) < 20 else statistics.quantiles(ordered, n=20, method="inclusive")[18]
    return {"case": case, "size": size, "median_us": statistics.median(samples), "p95_us": p95, **extra}


async def step_cases(size: int, folder: Path) -> list[dict[str, Any]]:
    prefix = history(size)
    steps_store = SqliteStepStore(database=folder / f"steps-{size}.db", media_store=None)
    runs = 0

    async def snapshot_batch(first: int, effects: bool = False) -> Timed:
        nonlocal runs
        runs += 1
        run_id = f"run-{size}-{runs}-{effects}"
        await steps_store.register_run(RunRecord(run_id=run_id))
        messages = list(prefix)
        await steps_store.save_snapshot(ContinuableSnapshot(run_id=run_id, step_index=0, messages=messages))
        pending = steps(RUNS, start=first)
        calls: list[str] = []

        def prepare() -> None:
            response, request = step_messages(next(pending))
            messages.extend((response, request))
            calls[:] = [p.tool_call_id for p in request.parts if isinstance(p, ToolReturnPart)]

        async def save() -> None:
            if effects:
                for call_id in calls:
                    for status in ("started", "completed"):
                        effect = ToolEffectRecord(
                            tool_call_id=call_id, tool_name="bash", run_id=run_id, status=status
                        )
                        await steps_store.record_tool_effect(effect)
            await steps_store.save_snapshot(
                ContinuableSnapshot(run_id=run_id, step_index=len(messages), messages=messages)
            )

        return prepare, save

    async def with_effects(first: int) -> Timed:
        return await snapshot_batch(first, effects=True)

    out = [row("session.checkpoint.sqlite", size, await batched(snapshot_batch, size))]
    out.append(row("session.loop_step.sqlite", size, await batched(with_effects, size)))
    conversations = SqliteConversationStore(database=folder / f"conversations-{size}.db")

    async def conversation_batch(first: int) -> Timed:
        messages = list(prefix)
        first_summary = ConversationSummary(workspace="/bench")
        state = {"summary": await conversations.save(summary=first_summary, messages=messages)}
        pending = steps(RUNS, start=first)

        def prepare() -> None:
            messages.extend(step_messages(next(pending)))

        async def save() -> None:
            state["summary"] = await conversations.save(summary=state["summary"], messages=messages)

        return prepare, save

    out.append(row("session.conversation_save.sqlite", size, await batched(conversation_batch, size)))
    run_id = f"load-{size}"
    await steps_store.register_run(RunRecord(run_id=run_id))
    await steps_store.save_snapshot(ContinuableSnapshot(run_id=run_id, step_index=0, messages=prefix))
    saved = await conversations.save(summary=ConversationSummary(workspace="/bench"), messages=prefix)
    for case, load in (
        ("session.open.sqlite", lambda: steps_store.latest_snapshot(run_id=run_id)),
        ("session.conversation_get.sqlite", lambda: conversations.get(conversation_id=saved.id)),
    ):
        samples: list[float] = []
        deadline = time.perf_counter() + 6.0
        while len(samples) < 25 and (len(samples) < 5 or time.perf_counter() < deadline):
            began = time.perf_counter_ns()
            await load()
            samples.append((time.perf_counter_ns() - began) / 1_000)
        out.append(row(case, size, samples))
    return out


async def storage_case(count: int, folder: Path) -> dict[str, Any]:
    database = folder / "storage.db"
    store = SqliteStepStore(database=database, media_store=None)
    await store.register_run(RunRecord(run_id="storage"))
    clear = ClearToolResults(max_messages=1, keep_pairs=3)
    raw: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(first_prompt())])]
    messages = list(raw)
    began = time.perf_counter()
    for index, step in enumerate(steps(count)):
        response, request = step_messages(step)
        raw.extend((response, request))
        messages.extend((response, request))
        for call in step.calls:
            for status in ("started", "completed"):
                effect = ToolEffectRecord(
                    tool_call_id=call.call_id, tool_name="bash", run_id="storage", status=status
                )
                await store.record_tool_effect(effect)
        if (index + 1) % COMPACT_EVERY == 0:
            ctx = RunContext[Any](
                deps=None,
                model=TestModel(),
                usage=RunUsage(),
                messages=list(messages),
                tracer=NoOpTracer(),
                pending_messages=[],
            )
            messages = await clear.compact(messages, ctx)
        await store.save_snapshot(ContinuableSnapshot(run_id="storage", step_index=index, messages=messages))
    seconds = time.perf_counter() - began
    db = sqlite3.connect(database)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    on_disk = sum(p.stat().st_size for p in folder.iterdir() if p.name.startswith("storage.db"))
    raw_bytes = len(ModelMessagesTypeAdapter.dump_json(raw))
    return {
        "case": "session.storage.sqlite",
        "size": count,
        "median_us": seconds / count * 1e6,
        "bytes_on_disk": on_disk,
        "raw_bytes": raw_bytes,
    }


async def main() -> None:
    sizes = [int(s) for s in sys.argv[1].split(",") if s]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="harness-ref-sessions-") as tmp:
        for size in sizes:
            folder = Path(tmp) / str(size)
            folder.mkdir()
            rows.extend(await step_cases(size, folder))
        if count:
            folder = Path(tmp) / "storage"
            folder.mkdir()
            rows.append(await storage_case(count, folder))
    json.dump(rows, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
