"""TieredCompaction: parameters, validation messages, trigger, packaging."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

import pytest
from harness_tiered import CompactionTier, TieredCompaction, tier_name

from harness.capabilities import RequestContext
from harness.core import CanonicalMessage, TextPart
from harness.errors import CapabilityError
from harness.tokens import TokenCounter


class Noop:
    name = "noop"

    async def compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
        return None


def _ctx(n: int, *, context_window: int | None = None) -> RequestContext:
    messages = [
        CanonicalMessage.user(f"question {i}") if i % 2 == 0 else CanonicalMessage.response(TextPart("ok"))
        for i in range(n)
    ]
    return RequestContext(messages=messages, token_counter=TokenCounter(), context_window=context_window)


def test_defaults_and_repr() -> None:
    tiered = TieredCompaction([Noop()], target_tokens=100)
    assert tiered.name == "tiered"
    assert tiered.tiers[0].__class__ is Noop
    assert tiered.target_tokens == 100
    assert tiered.target_fraction is None
    assert not tiered.trigger.configured
    assert repr(tiered) == "TieredCompaction([noop], target_tokens=100)"
    assert (
        repr(TieredCompaction((Noop(),), target_fraction=0.5))
        == "TieredCompaction([noop], target_fraction=0.5)"
    )
    assert isinstance(Noop(), CompactionTier)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ([], {"target_tokens": 10}, "tiers must not be empty."),
        (
            [Noop(), object()],
            {"target_tokens": 10},
            "tiers[1] (object) has no compact(ctx, *, reason) method.",
        ),
        ([Noop()], {}, "Set exactly one of target_tokens or target_fraction."),
        (
            [Noop()],
            {"target_tokens": 1, "target_fraction": 0.5},
            "Set exactly one of target_tokens or target_fraction.",
        ),
        ([Noop()], {"target_tokens": 0}, "target_tokens must be positive."),
        ([Noop()], {"target_fraction": 0.0}, "target_fraction must be in (0, 1]."),
        ([Noop()], {"target_fraction": 1.5}, "target_fraction must be in (0, 1]."),
        ([Noop()], {"target_tokens": 5, "max_messages": 0}, "max_messages must be positive."),
        (
            [Noop()],
            {"target_tokens": 5, "max_tokens": 1, "max_fraction": 0.5},
            "Set at most one of max_tokens or max_fraction.",
        ),
        ([Noop()], {"target_tokens": 5, "context_window": 0}, "context_window must be positive."),
    ],
)
def test_validation(args: list[object], kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as info:
        TieredCompaction(args, **kwargs)  # pyright: ignore[reportArgumentType]
    assert str(info.value) == message


def test_tier_with_non_callable_compact_rejected() -> None:
    class Bad:
        compact = 3

    with pytest.raises(ValueError, match=r"tiers\[0\] \(Bad\)"):
        TieredCompaction([Bad()], target_tokens=5)


def test_tier_name() -> None:
    class Plain:
        async def compact(self, ctx: RequestContext, *, reason: str = "forced") -> None: ...

    assert tier_name(Noop()) == "noop"
    assert tier_name(Plain()) == "Plain"


def test_default_trigger_is_over_target() -> None:
    tiered = TieredCompaction([Noop()], target_tokens=30)
    assert tiered.should_compact(_ctx(3)) is None
    reason = tiered.should_compact(_ctx(41))
    assert reason is not None
    assert reason.endswith("> target 30")


def test_explicit_trigger_wins() -> None:
    tiered = TieredCompaction([Noop()], target_tokens=1, max_messages=10)
    assert tiered.should_compact(_ctx(9)) is None
    assert tiered.should_compact(_ctx(11)) is not None


def test_target_fraction_needs_a_window() -> None:
    tiered = TieredCompaction([Noop()], target_fraction=0.5)
    assert tiered.target(_ctx(1, context_window=1000)) == 500
    assert TieredCompaction([Noop()], target_fraction=0.25, context_window=400).target(_ctx(1)) == 100
    with pytest.raises(CapabilityError, match="target_fraction needs the model's context window"):
        tiered.target(_ctx(1))


def test_entry_point_registered() -> None:
    found = {ep.name: ep.value for ep in entry_points(group="harness")}
    assert found.get("tiered") == "harness_tiered:TieredCompaction"


def test_import_emits_experimental_warning() -> None:
    code = (
        "import warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import harness_tiered\n"
        "assert any(type(w.message).__name__ == 'HarnessExperimentalWarning'\n"
        "           and 'harness_tiered is experimental' in str(w.message) for w in caught)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
