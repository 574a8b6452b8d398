"""What a step's checkpoint and a load cost on PostgreSQL, by history length (a script, not a timed test).

Usage: ``python plugins/harness-postgres/benchmarks/checkpoint_cost.py [--dsn URL] [--steps N]``
(default DSN: ``$HARNESS_TEST_POSTGRES_DSN``, else the local test server). Each measurement
runs in a schema of its own, dropped afterwards.

For each size (100, 1,000 and 10,000 messages) a session of that many messages is written,
then one step (a tool call and its result: two messages) is appended and checkpointed
``--steps`` times; the median and the 95th percentile are reported. Then a 10,000-message
session is loaded (``store.load`` alone, and ``Session.open``, which also decodes the
messages). The server round trip (``SELECT 1``) is given to read the figures against:
a checkpoint is two round trips whatever the length.

:func:`measure` returns the same figures as a dict, for ``benchmarks/sessions.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from harness_postgres import PostgresStore
from harness_postgres.store import Durability
from harness_postgres.testing import drop_schema, test_dsn, unique_schema

from harness import CanonicalMessage, Session, ToolCallPart, ToolReturnPart

SIZES = (100, 1_000, 10_000)


def _step(i: int) -> list[CanonicalMessage]:
    return [
        CanonicalMessage.response(
            ToolCallPart(
                tool_call_id=f"call_{i}", tool_name="bash", args={"command": f"ls -la src/module_{i}"}
            )
        ),
        CanonicalMessage.request(
            ToolReturnPart(
                tool_call_id=f"call_{i}",
                tool_name="bash",
                content=f"total {i}\n" + "-rw-r--r-- 1 user user 4096 file.py\n" * 8,
            )
        ),
    ]


def _history(size: int) -> list[CanonicalMessage]:
    messages = [CanonicalMessage.user("list every module and summarize it")]
    i = 0
    while len(messages) < size:
        messages.extend(_step(i))
        i += 1
    return messages[:size]


def _stats(samples: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_ms": round(statistics.median(ordered) * 1000, 3),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000, 3),
        "runs": len(ordered),
    }


def _timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def measure(
    dsn: str | None = None, *, sizes: Sequence[int] = SIZES, steps: int = 50, durability: Durability = "full"
) -> dict[str, Any]:
    """Checkpoint cost per history length and the load time of the largest session, in milliseconds.

    ``durability`` is :class:`~harness_postgres.PostgresStore`'s (``"normal"``: no WAL
    flush wait at commit).

    Returns:
        ``{"round_trip": {...}, "checkpoint": {size: {...}}, "load": {...}}``; each leaf
        has ``median_ms``, ``p95_ms`` and ``runs``.
    """
    target = dsn or test_dsn()
    schema = unique_schema("harness_bench")
    store = PostgresStore(target, schema=schema, durability=durability)
    try:
        ping: list[float] = []
        for _ in range(100):
            ping.append(_timed(lambda: store.list_sessions()))  # one statement on an empty table
        figures: dict[str, Any] = {"durability": durability, "round_trip": _stats(ping), "checkpoint": {}}
        largest = ""
        for size in sizes:
            session = Session.create(store=store, messages=_history(size))
            session.checkpoint()
            samples: list[float] = []
            for i in range(steps):
                session.messages = [*session.messages, *_step(10_000_000 + i)]
                samples.append(_timed(session.checkpoint))
            figures["checkpoint"][size] = _stats(samples)
            largest = session.session_id
        loads = [_timed(lambda: store.load(largest)) for _ in range(10)]
        opens = [_timed(lambda: Session.open(store, largest)) for _ in range(10)]
        figures["load"] = {
            "messages": max(sizes) + 2 * steps,
            "store.load": _stats(loads),
            "Session.open": _stats(opens),
        }
        return figures
    finally:
        store.close()
        drop_schema(target, schema)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument(
        "--dsn", default=None, help="PostgreSQL URL (default: $HARNESS_TEST_POSTGRES_DSN or local)"
    )
    parser.add_argument("--steps", type=int, default=50, help="checkpoints timed per size")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    both = [measure(args.dsn, steps=args.steps, durability=d) for d in ("full", "normal")]
    print(json.dumps(both, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
