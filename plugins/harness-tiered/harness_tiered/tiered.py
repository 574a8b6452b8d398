"""``TieredCompaction``: cheapest strategy first, stop as soon as the history fits."""

from __future__ import annotations

__all__ = ["CompactionTier", "TieredCompaction", "tier_name"]

import inspect
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from harness.capabilities import Capability, CompactionEvent, RequestContext, Trigger
from harness.errors import CapabilityError
from harness.history import Violation, check_invariants


@runtime_checkable
class CompactionTier(Protocol):
    """What a tier must provide: an unconditional ``compact`` step (see ``Capability.compact``)."""

    async def compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
        """Edit ``ctx.messages`` now, reporting each change through ``ctx``."""
        ...


def tier_name(tier: object) -> str:
    """The name a tier is reported under: its ``name`` attribute, else its class name."""
    name = getattr(tier, "name", None)
    return name if isinstance(name, str) and name else type(tier).__name__


def _new_violations(before: Sequence[Violation], after: Sequence[Violation]) -> list[Violation]:
    """Violations of ``after`` not already in ``before`` (by kind and call id, with repeats).

    Indices shift when a tier removes messages, so they are not compared (the same rule
    as the plugin manager's invariant guard).
    """
    budget = Counter((v.kind, v.tool_call_id) for v in before)
    introduced: list[Violation] = []
    for violation in after:
        key = (violation.kind, violation.tool_call_id)
        if budget[key] > 0:
            budget[key] -= 1
        else:
            introduced.append(violation)
    return introduced


