"""Fixtures shared by the harness.interop.pydantic_ai tests (pydantic-ai is imported lazily)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pydantic_ai import messages as pai

STAMP = datetime(2025, 3, 4, 5, 6, 7, 890000, tzinfo=UTC)


@pytest.fixture
def long_history() -> Callable[[int], list[pai.ModelRequest | pai.ModelResponse]]:
    """Builds a pydantic-ai history: a task, then ``turns`` tool calls each answered."""
    from pydantic_ai import messages as pai

    def build(turns: int) -> list[pai.ModelRequest | pai.ModelResponse]:
        history: list[pai.ModelRequest | pai.ModelResponse] = [
            pai.ModelRequest(parts=[pai.UserPromptPart("task", timestamp=STAMP)], timestamp=STAMP)
        ]
        for n in range(turns):
            history.append(
                pai.ModelResponse(parts=[pai.ToolCallPart("read", {"n": n}, f"c{n}")], timestamp=STAMP)
            )
            history.append(
                pai.ModelRequest(
                    parts=[pai.ToolReturnPart("read", f"out {n}", f"c{n}", timestamp=STAMP)], timestamp=STAMP
                )
            )
        return history

    return build


@pytest.fixture
def dump_counter(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Records the size of every batch of pydantic-ai messages the conversion dumps."""
    from harness.interop.pydantic_ai import convert

    counts: list[int] = []
    real = convert._dump  # pyright: ignore[reportPrivateUsage]

    def counting(messages: Any) -> list[dict[str, Any]]:
        counts.append(len(messages))
        return real(messages)

    monkeypatch.setattr(convert, "_dump", counting)
    return counts
