"""SlidingWindow over real transcripts, through harness.run.compaction, and the package surface."""

from __future__ import annotations

import importlib
import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest
from harness_sliding_window import SlidingWindow, is_preserved_part, is_receipt_part

import harness
from harness.core import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from harness.history import check_invariants
from harness.run import compact, compact_sync
from harness.tokens import TokenCounter
from harness.wire import load_messages


def _as_request_being_sent(messages: list[CanonicalMessage]) -> list[CanonicalMessage]:
    if messages and messages[-1].is_response:
        return [*messages, CanonicalMessage.user("Please continue.")]
    return messages


@pytest.mark.parametrize(
    "window",
    [
        SlidingWindow(max_messages=20, keep_messages=10, receipt=True),
        SlidingWindow(max_tokens=8_000, keep_tokens=4_000),
        SlidingWindow(max_messages=20, keep_messages=0, preserve_first_user_message=False),
    ],
    ids=["messages+receipt", "tokens", "keep0-no-preserve"],
)
def test_every_corpus_file(corpus_file: Path, window: SlidingWindow) -> None:
    messages = _as_request_being_sent(load_messages(corpus_file.read_bytes()))
    assert check_invariants(messages) == []
    result = compact_sync(messages, [window])
    assert check_invariants(result.messages) == []
    assert result.messages[-1] is messages[-1]
    if result.changed:
        (event,) = result.events
        assert event.tokens_before == result.tokens_before
        assert event.tokens_after == result.tokens_after < result.tokens_before
        print(
            f"{corpus_file.name} [{window!r}]: {event.messages_before} -> {event.messages_after} messages, "
            f"{event.tokens_before} -> {event.tokens_after} tokens"
        )
        if window.keep_tokens is not None:
            counter = TokenCounter()
            kept = messages[len(messages) - event.details["kept_window"] :]
            assert sum(counter.count_message(m) for m in kept) <= window.keep_tokens or len(kept) <= 2
        # compacting the output again changes nothing
        assert not compact_sync(result.messages, [window], force=True).changed
    else:
        assert len(messages) <= 20 or window.keep_tokens is not None


def _long_history(steps: int) -> list[CanonicalMessage]:
    messages = [CanonicalMessage.user("Refactor the parser.")]
    for i in range(steps):
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"c{i}", tool_name="read_file", args={"path": f"m{i}.py"})
            )
        )
        messages.append(
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=f"c{i}", tool_name="read_file", content="line\n" * 50)
            )
        )
    messages.append(CanonicalMessage.response(TextPart("Done.")))
    messages.append(CanonicalMessage.user("Now add tests."))
    return messages


async def test_through_harness_compact_with_and_without_force() -> None:
    history = _long_history(30)
    window = SlidingWindow(max_messages=80, keep_messages=10)
    idle = await compact(history, [window], force=False)  # triggers only: under max_messages, nothing to do
    assert not idle.changed
    assert idle.messages == history
    forced = await compact(history, [window])  # forced by default, as harness compact is
    assert forced.changed
    assert forced.events[0].reason == "forced"
    assert len(forced.messages) == 11
    triggered = await compact(history, [SlidingWindow(max_messages=40, keep_messages=10)], force=False)
    assert triggered.events[0].reason == "63 messages > max_messages 40"
    assert [m.parts for m in triggered.messages] == [m.parts for m in forced.messages]
    assert history[0].parts[0] is not forced.messages[0].parts[0]  # marked copy
    assert is_preserved_part(forced.messages[0].parts[0])


def test_compact_sync_with_a_receipt() -> None:
    history = _long_history(30)
    result = compact_sync(history, [SlidingWindow(max_tokens=1_000, keep_tokens=500, receipt=True)])
    assert result.changed
    assert result.tokens_after < 600
    assert any(is_receipt_part(p) for p in result.messages[0].parts)
    assert isinstance(result.messages[0].parts[0], UserPromptPart)
    assert result.messages[0].parts[0].content == "Refactor the parser."
    assert check_invariants(result.messages) == []


def test_entry_point_is_published() -> None:
    points = importlib.metadata.entry_points(group="harness", name="sliding_window")
    assert [p.value for p in points] == ["harness_sliding_window:SlidingWindow"]
    assert next(iter(points)).load() is SlidingWindow


def test_import_emits_the_experimental_warning_once() -> None:
    import harness_sliding_window

    with pytest.warns(harness.HarnessExperimentalWarning, match="harness_sliding_window is experimental"):
        importlib.reload(harness_sliding_window)


def test_import_fails_when_experimental_warnings_are_errors() -> None:
    strict = (
        "import warnings, harness\n"
        "warnings.simplefilter('error', harness.HarnessExperimentalWarning)\n"
        "import harness_sliding_window\n"
    )
    failed = subprocess.run([sys.executable, "-c", strict], capture_output=True, text=True, check=False)
    assert failed.returncode != 0
    assert "HarnessExperimentalWarning: harness_sliding_window is experimental" in failed.stderr
    quiet = strict.replace("'error'", "'ignore'")
    passed = subprocess.run([sys.executable, "-c", quiet], capture_output=True, text=True, check=False)
    assert passed.returncode == 0, passed.stderr
