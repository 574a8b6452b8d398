"""Fixtures of the harness.tokens tests: a counter whose text counter records its calls."""

from __future__ import annotations

import pytest

from harness.tokens import TokenCounter


class Spy:
    """A text counter that counts characters and records every call."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, text: str) -> int:
        self.calls.append(text)
        return len(text)


@pytest.fixture
def spied() -> tuple[TokenCounter, list[str]]:
    """A counter counting one token per character, and the list of texts it tokenized."""
    spy = Spy()
    return TokenCounter(text_counter=spy), spy.calls
