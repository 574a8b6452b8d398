"""Loop benchmark: the agent loop's own overhead per iteration, model and tools excluded.

A session holding a long history runs one prompt for ``ITERATIONS`` model requests with three
capabilities registered. The model and the tool time themselves; their time is subtracted, so
what is left is the loop: history preparation, hooks, the invariant guard, token counting,
the tool registry and bookkeeping.
"""

from __future__ import annotations

__all__ = ["loop_cases"]

import asyncio
import time
from collections.abc import Iterator
from typing import Any

from _timing import Measurement
from cases_capabilities import _plugin  # pyright: ignore[reportPrivateUsage]
from synthetic import build_history, file_key

from harness.messages import CanonicalMessage, TextPart, ToolCallPart

ITERATIONS = 50


def _capabilities(size: int) -> list[Any]:
    window = _plugin("harness_sliding_window", "SlidingWindow")
    clear = _plugin("harness_clear_tool_results", "ClearToolResults")
    dedupe = _plugin("harness_dedupe_file_reads", "DeduplicateFileReads")
    caps: list[Any] = []
    if dedupe is not None:
        caps.append(dedupe(file_key=file_key))
    if clear is not None:
        caps.append(clear(max_messages=size * 4, keep_pairs=3))
    if window is not None:
        caps.append(window(max_messages=size * 4, keep_messages=size))
    return caps


async def _overhead(size: int) -> tuple[float, int]:
    from harness.agent import Agent
    from harness.models.function import FunctionModel
    from harness.session import Session

    outside = 0.0
    calls = 0
    run_end = ITERATIONS

    def model_fn(messages: list[CanonicalMessage], _info: object) -> CanonicalMessage:
        nonlocal outside, calls
        start = time.perf_counter()
        calls += 1
        if calls >= run_end:
            reply = CanonicalMessage.response(TextPart("done"))
        else:
            reply = CanonicalMessage.response(
                ToolCallPart(f"bench_{calls}", "read_file", {"path": f"src/pkg/module_{calls % 50}.py"})
            )
        outside += time.perf_counter() - start
        return reply

    def read_file(path: str) -> str:
        """Return a short fake file body."""
        nonlocal outside
        start = time.perf_counter()
        body = f"contents of {path}"
        outside += time.perf_counter() - start
        return body

    capabilities = _capabilities(size)
    agent = Agent(
        FunctionModel(model_fn),
        tools=[read_file],
        capabilities=capabilities,
        max_iterations=ITERATIONS + 5,
    )
    # A session in steady state: a first run (untimed) prepares and counts the history, as
    # the previous requests of a long session would have; the second run is timed.
    session = Session.new()
    session.messages = build_history(size)[:-1]
    await agent.run("Start reading files.", session=session)
    calls = 0
    outside = 0.0
    start = time.perf_counter()
    await agent.run("Keep reading files.", session=session)
    total = time.perf_counter() - start
    return (total - outside) / calls * 1e6, len(capabilities)


def loop_cases(sizes: list[int]) -> Iterator[Measurement]:
    """Per-iteration loop overhead at each session size."""
    for size in sizes:
        samples = [asyncio.run(_overhead(size)) for _ in range(3)]
        per_iteration = sorted(s[0] for s in samples)[1]
        yield Measurement(
            "loop",
            "loop.overhead_per_iteration",
            size,
            per_iteration,
            3,
            f"{ITERATIONS} iterations, {samples[0][1]} capabilities; target well under 1 ms at 1,000",
        )