class TieredCompaction(Capability):
    """Run compaction tiers cheapest-first until the history fits a token target.

    Each tier's ``compact(ctx, reason=...)`` is called directly (its own trigger is
    bypassed). After every tier the history is re-measured with the exact, cached token
    count; the escalation stops as soon as it is at or below the target. A tier that
    raises is skipped (its partial edit undone, the error recorded); a tier that leaves
    the history with a tool-pair or ordering violation it did not have before is undone
    too. ``asyncio.CancelledError`` propagates. One ``"tiered"`` event reports the whole
    escalation; the tiers report their own events through ``ctx``.

    Args:
        tiers: Objects with ``async compact(ctx, *, reason)``, cheapest first (for
            example DeduplicateFileReads, ClearToolResults, SummarizingCompaction,
            SlidingWindow).
        target_tokens: Stop once the history holds at most this many tokens.
        target_fraction: Or: at most this fraction of the context window.
        max_messages: Trigger: more than this many messages.
        max_tokens: Trigger: more than this many tokens.
        max_fraction: Trigger: more than this fraction of the context window.
        context_window: Overrides the model's context window (for the fractions).

    Without ``max_*`` the trigger is "the history exceeds the target".

    Raises:
        ValueError: ``tiers`` is empty or a tier has no ``compact`` method (the message
            names the index), the targets are not set exactly once, or a value is out of
            range.
    """

    name = "tiered"

    def __init__(
        self,
        tiers: Sequence[object],
        *,
        target_tokens: int | None = None,
        target_fraction: float | None = None,
        max_messages: int | None = None,
        max_tokens: int | None = None,
        max_fraction: float | None = None,
        context_window: int | None = None,
    ) -> None:
        tier_list = list(tiers)
        if not tier_list:
            raise ValueError("tiers must not be empty.")
        for index, tier in enumerate(tier_list):
            if not callable(getattr(tier, "compact", None)):
                raise ValueError(
                    f"tiers[{index}] ({type(tier).__name__}) has no compact(ctx, *, reason) method."
                )
        if (target_tokens is None) == (target_fraction is None):
            raise ValueError("Set exactly one of target_tokens or target_fraction.")
        if target_tokens is not None and target_tokens < 1:
            raise ValueError("target_tokens must be positive.")
        if target_fraction is not None and not 0 < target_fraction <= 1:
            raise ValueError("target_fraction must be in (0, 1].")
        self.trigger = Trigger.create(
            max_messages=max_messages,
            max_tokens=max_tokens,
            max_fraction=max_fraction,
            context_window=context_window,
            required=False,
        )
        self.tiers: tuple[object, ...] = tuple(tier_list)
        self.target_tokens = target_tokens
        self.target_fraction = target_fraction
        self.context_window = context_window

    def __repr__(self) -> str:
        names = ", ".join(tier_name(t) for t in self.tiers)
        target = (
            f"target_tokens={self.target_tokens}"
            if self.target_tokens is not None
            else f"target_fraction={self.target_fraction}"
        )
        return f"TieredCompaction([{names}], {target})"

    def target(self, ctx: RequestContext) -> int:
        """The token target in force for ``ctx``.

        Raises:
            CapabilityError: ``target_fraction`` is set and no context window is known.
        """
        if self.target_tokens is not None:
            return self.target_tokens
        window = self.context_window or ctx.context_window
        if window is None:
            raise CapabilityError(
                self.name,
                f"target_fraction needs the model's context window, and model {ctx.model_name!r} does "
                "not report one; pass context_window=... to TieredCompaction",
            )
        return int((self.target_fraction or 1.0) * window)

    def should_compact(self, ctx: RequestContext) -> str | None:
        """Why the escalation should run now: the trigger, or by default "over the target"."""
        if self.trigger.configured:
            return self.trigger.exceeded(ctx, self.name)
        target = self.target(ctx)
        tokens = ctx.context_tokens()
        if tokens > target:
            return f"{tokens} tokens > target {target}"
        return None

    async def compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
        """Run the tiers in order until the history fits the target (unconditionally).

        Does nothing when the history already fits.
        """
        target = self.target(ctx)
        messages_before = len(ctx.messages)
        tokens_before = ctx.context_tokens()
        if tokens_before <= target:
            return
        tokens = tokens_before
        baseline: list[Violation] | None = None
        runs: list[dict[str, Any]] = []
        removed: list[str] = []
        cleared: list[str] = []
        for index, tier in enumerate(self.tiers):
            if tokens <= target:
                break
            name = tier_name(tier)
            snapshot = list(ctx.messages)
            first_event = len(ctx.events)
            run: dict[str, Any] = {"index": index, "tier": name, "tokens_before": tokens}
            try:
                result = getattr(tier, "compact")(ctx, reason=f"tiered: {reason}")  # noqa: B009
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                ctx.messages[:] = snapshot
                run["error"] = f"{type(exc).__name__}: {exc}"
                run["reverted"] = True
            except BaseException:
                ctx.messages[:] = snapshot  # cancelled: leave a consistent history, then propagate
                raise
            else:
                changed = len(snapshot) != len(ctx.messages) or any(
                    a is not b for a, b in zip(snapshot, ctx.messages, strict=True)
                )
                if changed:
                    if baseline is None:
                        baseline = check_invariants(snapshot)
                    current = check_invariants(ctx.messages)
                    broken = _new_violations(baseline, current)
                    if broken:
                        ctx.messages[:] = snapshot
                        run["error"] = "left the history invalid: " + "; ".join(v.detail for v in broken[:5])
                        run["reverted"] = True
                    else:
                        baseline = current  # the accepted history is the next tier's baseline
                        for event in ctx.events[first_event:]:
                            removed.extend(event.removed_tool_call_ids)
                            cleared.extend(event.cleared_tool_call_ids)
                run["changed"] = changed and not run.get("reverted", False)
            tokens = ctx.count_tokens()
            run["tokens_after"] = tokens
            runs.append(run)
        ctx.report(
            CompactionEvent(
                strategy=self.name,
                reason=reason,
                messages_before=messages_before,
                messages_after=len(ctx.messages),
                tokens_before=tokens_before,
                tokens_after=tokens,
                removed_tool_call_ids=tuple(dict.fromkeys(removed)),
                cleared_tool_call_ids=tuple(dict.fromkeys(cleared)),
                details={
                    "target": target,
                    "reached": tokens <= target,
                    "tiers_run": [run["tier"] for run in runs],
                    "tiers": runs,
                },
            )
        )
