"""Reference side of the benchmarks: pydantic-ai-harness 0.62.0 on the same synthetic histories.

Run by ``benchmarks/run.py --reference`` inside a separate virtual environment that holds
``pydantic-ai-harness==0.62.0`` (which pins ``pydantic-ai-slim==2.62.0``). It imports nothing
from harness and prints one JSON list of measurements on stdout.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

warnings.simplefilter("ignore")
sys.path.insert(0, str(Path(__file__).parent))

from _synthetic_text import cycles, file_text, path_for  # noqa: E402
from opentelemetry.trace import NoOpTracer  # noqa: E402
from pydantic_ai import RunContext  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext, ModelRequestParameters  # noqa: E402
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from pydantic_ai.models.test import TestModel  # noqa: E402
from pydantic_ai.usage import RequestUsage, RunUsage  # noqa: E402
from pydantic_ai_harness.compaction import (  # noqa: E402
    ClearToolResults,
    DeduplicateFileReads,
    SlidingWindowCompaction,
    SummarizingCompaction,
    TieredCompaction,
    WarnNearLimits,
)


def build(n: int) -> list[ModelMessage]:
    messages: list[ModelMessage] = []
    for cycle in cycles(n):
        messages.append(ModelRequest(parts=[UserPromptPart(cycle.prompt)]))
        messages.append(
            ModelResponse(parts=[ToolCallPart("read_file", {"path": cycle.path}, tool_call_id=cycle.call_id)])
        )
        messages.append(
            ModelRequest(parts=[ToolReturnPart("read_file", cycle.content, tool_call_id=cycle.call_id)])
        )
        messages.append(ModelResponse(parts=[TextPart(cycle.answer)]))
    messages = messages[: n - 1]
    if isinstance(messages[-1], ModelRequest):
        messages = messages[:-1]
    messages.append(ModelRequest(parts=[UserPromptPart("Continue with the next step.")]))
    return messages


def _summary(_messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
    # Usage given, as a real provider reports it (and as the harness side does), so
    # neither side measures its test model's usage estimate.
    return ModelResponse(
        parts=[TextPart("Summary: the user is reading modules one by one.")],
        usage=RequestUsage(input_tokens=1, output_tokens=1),
    )


def file_key(call: ToolCallPart) -> str | None:
    if call.tool_name != "read_file":
        return None
    args = call.args_as_dict()
    path = args.get("path")
    return path if isinstance(path, str) else None


def estimate(messages: list[ModelMessage]) -> int:
    chars = 0
    for message in messages:
        for part in message.parts:
            content = getattr(part, "content", None)
            if isinstance(content, str):
                chars += len(content)
    return chars // 4


def cases(n: int, total: int) -> dict[str, tuple[Any, int]]:
    """Name -> (capability, requests already made)."""
    summarizer = FunctionModel(_summary)
    return {
        "sliding_window.keep_messages": (
            SlidingWindowCompaction(max_messages=n // 2, keep_messages=n // 4),
            0,
        ),
        "sliding_window.keep_tokens": (
            SlidingWindowCompaction(max_tokens=total // 2, keep_tokens=total // 4),
            0,
        ),
        "sliding_window.idle_messages": (SlidingWindowCompaction(max_messages=n * 2), 0),
        "sliding_window.idle_tokens": (SlidingWindowCompaction(max_tokens=total * 2), 0),
        "clear_tool_results": (ClearToolResults(max_messages=n // 2, keep_pairs=3), 0),
        "dedupe_file_reads": (DeduplicateFileReads(file_key=file_key), 0),
        "summarizing.function_model": (
            SummarizingCompaction(model=summarizer, max_messages=n // 2, keep_messages=n // 4),
            0,
        ),
        "tiered": (
            TieredCompaction(
                tiers=[
                    DeduplicateFileReads(file_key=file_key),
                    ClearToolResults(max_messages=1, keep_pairs=3),
                    SlidingWindowCompaction(max_messages=1, keep_messages=n // 4),
                ],
                target_tokens=max(1, total // 4),
            ),
            0,
        ),
        "limit_warner": (WarnNearLimits(max_iterations=20), 15),
    }


async def time_case(capability: Any, history: list[ModelMessage], requests: int, runs: int) -> float:
    model = TestModel()
    samples: list[float] = []
    for _ in range(runs):
        usage = RunUsage(requests=requests)
        ctx = RunContext[Any](
            deps=None,
            model=model,
            usage=usage,
            messages=list(history),
            tracer=NoOpTracer(),
            pending_messages=[],
        )
        request_ctx = ModelRequestContext(
            model=model,
            messages=list(history),
            model_settings=None,
            model_request_parameters=ModelRequestParameters(),
        )
        start = time.perf_counter_ns()
        await capability.before_model_request(ctx, request_ctx)
        samples.append((time.perf_counter_ns() - start) / 1_000)
    return statistics.median(samples)


async def time_next_requests(
    capability: Any, history: list[ModelMessage], requests: int, runs: int, size: int
) -> float:
    """Each run is the next request: the previous output plus one new tool step."""
    model = TestModel()

    def contexts(messages: list[ModelMessage]) -> tuple[Any, Any]:
        ctx = RunContext[Any](
            deps=None,
            model=model,
            usage=RunUsage(requests=requests),
            messages=messages,
            tracer=NoOpTracer(),
            pending_messages=[],
        )
        request_ctx = ModelRequestContext(
            model=model,
            messages=list(messages),
            model_settings=None,
            model_request_parameters=ModelRequestParameters(),
        )
        return ctx, request_ctx

    ctx, request_ctx = contexts(list(history))
    await capability.before_model_request(ctx, request_ctx)
    current: list[ModelMessage] = list(ctx.messages)
    samples: list[float] = []
    for step in range(size, size + runs):
        call_id = f"next_{step}"
        messages = [
            *current,
            ModelResponse(parts=[ToolCallPart("read_file", {"path": path_for(step)}, tool_call_id=call_id)]),
            ModelRequest(parts=[ToolReturnPart("read_file", file_text(step), tool_call_id=call_id)]),
        ]
        ctx, request_ctx = contexts(messages)
        start = time.perf_counter_ns()
        await capability.before_model_request(ctx, request_ctx)
        samples.append((time.perf_counter_ns() - start) / 1_000)
        current = list(ctx.messages)
    return statistics.median(samples)


async def main(sizes: list[int], only: set[str] | None) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    for n in sizes:
        history = build(n)
        total = estimate(history)
        runs = 25 if n <= 100 else 9 if n <= 1_000 else 5
        for name, (capability, requests) in cases(n, total).items():
            if only is not None and name not in only:
                continue
            median = await time_case(capability, history, requests, runs)
            results.append({"case": name, "size": n, "median_us": median, "runs": runs})
            if not name.startswith("sliding_window.idle"):
                fresh = cases(n, total)[name][0]
                median = await time_next_requests(fresh, history, requests, runs, n)
                results.append({"case": f"{name}.next_request", "size": n, "median_us": median, "runs": runs})
    return results


if __name__ == "__main__":
    sizes = [int(s) for s in sys.argv[1].split(",")]
    only = set(sys.argv[2].split(",")) if len(sys.argv) > 2 and sys.argv[2] else None
    print(json.dumps(asyncio.run(main(sizes, only))))
