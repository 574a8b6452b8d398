"""Session store benchmarks: a step's checkpoint, loading, and the bytes a long session takes.

For every store that is available (SQLite always; the file store when
``harness.stores.jsonfile`` exists; PostgreSQL when ``harness_postgres`` is installed and
the server of ``HARNESS_TEST_POSTGRES_DSN`` answers, in a throwaway schema dropped
afterwards), against today's whole-file JSON save:

* ``session.checkpoint.<store>`` at N messages: ``Session.checkpoint()`` after one step
  (a model response and its tool-result request) was appended to a session already
  holding N messages; median and p95 per step. ``session.save.json_file``: the same
  session saved whole with ``Session.save(path)`` (today's format, rewritten every time).
* ``session.acheckpoint.<store>``: the same, awaited as a run awaits it
  (``Session.acheckpoint()``: the commit on the store's own thread, the event loop free).
* ``session.loop_step.<store>``: the four writes the loop makes per step (the response,
  the tool call started, finished with its answer, the tool-result request).
* ``session.open.<store>`` / ``session.load.json_file``: ``Session.open(store, id)`` and
  ``Session.load(path)`` of an N-message session.
* ``session.storage.<store>`` (size = steps): a real ``Agent`` run of ``--steps`` tool
  steps (``FunctionModel``, a ``bash`` tool) with ``ClearToolResults`` firing about
  every 20 steps, checkpointed by the loop at every step; the bytes it leaves on disk
  against the raw transcript (``dump_messages(session.transcript())``). SQLite is
  measured after ``PRAGMA wal_checkpoint(TRUNCATE)``, and again after ``VACUUM``.

The steps come from ``_session_workload`` (the transcript corpus when present, else
synthetic). ``python benchmarks/sessions.py`` prints the figures as Markdown tables;
``benchmarks/run.py --groups sessions`` runs the same cases in the common table, and
``--reference`` adds pydantic-ai-harness 0.62's stores (``reference_sessions.py``).
"""

from __future__ import annotations

__all__ = ["SessionMeasurement", "main", "reference_figures", "session_cases"]

import argparse
import asyncio
import gc
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import attrs

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from _session_report import reference_figures, render_markdown, run_reference  # noqa: E402
from _session_workload import Step, first_prompt, source, steps, steps_for_messages  # noqa: E402
from _timing import Measurement  # noqa: E402

from harness.core import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart, Usage  # noqa: E402
from harness.session import LedgerEntry, Session, SessionStore  # noqa: E402
from harness.stores.sqlite import SqliteStore  # noqa: E402
from harness.tools import RunContext  # noqa: E402  (module level: the tool's annotations are resolved)

GROUP = "session"
DEFAULT_STEPS = 1_000
COMPACT_EVERY = 20
"""Steps between two compactions in the storage case."""
KEEP_PAIRS = 3
POSTGRES_DSN_ENV = "HARNESS_TEST_POSTGRES_DSN"
DEFAULT_POSTGRES_DSN = "postgresql://root@127.0.0.1:5432/test"


@attrs.frozen
class SessionMeasurement(Measurement):
    """A session figure: the median and p95 per operation, and for storage the bytes on disk.

    Attributes:
        p95_us: The 95th percentile of the samples (the maximum below 20 samples).
        baseline_us: Today's whole-file operation on the same session (median), if compared.
        bytes_on_disk: Storage cases: what the store holds on disk.
        raw_bytes: Storage cases: the raw transcript's wire-format JSON size.
        extra: Further named figures (vacuumed size, edits recorded, ...).
    """

    p95_us: float | None = None
    baseline_us: float | None = None
    bytes_on_disk: int | None = None
    raw_bytes: int | None = None
    extra: dict[str, float] = attrs.field(factory=dict[str, float])


# ---------------------------------------------------------------- messages


