"""Measuring whether work blocks the event loop: the longest gap of a heartbeat that runs beside it.

A store that waits on another writer's lock, a slow network, a synchronous call inside a
coroutine: anything that holds the event loop's thread stops every other coroutine of the
process (other agents' runs, stream consumers, server handlers, engine heartbeats).
:func:`longest_stall` runs an awaitable beside a heartbeat that wakes every ``interval``
seconds and returns the awaitable's result with the longest time between two beats::

    result, stall = await longest_stall(agent.run("hi", session), interval=0.05)
    assert stall <= 0.1
"""

from __future__ import annotations

__all__ = ["longest_stall"]

import asyncio
import contextlib
import itertools
import time
from collections.abc import Awaitable
from typing import TypeVar

_T = TypeVar("_T")


async def longest_stall(work: Awaitable[_T], *, interval: float = 0.05) -> tuple[_T, float]:
    """Await ``work`` beside a heartbeat every ``interval`` seconds; return its result and the longest gap.

    The gap is measured between two consecutive beats (and from the last beat to the end
    of ``work``), in seconds; a loop never blocked gives about ``interval``.
    """
    beats: list[float] = [time.perf_counter()]
    stop = asyncio.Event()

    async def heartbeat() -> None:
        while not stop.is_set():
            await asyncio.sleep(interval)
            beats.append(time.perf_counter())

    beating = asyncio.create_task(heartbeat())
    try:
        result = await work
    finally:
        stop.set()
        end = time.perf_counter()
        beating.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beating
    beats.append(end)
    return result, max(later - earlier for earlier, later in itertools.pairwise(beats))
