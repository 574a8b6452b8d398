"""harness.history on the real transcript corpus (skipped when ../shared/corpus is absent)."""

from __future__ import annotations

from pathlib import Path

from harness.core import CanonicalMessage, message_text
from harness.history import (
    check_invariants,
    is_safe_cutoff,
    run_cleanup_loop,
    safe_cutoff,
    safe_token_cutoff,
    sanitize_for_resume,
    tool_pairs,
)
from harness.wire import load_messages


def load(corpus_file: Path) -> list[CanonicalMessage]:
    return load_messages(corpus_file.read_bytes())


def test_corpus_history_is_sendable_and_cleanup_is_a_noop(corpus_file: Path) -> None:
    messages = load(corpus_file)
    assert messages
    assert check_invariants(messages) == []
    for mode in ("answer", "remove"):
        edit = run_cleanup_loop(messages, dangling=mode)
        assert not edit.changed
        assert all(a is b for a, b in zip(edit.messages, messages, strict=True))


def test_corpus_sanitized_history_can_be_stored(corpus_file: Path) -> None:
    messages = load(corpus_file)
    sanitized = sanitize_for_resume(messages).messages
    assert check_invariants(sanitized, persisted=True) == []


def test_corpus_cuts_are_safe(corpus_file: Path) -> None:
    messages = load(corpus_file)
    n = len(messages)
    pairs = tool_pairs(messages)
    for keep in (0, 1, 2, 3, 5, 10, 25, n // 2, n - 1, n):
        cut = safe_cutoff(messages, keep)
        assert is_safe_cutoff(messages, cut)
        assert n - cut >= min(max(keep, 1), n)
        assert cut <= n - 1
        for pair in pairs.values():  # every pair entirely kept or entirely dropped
            sides = {index >= cut for index in (pair.call_index, *pair.answer_indices)}
            assert len(sides) == 1


def test_corpus_token_cuts_are_safe(corpus_file: Path) -> None:
    messages = load(corpus_file)

    def count(message: CanonicalMessage) -> int:
        return 1 + len(message_text(message)) // 4

    total = sum(count(m) for m in messages)
    for budget in (0, 500, 5_000, total // 2, total):
        cut = safe_token_cutoff(messages, budget, count)
        assert is_safe_cutoff(messages, cut)
        assert cut <= len(messages) - 1
        if budget >= total:
            assert cut == 0
