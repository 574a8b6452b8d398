"""``TieredCompaction``: cheapest strategy first, stop as soon as the history fits."""

from __future__ import annotations

__all__ = ["CompactionTier", "TieredCompaction", "tier_name"]

import inspect
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from harness.capabilities import Capability, CompactionEvent, RequestContext, Trigger
from harness.core import CanonicalMessage, lost_pins
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


def _accepts_target(tier: object) -> bool:
    """True when the tier's ``compact`` takes ``target_tokens`` (it can aim at the target)."""
    try:
        parameters = inspect.signature(getattr(tier, "compact")).parameters  # noqa: B009
    except (TypeError, ValueError):
        return False
    found = parameters.get("target_tokens")
    if found is not None:
        return found.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


@attrs.define
class _Escalation:
    """What one pass over the tiers did: runs, accepted ids, the last baseline and tokens."""

    runs: list[dict[str, Any]] = attrs.field(factory=list[dict[str, Any]])
    removed: list[str] = attrs.field(factory=list[str])
    cleared: list[str] = attrs.field(factory=list[str])
    baseline: list[Violation] | None = None
    tokens: int | None = None


class TieredCompaction(Capability):
    """Run compaction tiers cheapest-first until the history fits a token target.

    Each tier's ``compact(ctx, reason=...)`` is called directly (its own trigger is
    bypassed). After every tier the history is re-measured the way the trigger measured it,
    with :meth:`~harness.capabilities.RequestContext.context_tokens` (the provider's
    anchored figure while the history before the anchor is unchanged, else the exact,
    cached count); the escalation stops as soon as it is at or below the target. So a tier
    that changed nothing, or failed and was undone, does not count as reaching the target:
    the next tier runs. A tier that
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
        lookahead: When a tier can aim at the target (its ``compact`` takes
            ``target_tokens``, as ``SummarizingCompaction`` and ``SlidingWindow`` do), try
            the cheaper tiers before it on a copy first: if they reach the target their
            result is kept; if not, the aiming tier runs first on the untouched history
            and the cheaper ones after it on its result (the prefix changes in this request
            anyway, so what they free costs no further cache write and postpones the next
            compaction).
            So a summary digests real outputs rather than placeholders, and no edit is
            made (and paid for in the prompt cache) that a later tier throws away.

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
        lookahead: bool = False,
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
        self._takes_target = tuple(_accepts_target(tier) for tier in tier_list)
        self.target_tokens = target_tokens
        self.target_fraction = target_fraction
        self.context_window = context_window
        self.lookahead = lookahead

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
        order = list(range(len(self.tiers)))
        run = _Escalation()
        first_aiming = next((i for i, takes in enumerate(self._takes_target) if takes), None)
        lookahead: dict[str, Any] | None = None
        done = False
        if self.lookahead and first_aiming is not None and first_aiming > 0:
            # Try the cheaper tiers on a copy: when they cannot reach the target, the tier
            # that aims at it works on the untouched history (a summary of real outputs,
            # not of placeholders), and the cheaper tiers run after it only if needed.
            scratch = attrs.evolve(
                ctx, messages=list(ctx.messages), events=[], on_event=None, request_scoped=[]
            )
            trial = _Escalation()
            tokens = await self._run(scratch, order[:first_aiming], target, reason, trial, tokens_before)
            if tokens <= target:
                ctx.messages[:] = scratch.messages
                for event in scratch.events:
                    ctx.report(event)
                ctx.request_scoped.extend(scratch.request_scoped)
                run = trial
                done = True
            else:
                skipped = [tier_name(self.tiers[i]) for i in order[:first_aiming]]
                lookahead = {"tiers": skipped, "tokens_after": tokens, "reached": False}
                order = [first_aiming, *order[:first_aiming], *order[first_aiming + 1 :]]
        if not done:
            await self._run(ctx, order, target, reason, run, tokens_before)
            if lookahead is not None and run.tokens is not None:
                # The prefix changes in this request anyway: what the cheaper tiers free now
                # costs no further cache write and postpones the next compaction.
                ran = {r["index"] for r in run.runs}
                rest = [i for i in order[1:] if i < order[0] and i not in ran]
                await self._run(ctx, rest, 0, reason, run, run.tokens)
        tokens = run.tokens if run.tokens is not None else tokens_before
        runs = run.runs
        removed = run.removed
        cleared = run.cleared
        details_extra: dict[str, Any] = {} if lookahead is None else {"lookahead": lookahead}
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
                    **details_extra,
                },
            )
        )

    async def _run(
        self,
        ctx: RequestContext,
        order: Sequence[int],
        target: int,
        reason: str,
        state: _Escalation,
        tokens: int,
    ) -> int:
        """Run the tiers at ``order`` on ``ctx`` until it fits ``target``; record into ``state``."""
        state.tokens = tokens
        for index in order:
            if tokens <= target:
                break
            tier = self.tiers[index]
            snapshot = list(ctx.messages)
            first_event = len(ctx.events)
            run: dict[str, Any] = {"index": index, "tier": tier_name(tier), "tokens_before": tokens}
            try:
                compact = getattr(tier, "compact")  # noqa: B009
                if self._takes_target[index]:
                    result = compact(ctx, reason=f"tiered: {reason}", target_tokens=target)
                else:
                    result = compact(ctx, reason=f"tiered: {reason}")
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
                    self._check(ctx, snapshot, first_event, run, state)
                run["changed"] = changed and not run.get("reverted", False)
            tokens = ctx.context_tokens()  # the measure it triggered on: the provider's anchor while valid
            run["tokens_after"] = tokens
            state.runs.append(run)
            state.tokens = tokens
        return tokens

    @staticmethod
    def _check(
        ctx: RequestContext,
        snapshot: list[CanonicalMessage],
        first_event: int,
        run: dict[str, Any],
        state: _Escalation,
    ) -> None:
        """Undo a tier's edit that broke an invariant or lost a pin; else record its ids."""
        if state.baseline is None:
            state.baseline = check_invariants(snapshot)
        current = check_invariants(ctx.messages)
        broken = _new_violations(state.baseline, current)
        lost = lost_pins(snapshot, ctx.messages)
        if broken:
            ctx.messages[:] = snapshot
            run["error"] = "left the history invalid: " + "; ".join(v.detail for v in broken[:5])
            run["reverted"] = True
        elif lost:
            ctx.messages[:] = snapshot
            run["error"] = f"lost {len(lost)} pinned part(s)"
            run["reverted"] = True
        else:
            state.baseline = current  # the accepted history is the next tier's baseline
            for event in ctx.events[first_event:]:
                state.removed.extend(event.removed_tool_call_ids)
                state.cleared.extend(event.cleared_tool_call_ids)
