"""What building a part costs: 100,000 of each modelled kind, and ``replace`` on them.

Usage::

    uv run python benchmarks/part_construction.py            # a Markdown table, ns per part
    uv run python benchmarks/part_construction.py --json out.json

Loading a history and a capability's first pass build thousands of parts, so the
constructor (with the field checks it runs, see :mod:`harness.core.fields`) is on the hot
path. Each figure is the best of five runs of 100,000 constructions, in nanoseconds per part.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from harness.core import (
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    replace,
)

COUNT = 100_000
STAMP = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
ARGS = {"path": "src/app.py"}


def _cases() -> dict[str, Callable[[int], object]]:
    call = ToolCallPart(tool_call_id="c1", tool_name="read_file", args=ARGS)
    ret = ToolReturnPart(tool_call_id="c1", tool_name="read_file", content="text", timestamp=STAMP)
    return {
        "ToolCallPart": lambda i: ToolCallPart(tool_call_id="c1", tool_name="read_file", args=ARGS),
        "ToolReturnPart": lambda i: ToolReturnPart(
            tool_call_id="c1", tool_name="read_file", content="text", timestamp=STAMP
        ),
        "UserPromptPart": lambda i: UserPromptPart(content="the task", timestamp=STAMP),
        "SystemPromptPart": lambda i: SystemPromptPart(content="be brief"),
        "TextPart": lambda i: TextPart(content="hello"),
        "ThoughtPart": lambda i: ThoughtPart(content="hmm", signature="sig"),
        "RetryPromptPart": lambda i: RetryPromptPart(
            content="again", tool_name="read_file", tool_call_id="c1"
        ),
        "replace(ToolReturnPart, content=)": lambda i: replace(ret, content="[cleared]"),
        "replace(ToolCallPart, args=)": lambda i: replace(call, args={}),
    }


def _best(build: Callable[[int], object], count: int, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for i in range(count):
            build(i)
        best = min(best, (time.perf_counter_ns() - start) / count)
    return best


def main() -> None:
    """Print ns per construction for each case (and write them as JSON with ``--json``)."""
    parser = argparse.ArgumentParser(description="What building a part costs.")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--count", type=int, default=COUNT)
    options = parser.parse_args()
    figures = {name: round(_best(build, options.count), 1) for name, build in _cases().items()}
    print(f"| case ({options.count:,} each) | ns per part |\n|---|---|")
    for name, value in figures.items():
        print(f"| {name} | {value} |")
    if options.json is not None:
        options.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
