"""Capability benchmark cases: each plugin triggered and idle, as the reference measures them.

``*.next_request`` cases measure what a capability costs on the following requests of a
session: each run gets the previous run's output plus one new tool step, with the same
capability instance, as in a running agent. The new step is counted before the timing, as
the loop counts every message when it appends it (``session.total_tokens``).

Each case calls the capability's ``before_model_request`` hook directly on a fresh copy of the
history (as the reference runner does for pydantic-ai-harness). One token counter is reused by
every case, as a running agent reuses its own, warmed on the history first: that is the steady
state of a loop, where the previous request already counted everything but the newest message.
``*.cold`` cases use a new counter each run, so every part is tokenized inside the timing.
"""

from __future__ import annotations

__all__ = ["capability_cases"]

import asyncio
import importlib
import itertools
from collections.abc import Callable, Iterator
from typing import Any

from _synthetic_text import file_text, path_for
from _timing import Measurement, measure_async
from synthetic import build_history, file_key

from harness.capabilities import RequestContext
from harness.core import CanonicalMessage, ToolCallPart, ToolReturnPart
from harness.tokens import TokenCounter

Factory = Callable[[int, int], Any]


def _plugin(module: str, name: str) -> Any | None:
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError:
        return None


def _summarizer_model() -> Any:
    from harness.core import TextPart, Usage
    from harness.models.function import FunctionModel

    # A real provider reports usage. Without it FunctionModel would tokenize the whole
    # summarizer prompt (1.4 MB at 10,000 messages, ~100 ms) to estimate usage, and the
    # case would measure the test model's tokenizer instead of the capability.
    def summarize(_messages: list[CanonicalMessage], _info: object) -> CanonicalMessage:
        return CanonicalMessage.response(
            TextPart("Summary: the user is reading modules one by one."),
            usage=Usage(request_tokens=1, response_tokens=1),
        )

    return FunctionModel(summarize)


def _factories() -> dict[str, tuple[Factory, int]]:
    """Case name -> (factory(n, total_tokens) -> capability, requests already made)."""
    window = _plugin("harness_sliding_window", "SlidingWindow")
    clear = _plugin("harness_clear_tool_results", "ClearToolResults")
    dedupe = _plugin("harness_dedupe_file_reads", "DeduplicateFileReads")
    warner = _plugin("harness_limit_warner", "LimitWarner")
    summarizing = _plugin("harness_summarizing", "SummarizingCompaction")
    tiered = _plugin("harness_tiered", "TieredCompaction")
    cases: dict[str, tuple[Factory, int]] = {}
    if window is not None:
        cases["sliding_window.keep_messages"] = (
            lambda n, _t: window(max_messages=n // 2, keep_messages=n // 4),
            0,
        )
        cases["sliding_window.keep_tokens"] = (lambda _n, t: window(max_tokens=t // 2, keep_tokens=t // 4), 0)
        cases["sliding_window.idle_messages"] = (lambda n, _t: window(max_messages=n * 2, keep_messages=n), 0)
        cases["sliding_window.idle_tokens"] = (lambda _n, t: window(max_tokens=t * 2, keep_tokens=t), 0)
    if clear is not None:
        cases["clear_tool_results"] = (lambda n, _t: clear(max_messages=n // 2, keep_pairs=3), 0)
    if dedupe is not None:
        cases["dedupe_file_reads"] = (lambda _n, _t: dedupe(file_key=file_key), 0)
    if summarizing is not None:
        cases["summarizing.function_model"] = (
            lambda n, _t: summarizing(model=_summarizer_model(), max_messages=n // 2, keep_messages=n // 4),
            0,
        )
        cases["summarizing.digest"] = (
            lambda n, _t: summarizing(max_messages=n // 2, keep_messages=n // 4),
            0,
        )
    if tiered is not None and dedupe is not None and clear is not None and window is not None:
        cases["tiered"] = (
            lambda n, t: tiered(
                tiers=[
                    dedupe(file_key=file_key),
                    clear(max_messages=1, keep_pairs=3),
                    window(max_messages=n, keep_messages=max(1, n // 4)),
                ],
                target_tokens=max(1, t // 4),
            ),
            0,
        )
    if warner is not None:
        cases["limit_warner"] = (lambda _n, _t: warner(max_iterations=20), 15)
    return cases


def _run_case(
    name: str,
    size: int,
    capability: Any,
    history: list[CanonicalMessage],
    requests: int,
    counter_factory: Callable[[], TokenCounter],
) -> Measurement:
    contexts: list[RequestContext] = []

    def setup() -> None:
        contexts.append(
            RequestContext(
                messages=list(history),
                token_counter=counter_factory(),
                model_name="benchmark",
                requests=requests,
            )
        )

    async def call() -> None:
        await capability.before_model_request(contexts[-1])

    return measure_async("capabilities", name, size, call, setup=setup)


def _next_request_case(
    name: str,
    size: int,
    capability: Any,
    history: list[CanonicalMessage],
    requests: int,
    counter: TokenCounter,
) -> Measurement:
    """Each run is the next request of a session: the previous output plus one new tool step."""
    state: dict[str, Any] = {}

    async def first() -> None:
        ctx = RequestContext(messages=list(history), token_counter=counter, requests=requests)
        await capability.before_model_request(ctx)
        state["messages"] = ctx.messages

    asyncio.run(first())
    steps = itertools.count(size)

    def setup() -> None:
        step = next(steps)
        call_id = f"next_{step}"
        messages = [
            *state["messages"],
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=call_id, tool_name="read_file", args={"path": path_for(step)})
            ),
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=call_id, tool_name="read_file", content=file_text(step))
            ),
        ]
        counter.count_messages(messages)
        state["ctx"] = RequestContext(
            messages=messages,
            token_counter=counter,
            model_name="benchmark",
            requests=requests,
        )

    async def call() -> None:
        ctx: RequestContext = state["ctx"]
        await capability.before_model_request(ctx)
        state["messages"] = ctx.messages

    return measure_async("capabilities", f"{name}.next_request", size, call, setup=setup)


def capability_cases(sizes: list[int]) -> Iterator[Measurement]:
    """Every installed capability plugin at each size, triggered and idle."""
    factories = _factories()
    shared = TokenCounter()
    for size in sizes:
        history = build_history(size)
        total = shared.count_messages(history)
        for name, (factory, requests) in factories.items():
            capability = factory(size, total)
            yield _run_case(name, size, capability, history, requests, lambda: shared)
            if not name.startswith("sliding_window.idle"):
                yield _next_request_case(name, size, factory(size, total), history, requests, shared)
        if "sliding_window.keep_messages" in factories:
            capability = factories["sliding_window.keep_messages"][0](size, total)
            yield _run_case("sliding_window.keep_messages.cold", size, capability, history, 0, TokenCounter)
