"""Loop benchmark: the agent loop's own overhead, model and tools excluded.

A session holding a long history runs prompts with three capabilities registered. The model
and the tool time themselves; their time is subtracted, so what is left is the loop: hooks,
the invariant guard, token counting, the tool registry and bookkeeping.

Two figures per size:

* ``loop.overhead_per_iteration``: the cost of one more model request inside a run, from a
  run of ``ITERATIONS`` requests minus a run of one request (same session);
* ``loop.run_preparation``: what a run pays once before its first request (the contract's
  history preparation: prune old tool outputs, cleanup loop, trailing-request merge,
  sanitize), from the one-request run;
* ``loop.overhead_with_wrappers``: ``loop.overhead_per_iteration`` with three pass-through
  middleware wrappers registered (``wrap_model_request``, ``wrap_tool_call``, ``wrap_run``),
  the cost of the middleware machinery itself.
"""

from __future__ import annotations

__all__ = ["loop_cases"]

import asyncio
import statistics
import time
from collections.abc import Iterator
from typing import Any

from _timing import Measurement
from cases_capabilities import _plugin  # pyright: ignore[reportPrivateUsage]
from synthetic import build_history, file_key

from harness.core import CanonicalMessage, TextPart, ToolCallPart

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


class _Scripted:
    """A model and a tool that time themselves, so their time can be subtracted."""

    def __init__(self) -> None:
        self.outside = 0.0
        self.calls = 0
        self.stop_at = 1

    def model(self, messages: list[CanonicalMessage], _info: object) -> CanonicalMessage:
        start = time.perf_counter()
        self.calls += 1
        if self.calls >= self.stop_at:
            reply = CanonicalMessage.response(TextPart("done"))
        else:
            path = f"src/pkg/module_{self.calls % 50}.py"
            reply = CanonicalMessage.response(
                ToolCallPart(
                    tool_call_id=f"bench_{time.perf_counter_ns()}", tool_name="read_file", args={"path": path}
                )
            )
        self.outside += time.perf_counter() - start
        return reply

    def read_file(self, path: str) -> str:
        """Return a short fake file body."""
        start = time.perf_counter()
        body = f"contents of {path}"
        self.outside += time.perf_counter() - start
        return body


class _PassThrough:
    """Three middleware wrappers that only pass the call on."""

    def __init__(self) -> None:
        from harness.hooks import hookimpl

        def wrap_model_request(request: Any) -> Any:
            del request
            return (yield)

        def wrap_tool_call(call: Any) -> Any:
            del call
            return (yield)

        def wrap_run(ctx: Any) -> Any:
            del ctx
            return (yield)

        self.wrap_model_request = hookimpl(wrapper=True)(wrap_model_request)
        self.wrap_tool_call = hookimpl(wrapper=True)(wrap_tool_call)
        self.wrap_run = hookimpl(wrapper=True)(wrap_run)


async def _measure(size: int, *, wrappers: bool = False) -> tuple[float, float, int]:
    """(per-iteration µs, per-run preparation µs, capabilities) for one fresh session."""
    from harness.hooks import PluginManager
    from harness.models.function import FunctionModel
    from harness.run import Agent
    from harness.session import Session

    script = _Scripted()
    capabilities = _capabilities(size)
    manager = PluginManager()
    if wrappers:
        manager.register(_PassThrough(), name="pass_through")
    agent = Agent(
        FunctionModel(script.model),
        tools=[script.read_file],
        capabilities=capabilities,
        max_iterations=ITERATIONS + 5,
        plugin_manager=manager,
    )
    session = Session.new()
    session.messages = build_history(size)[:-1]

    async def run(prompt: str, iterations: int) -> float:
        script.calls, script.outside, script.stop_at = 0, 0.0, iterations
        start = time.perf_counter()
        await agent.run(prompt, session=session)
        return time.perf_counter() - start - script.outside

    # Warm-up run: prepares and counts the history, as earlier requests of a session would.
    await run("Start reading files.", ITERATIONS)
    one = await run("Read one more file.", 1)
    many = await run("Keep reading files.", ITERATIONS)
    per_iteration = (many - one) / (ITERATIONS - 1)
    return per_iteration * 1e6, (one - per_iteration) * 1e6, len(capabilities)


def loop_cases(sizes: list[int]) -> Iterator[Measurement]:
    """Per-iteration and per-run loop overhead at each session size."""
    for size in sizes:
        samples = [asyncio.run(_measure(size)) for _ in range(3)]
        count = samples[0][2]
        yield Measurement(
            "loop",
            "loop.overhead_per_iteration",
            size,
            statistics.median(s[0] for s in samples),
            3,
            f"{count} capabilities; target well under 1 ms at 1,000",
        )
        yield Measurement(
            "loop",
            "loop.run_preparation",
            size,
            statistics.median(s[1] for s in samples),
            3,
            "once per run: prune, cleanup loop, merge, sanitize (O(n) by contract)",
        )
        wrapped = [asyncio.run(_measure(size, wrappers=True)) for _ in range(3)]
        yield Measurement(
            "loop",
            "loop.overhead_with_wrappers",
            size,
            statistics.median(s[0] for s in wrapped),
            3,
            f"{count} capabilities + 3 pass-through wrappers (model, tool, run)",
        )