def step_messages(step: Step) -> tuple[CanonicalMessage, CanonicalMessage]:
    """The model response and the tool-result request of one workload step."""
    calls = [
        ToolCallPart(tool_call_id=c.call_id, tool_name="bash", args={"command": c.command})
        for c in step.calls
    ]
    parts = [TextPart(step.text), *calls] if step.text else calls
    response = CanonicalMessage.response(*parts)
    request = CanonicalMessage.request(
        *(ToolReturnPart(tool_call_id=c.call_id, tool_name="bash", content=c.result) for c in step.calls)
    )
    return response, request


def history(messages: int) -> list[CanonicalMessage]:
    """The first prompt and enough steps for ``messages`` messages."""
    out = [CanonicalMessage.user(first_prompt())]
    for step in steps(steps_for_messages(messages)):
        out.extend(step_messages(step))
    return out


# ---------------------------------------------------------------- stores


@attrs.define
class Backend:
    """One store under test, in its own folder or schema, and how to measure what it holds."""

    name: str
    store: SessionStore
    folder: Path
    drop: Callable[[], None] = lambda: None
    schema: str | None = None

    def close(self) -> None:
        """Close the store and remove everything it wrote."""
        self.store.close()
        self.drop()
        shutil.rmtree(self.folder, ignore_errors=True)


def _sqlite(folder: Path) -> Backend:
    return Backend("sqlite", SqliteStore(folder / "sessions.db"), folder)


def _jsonfile(folder: Path) -> Backend | None:
    try:
        from harness.stores.jsonfile import JsonFileStore  # pyright: ignore[reportMissingImports]
    except ImportError:
        return None
    store: SessionStore = JsonFileStore(folder / "store")  # pyright: ignore[reportUnknownVariableType]
    return Backend("file", store, folder)


def postgres_dsn() -> str:
    """The server the PostgreSQL figures use (``$HARNESS_TEST_POSTGRES_DSN``, else the local one)."""
    return os.environ.get(POSTGRES_DSN_ENV, "").strip() or DEFAULT_POSTGRES_DSN


def _postgres(folder: Path) -> Backend | None:
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import psycopg
            from harness_postgres import PostgresStore
            from harness_postgres.testing import drop_schema, unique_schema
    except ImportError:
        return None
    dsn = postgres_dsn()
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=3) as conn:
            conn.execute(b"SELECT 1")
    except psycopg.Error:
        return None
    schema = unique_schema("harness_bench")
    try:
        store = PostgresStore(dsn, schema=schema)
    except Exception:
        drop_schema(dsn, schema)
        raise
    return Backend("postgresql", store, folder, lambda: drop_schema(dsn, schema), schema)


BACKENDS: dict[str, Callable[[Path], Backend | None]] = {
    "sqlite": _sqlite,
    "file": _jsonfile,
    "postgresql": _postgres,
}


def open_backends(names: list[str]) -> Iterator[Backend]:
    """A fresh backend for each name that is available here (each in a new temporary folder)."""
    for name in names:
        folder = Path(tempfile.mkdtemp(prefix=f"harness-bench-{name}-"))
        backend = BACKENDS[name](folder)
        if backend is None:
            shutil.rmtree(folder, ignore_errors=True)
            continue
        yield backend


def disk_usage(backend: Backend) -> dict[str, int]:
    """What ``backend`` holds on disk; SQLite with its WAL checkpointed, and again vacuumed.

    The store is closed first (SQLite: so the WAL can be truncated).
    """
    backend.store.close()
    if backend.name == "postgresql":
        import psycopg

        with psycopg.connect(postgres_dsn(), autocommit=True) as conn:
            row = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
                (backend.schema,),
            ).fetchone()
        return {"bytes": int(row[0]) if row else 0}
    files = [p for p in backend.folder.rglob("*") if p.is_file()]
    if backend.name != "sqlite":
        return {"bytes": sum(p.stat().st_size for p in files)}
    database = backend.folder / "sessions.db"
    db = sqlite3.connect(database, isolation_level=None)
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        checkpointed = sum(p.stat().st_size for p in backend.folder.iterdir() if p.is_file())
        db.execute("VACUUM")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        vacuumed = sum(p.stat().st_size for p in backend.folder.iterdir() if p.is_file())
    finally:
        db.close()
    return {"bytes": checkpointed, "vacuumed": vacuumed}


