"""Deterministic text for the synthetic benchmark history, shared by both sides of a comparison.

This module imports nothing from harness or pydantic-ai, so the reference runner (which runs in a
separate virtual environment without harness) builds exactly the same conversation.

The history is the one the reference research used: cycles of a user prompt, a ``read_file`` call,
a 2 KB return and an assistant text, ending in a user request. Paths repeat every 50 cycles, so
file-read deduplication has work to do.
"""

from __future__ import annotations

__all__ = ["Cycle", "cycles", "file_text", "path_for"]

from collections.abc import Iterator
from typing import NamedTuple

PATHS = 50


class Cycle(NamedTuple):
    """The strings of one user-prompt / read_file / return / answer cycle."""

    number: int
    prompt: str
    call_id: str
    path: str
    content: str
    answer: str


def path_for(index: int) -> str:
    """The file the cycle ``index`` reads."""
    return f"src/pkg/module_{index % PATHS}.py"


def file_text(index: int) -> str:
    """About 2 KB of code-like text for the file of cycle ``index``."""
    lines: list[str] = []
    size = 0
    j = 0
    while size < 2048:
        line = f"def function_{index % PATHS}_{j}(value: int) -> int:\n    return value * {j} + {index % 7}\n"
        lines.append(line)
        size += len(line)
        j += 1
    return "".join(lines)[:2048]


def cycles(messages: int) -> Iterator[Cycle]:
    """Enough cycles for ``messages`` messages (4 per cycle; the caller trims and ends on a request)."""
    for index in range(messages // 4 + 1):
        yield Cycle(
            number=index,
            prompt=f"Step {index}: read {path_for(index)} and tell me what function_{index % PATHS}_3 does.",
            call_id=f"call_{index:06d}",
            path=path_for(index),
            content=file_text(index),
            answer=f"function_{index % PATHS}_3 multiplies its argument by 3 and adds {index % 7}.",
        )
