"""Hypothesis properties of LimitWarner, the corpus, and the package surface."""

from __future__ import annotations

import importlib
import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest
from harness_limit_warner import LimitWarner, is_warning_part
from hypothesis import given, settings
from hypothesis import strategies as st

import harness
from harness.capabilities import RequestContext
from harness.core import CanonicalMessage, Part, Usage, UserPromptPart, with_harness_mark
from harness.history import check_invariants
from harness.run import compact_sync
from harness.testing.strategies import histories
from harness.tokens import TokenCounter
from harness.wire import load_messages


@st.composite
def _configs(draw: st.DrawFn) -> LimitWarner:
    kwargs: dict[str, object] = {}
    if draw(st.booleans()):
        kwargs["max_iterations"] = draw(st.integers(1, 30))
    if draw(st.booleans()):
        kwargs["max_context_tokens"] = draw(st.integers(1, 2_000))
    elif draw(st.booleans()):
        kwargs["max_context_fraction"] = draw(st.floats(0.01, 1.0))
        kwargs["context_window"] = draw(st.integers(1, 4_000))
    if draw(st.booleans()):
        kwargs["max_total_tokens"] = draw(st.integers(1, 5_000))
    if len(kwargs) == 0:
        kwargs["warn_on"] = ["iterations"]
    return LimitWarner(
        warning_threshold=draw(st.floats(0.05, 1.0)),
        critical_remaining_iterations=draw(st.integers(0, 5)),
        **kwargs,  # pyright: ignore[reportArgumentType]
    )


_STALE = with_harness_mark(
    UserPromptPart("[LimitWarner]\nURGENT: old"), request_scoped=True, source="limit_warner"
)
_QUOTE = UserPromptPart("the user typed [LimitWarner] CRITICAL: here")


@st.composite
def _polluted(draw: st.DrawFn) -> tuple[list[CanonicalMessage], int]:
    """A valid history with stale marked warnings and quoting user prompts sprinkled in requests."""
    messages = draw(histories(min_messages=1, max_messages=25))
    stale = 0
    for index, message in enumerate(messages):
        if not message.is_request:
            continue
        extra: list[Part] = []
        if draw(st.integers(0, 3)) == 0:
            extra.append(_STALE)
            stale += 1
        if draw(st.integers(0, 4)) == 0:
            extra.append(_QUOTE)
        if extra:
            parts = list(message.parts)
            position = draw(st.integers(0, len(parts)))
            parts[position:position] = extra
            messages[index] = message.replace(parts=tuple(parts))
    return messages, stale


@settings(max_examples=150, deadline=None)
@given(
    _polluted(),
    _configs(),
    st.integers(0, 40),
    st.none() | st.integers(1, 40),
    st.integers(0, 6_000),
)
async def test_strips_only_marked_parts_and_warns_exactly_when_a_limit_is_near(
    polluted: tuple[list[CanonicalMessage], int],
    warner: LimitWarner,
    requests: int,
    agent_max_iterations: int | None,
    total: int,
) -> None:
    messages, stale = polluted
    ctx = RequestContext(
        messages=list(messages),
        token_counter=TokenCounter(),
        requests=requests,
        max_iterations=agent_max_iterations,
        usage=Usage(request_tokens=total),
    )
    await warner.before_model_request(ctx)
    result = ctx.messages
    # same messages, same order; only marked parts removed; nothing else touched
    assert len(result) == len(messages)
    for before, after in zip(messages, result, strict=True):
        expected = tuple(p for p in before.parts if not is_warning_part(p))
        assert after.parts == expected
        assert after.kind == before.kind
        if expected == before.parts:
            assert after is before
    assert check_invariants(result) == []
    assert len(ctx.events) == (1 if stale else 0)
    if stale:
        assert ctx.events[0].details["stripped_parts"] == stale

    statuses = warner.statuses(ctx)
    near = [s for s in statuses if s.fraction >= warner.warning_threshold]
    scoped = [p for p in ctx.request_scoped if is_warning_part(p)]
    assert len(scoped) == (1 if near else 0)
    if near:
        (part,) = scoped
        assert isinstance(part, UserPromptPart)
        text = part.text
        assert text.startswith("[LimitWarner]\n")
        critical = any(s.critical for s in near)
        assert ("CRITICAL:" in text) == critical
        assert ("URGENT:" in text) == (not critical)
        assert [line for line in text.splitlines() if line.startswith("- ")] == [s.line() for s in near]

    # idempotent: a second pass on its own output edits nothing and says the same
    ctx.request_scoped = []
    events = len(ctx.events)
    settled = list(ctx.messages)
    await warner.before_model_request(ctx)
    assert all(a is b for a, b in zip(ctx.messages, settled, strict=True))
    assert len(ctx.events) == events
    assert [p for p in ctx.request_scoped if is_warning_part(p)] == scoped


def test_every_corpus_file(corpus_file: Path) -> None:
    messages = load_messages(corpus_file.read_bytes())
    counter = TokenCounter()
    tokens = counter.count_messages(messages)
    result = compact_sync(messages, [LimitWarner(max_context_tokens=tokens, max_iterations=50)])
    assert result.messages == messages
    assert not result.changed
    (part,) = result.request_scoped
    assert is_warning_part(part)
    assert "CRITICAL" in getattr(part, "content", "")
    assert check_invariants(result.messages) == []
    print(f"{corpus_file.name}: {tokens} tokens before and after, warning sent request-scoped")


def test_entry_point_is_published() -> None:
    points = importlib.metadata.entry_points(group="harness", name="limit_warner")
    assert [p.value for p in points] == ["harness_limit_warner:LimitWarner"]
    assert next(iter(points)).load() is LimitWarner


def test_import_emits_the_experimental_warning() -> None:
    import harness_limit_warner

    with pytest.warns(harness.HarnessExperimentalWarning, match="harness_limit_warner is experimental"):
        importlib.reload(harness_limit_warner)


def test_import_fails_when_experimental_warnings_are_errors() -> None:
    strict = (
        "import warnings, harness\n"
        "warnings.simplefilter('error', harness.HarnessExperimentalWarning)\n"
        "import harness_limit_warner\n"
    )
    failed = subprocess.run([sys.executable, "-c", strict], capture_output=True, text=True, check=False)
    assert failed.returncode != 0
    assert "HarnessExperimentalWarning: harness_limit_warner is experimental" in failed.stderr
    quiet = strict.replace("'error'", "'ignore'")
    passed = subprocess.run([sys.executable, "-c", quiet], capture_output=True, text=True, check=False)
    assert passed.returncode == 0, passed.stderr