# ---------------------------------------------------------------- timing


def _sample(fn: Callable[[], object], *, runs: int, budget: float, min_runs: int = 5) -> list[float]:
    """Up to ``runs`` timings of ``fn`` in µs, within ``budget`` seconds (at least ``min_runs``)."""
    gc.collect()
    samples: list[float] = []
    deadline = time.perf_counter() + budget
    while len(samples) < runs and (len(samples) < min_runs or time.perf_counter() < deadline):
        start = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - start) / 1_000)
    return samples


def p95(samples: list[float]) -> float:
    """The 95th percentile (the maximum when there are fewer than 20 samples)."""
    if len(samples) < 20:
        return max(samples)
    return statistics.quantiles(samples, n=20, method="inclusive")[18]


def _figure(
    case: str, size: int, samples: list[float], note: str = "", baseline: float | None = None
) -> SessionMeasurement:
    median = statistics.median(samples)
    return SessionMeasurement(
        GROUP, case, size, median, len(samples), note, p95_us=p95(samples), baseline_us=baseline
    )


def _new_session(store: SessionStore | None, messages: list[CanonicalMessage]) -> Session:
    session = (
        Session.create(store=store, project_id="bench", working_directory="/bench")
        if store is not None
        else Session(project_id="bench", working_directory="/bench")
    )
    session.messages = list(messages)
    return session


# ---------------------------------------------------------------- cases


Timed = tuple[Callable[[], object], Callable[[], object]]
"""``(prepare, operation)``: ``prepare`` runs untimed before each timing of ``operation``."""


