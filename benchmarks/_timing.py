"""Timing helpers shared by the benchmark cases (median of repeated runs, in microseconds)."""

from __future__ import annotations

__all__ = ["Measurement", "measure", "measure_async"]

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import attrs


@attrs.frozen
class Measurement:
    """One benchmark figure: the median of ``runs`` timings, in microseconds."""

    group: str
    case: str
    size: int
    median_us: float
    runs: int
    note: str = ""

    def as_json(self) -> dict[str, Any]:
        """A JSON-ready dict of this measurement."""
        return attrs.asdict(self)


def _runs_for(size: int) -> int:
    if size <= 100:
        return 25
    if size <= 1_000:
        return 9
    return 5


def measure(
    group: str,
    case: str,
    size: int,
    fn: Callable[[], object],
    *,
    setup: Callable[[], object] | None = None,
    runs: int | None = None,
    note: str = "",
) -> Measurement:
    """Time ``fn`` ``runs`` times (calling ``setup`` untimed before each) and keep the median."""
    count = runs or _runs_for(size)
    samples: list[float] = []
    for _ in range(count):
        if setup is not None:
            setup()
        start = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - start) / 1_000)
    return Measurement(group, case, size, statistics.median(samples), count, note)


def measure_async(
    group: str,
    case: str,
    size: int,
    fn: Callable[[], Awaitable[object]],
    *,
    setup: Callable[[], object] | None = None,
    runs: int | None = None,
    note: str = "",
) -> Measurement:
    """Like :func:`measure` for a coroutine function, all runs inside one event loop."""
    count = runs or _runs_for(size)

    async def body() -> list[float]:
        samples: list[float] = []
        for _ in range(count):
            if setup is not None:
                setup()
            start = time.perf_counter_ns()
            await fn()
            samples.append((time.perf_counter_ns() - start) / 1_000)
        return samples

    samples = asyncio.run(body())
    return Measurement(group, case, size, statistics.median(samples), count, note)
