"""Core benchmark cases: wire format, token counting and history rules."""

from __future__ import annotations

__all__ = ["core_cases"]

import warnings
from collections.abc import Iterator

from _timing import Measurement, measure
from synthetic import build_history

from harness.core import CanonicalMessage
from harness.history import check_invariants, safe_cutoff
from harness.testing import corpus_files
from harness.tokens import TokenCounter
from harness.wire import dump_messages, load_messages


def _pydantic_adapter() -> object | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from pydantic_ai.messages import ModelMessagesTypeAdapter
    except ImportError:
        return None
    return ModelMessagesTypeAdapter


def _wire_cases(label: str, size: int, data: bytes) -> Iterator[Measurement]:
    megabytes = len(data) / 1e6
    load = measure("core", "wire.load", size, lambda: load_messages(data))
    yield _with_note(load, f"{label}: {megabytes / (load.median_us / 1e6):.0f} MB/s")
    messages = load_messages(data)
    dump = measure("core", "wire.dump", size, lambda: dump_messages(messages))
    yield _with_note(dump, f"{label}: {megabytes / (dump.median_us / 1e6):.0f} MB/s")
    adapter = _pydantic_adapter()
    if adapter is not None:
        validate = adapter.validate_json  # pyright: ignore[reportAttributeAccessIssue,reportUnknownMemberType,reportUnknownVariableType]
        pyd_load = measure("core", "wire.load.pydantic_ai", size, lambda: validate(data))  # pyright: ignore[reportUnknownLambdaType]
        yield _with_note(pyd_load, f"{label}: ratio {pyd_load.median_us / load.median_us:.2f}x of harness")
        loaded = validate(data)  # pyright: ignore[reportUnknownVariableType]
        dump_json = adapter.dump_json  # pyright: ignore[reportAttributeAccessIssue,reportUnknownMemberType,reportUnknownVariableType]
        pyd_dump = measure("core", "wire.dump.pydantic_ai", size, lambda: dump_json(loaded))  # pyright: ignore[reportUnknownLambdaType]
        yield _with_note(pyd_dump, f"{label}: ratio {pyd_dump.median_us / dump.median_us:.2f}x of harness")


def _with_note(m: Measurement, note: str) -> Measurement:
    return Measurement(m.group, m.case, m.size, m.median_us, m.runs, note)


def _token_cases(size: int, history: list[CanonicalMessage]) -> Iterator[Measurement]:
    state: dict[str, TokenCounter] = {}

    def fresh() -> None:
        state["counter"] = TokenCounter()

    yield measure(
        "core",
        "tokens.cold",
        size,
        lambda: state["counter"].count_messages(history),
        setup=fresh,
        note="new counter: every part tokenized",
    )
    warm = TokenCounter()
    warm.count_messages(history)
    yield measure(
        "core", "tokens.warm", size, lambda: warm.count_messages(history), note="same history again"
    )

    appended: list[list[CanonicalMessage]] = []

    def grow() -> None:
        warm.count_messages(history)
        appended.append([*history, CanonicalMessage.user(f"one more message {len(appended)}")])

    yield measure(
        "core",
        "tokens.recount_after_append",
        size,
        lambda: warm.count_messages(appended[-1]),
        setup=grow,
        runs=25,
        note="target < 50 µs at 10,000 messages",
    )


def _history_cases(size: int, history: list[CanonicalMessage]) -> Iterator[Measurement]:
    yield measure("core", "history.check_invariants", size, lambda: check_invariants(history))
    yield measure("core", "history.safe_cutoff", size, lambda: safe_cutoff(history, size // 4))


def core_cases(sizes: list[int]) -> Iterator[Measurement]:
    """Wire, token and history figures on synthetic histories of each size (and on the corpus)."""
    for size in sizes:
        history = build_history(size)
        yield from _wire_cases("synthetic", size, dump_messages(history))
        yield from _token_cases(size, history)
        yield from _history_cases(size, history)
    files = corpus_files()
    if files:
        corpus = b"[" + b",".join(f.read_bytes().strip()[1:-1] for f in files) + b"]"
        yield from _wire_cases(f"corpus ({len(files)} files joined)", len(load_messages(corpus)), corpus)