def _batched(start: Callable[[int], Timed], size: int, *, runs: int, budget: float) -> list[float]:
    """Timings of sessions kept near ``size`` messages: a fresh one every ``size / 20`` steps.

    ``start(first_step)`` builds a session of ``size`` messages and returns what to time on
    it; each batch appends at most 5 % (or one step) before the next session is built.
    """
    per = max(1, min(runs, size // 20))
    samples: list[float] = []
    deadline = time.perf_counter() + budget
    first = steps_for_messages(size)
    while len(samples) < runs and (len(samples) < 5 or time.perf_counter() < deadline):
        prepare, operation = start(first)
        gc.collect()
        for _ in range(min(per, runs - len(samples))):
            if len(samples) >= 5 and time.perf_counter() > deadline:
                break
            prepare()
            began = time.perf_counter_ns()
            operation()
            samples.append((time.perf_counter_ns() - began) / 1_000)
        first += per
    return samples


def checkpoint_cases(
    backends: list[Backend], size: int, folder: Path, runs: int = 200
) -> Iterator[SessionMeasurement]:
    """Per-step checkpoint on each backend at ``size`` messages, and today's whole-file save."""
    prefix = history(size)
    path = folder / f"save-{size}.json"

    def file_batch(first: int) -> Timed:
        session = _new_session(None, prefix)
        session.save(path)
        pending = steps(runs, start=first)
        return lambda: session.messages.extend(step_messages(next(pending))), session.save

    save = _batched(file_batch, size, runs=runs, budget=8.0)
    save_median = statistics.median(save)
    megabytes = path.stat().st_size / 1e6
    yield _figure("session.save.json_file", size, save, f"{megabytes:.1f} MB rewritten per step")
    for backend in backends:

        def store_batch(first: int, store: SessionStore = backend.store) -> Timed:
            session = _new_session(store, prefix)
            session.checkpoint()
            pending = steps(runs, start=first)
            return lambda: session.messages.extend(step_messages(next(pending))), session.checkpoint

        samples = _batched(store_batch, size, runs=runs, budget=8.0)
        median = statistics.median(samples)
        note = f"p95 {p95(samples):.0f} µs; whole-file save {save_median / median:.0f}x slower"
        yield _figure(f"session.checkpoint.{backend.name}", size, samples, note, save_median)
        loop = asyncio.new_event_loop()

        def awaited_batch(
            first: int, store: SessionStore = backend.store, loop: asyncio.AbstractEventLoop = loop
        ) -> Timed:
            session = _new_session(store, prefix)
            loop.run_until_complete(session.acheckpoint())
            pending = steps(runs, start=first)

            def write() -> object:
                return loop.run_until_complete(session.acheckpoint())

            return lambda: session.messages.extend(step_messages(next(pending))), write

        awaited = _batched(awaited_batch, size, runs=runs, budget=8.0)
        loop.close()
        extra = statistics.median(awaited) - median
        note = f"p95 {p95(awaited):.0f} µs; the thread hop adds {extra:.0f} µs"
        yield _figure(f"session.acheckpoint.{backend.name}", size, awaited, note, save_median)
        yield _loop_step(backend, size, runs)


def _loop_step(backend: Backend, size: int, runs: int) -> SessionMeasurement:
    """The loop's four writes of one step: response, call started, call finished, results."""
    from harness.session.tracking import encode_part

    prefix = history(size)

    def batch(first: int) -> Timed:
        session = _new_session(backend.store, prefix)
        session.checkpoint()
        pending = steps(runs, start=first)
        current: list[tuple[CanonicalMessage, CanonicalMessage]] = []

        def prepare() -> None:
            current[:] = [step_messages(next(pending))]

        def four_writes() -> None:
            response, request = current[0]
            session.messages.append(response)
            session.checkpoint()
            now = datetime.now(UTC)
            returns = [p for p in request.parts if isinstance(p, ToolReturnPart)]
            for part in returns:
                session.record_tool(LedgerEntry(part.tool_call_id, part.tool_name or "bash", "started", now))
            session.checkpoint()
            for part in returns:
                result = encode_part(part)
                entry = LedgerEntry(
                    part.tool_call_id, part.tool_name or "bash", "completed", now, now, result
                )
                session.record_tool(entry)
            session.checkpoint()
            session.messages.append(request)
            session.checkpoint()

        return prepare, four_writes

    samples = _batched(batch, size, runs=runs, budget=8.0)
    return _figure(
        f"session.loop_step.{backend.name}", size, samples, f"p95 {p95(samples):.0f} µs; 4 commits"
    )


def load_cases(backends: list[Backend], size: int, folder: Path) -> Iterator[SessionMeasurement]:
    """``Session.open`` of a ``size``-message session on each backend, and ``Session.load`` of its file."""
    prefix = history(size)
    path = folder / f"load-{size}.json"
    _new_session(None, prefix).save(path)
    load = _sample(lambda: Session.load(path), runs=25, budget=6.0)
    load_median = statistics.median(load)
    yield _figure("session.load.json_file", size, load, f"{path.stat().st_size / 1e6:.1f} MB")
    for backend in backends:
        session = _new_session(backend.store, prefix)
        session.checkpoint()
        sid = session.session_id
        samples = _sample(lambda b=backend, s=sid: Session.open(b.store, s), runs=25, budget=6.0)
        median = statistics.median(samples)
        note = f"{load_median / median:.2f}x the file load's speed"
        yield _figure(f"session.open.{backend.name}", size, samples, note, load_median)


def _clear_tool_results() -> object:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from harness_clear_tool_results import ClearToolResults

    # A firing clears all but KEEP_PAIRS pairs, and counts the messages after the newest
    # cleared result: it fires again after max_messages - 2 * KEEP_PAIRS new messages.
    return ClearToolResults(max_messages=2 * COMPACT_EVERY + 2 * KEEP_PAIRS, keep_pairs=KEEP_PAIRS)


async def run_agent_steps(session: Session, count: int) -> tuple[int, float]:
    """A real ``Agent`` run of ``count`` tool steps on ``session``; ``(steps, seconds)``."""
    from harness.models.function import FunctionModel
    from harness.run import Agent

    script = list(steps(count))
    results = {call.call_id: call.result for step in script for call in step.calls}
    made = 0

    def model(_messages: list[CanonicalMessage], _info: object) -> CanonicalMessage:
        nonlocal made
        usage = Usage(request_tokens=1, response_tokens=1)  # no tokenizing of the prompt by the test model
        if made >= len(script):
            return CanonicalMessage.response(TextPart("All tests pass now."), usage=usage)
        response, _ = step_messages(script[made])
        made += 1
        return response.replace(usage=usage)

    def bash(ctx: RunContext, command: str) -> str:
        """Run a shell command.

        Args:
            ctx: The run context.
            command: The command line.
        """
        del command
        return results[ctx.tool_call_id or ""]

    agent = Agent(
        FunctionModel(model), tools=[bash], capabilities=[_clear_tool_results()], max_iterations=count + 2
    )
    start = time.perf_counter()
    await agent.run(first_prompt(), session=session)
    return made, time.perf_counter() - start


def storage_cases(backends: list[Backend], count: int) -> Iterator[SessionMeasurement]:
    """Bytes on disk after a ``count``-step agent run with a compaction every 20 steps."""
    import asyncio

    from harness.wire import dump_messages

    for backend in backends:
        session = Session.create(store=backend.store, project_id="bench", working_directory="/bench")
        made, seconds = asyncio.run(run_agent_steps(session, count))
        raw = len(dump_messages(session.transcript()))
        view = len(session.to_bytes())
        edits = len(backend.store.edits(session.session_id))
        usage = disk_usage(backend)
        on_disk = usage["bytes"]
        extra: dict[str, float] = {"edits": edits, "json_file_bytes": view, "steps": made}
        note = f"{on_disk / 1e6:.2f} MB = {on_disk / raw:.2f}x raw {raw / 1e6:.2f} MB; {edits} edits"
        if "vacuumed" in usage:
            extra["vacuumed_bytes"] = usage["vacuumed"]
            note += f"; vacuumed {usage['vacuumed'] / raw:.2f}x"
        yield SessionMeasurement(
            GROUP,
            f"session.storage.{backend.name}",
            count,
            seconds / max(made, 1) * 1e6,
            made,
            note + "; time = µs per agent step",
            bytes_on_disk=on_disk,
            raw_bytes=raw,
            extra=extra,
        )


def session_cases(
    sizes: list[int], *, stores: list[str] | None = None, storage_steps: int = DEFAULT_STEPS
) -> Iterator[Measurement]:
    """Every session figure, for ``benchmarks/run.py`` (the ``sessions`` group)."""
    names = stores if stores is not None else list(BACKENDS)
    folder = Path(tempfile.mkdtemp(prefix="harness-bench-files-"))
    try:
        for size in sizes:
            backends = list(open_backends(names))
            try:
                yield from checkpoint_cases(backends, size, folder)
                yield from load_cases(backends, size, folder)
            finally:
                for backend in backends:
                    backend.close()
            for leftover in folder.iterdir():
                leftover.unlink()
        if storage_steps:
            backends = list(open_backends(names))
            try:
                yield from storage_cases(backends, storage_steps)
            finally:
                for backend in backends:
                    backend.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Run the session benchmarks and print them as Markdown (optionally save JSON)."""
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--sizes", default="100,1000,10000", help="comma-separated message counts")
    parser.add_argument(
        "--stores", default=",".join(BACKENDS), help="comma-separated: " + ", ".join(BACKENDS)
    )
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS, help="steps of the storage run (0: skip)")
    parser.add_argument("--reference", action="store_true", help="also run pydantic-ai-harness 0.62's stores")
    parser.add_argument("--json", type=Path, help="write the figures to this JSON file")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    stores = [s for s in args.stores.split(",") if s]
    unknown = [s for s in stores if s not in BACKENDS]
    if unknown:
        parser.error(f"unknown store {unknown[0]!r}; choose from {', '.join(BACKENDS)}")
    results: list[SessionMeasurement] = []
    for m in session_cases(sizes, stores=stores, storage_steps=args.steps):
        assert isinstance(m, SessionMeasurement)
        results.append(m)
        print(f"  {m.case}@{m.size}: {m.median_us:,.1f} µs  {m.note}", file=sys.stderr)
    reference = run_reference(sizes, args.steps) if args.reference else []
    print(render_markdown(results, reference))
    if args.json:
        payload = {"workload": source(), "harness": [m.as_json() for m in results], "reference": reference}
        args.json.write_text(json.dumps(payload, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
