"""The figures of an evaluation: per run, per (stack, budget) over every file, and as JSON.

A *run* is one transcript replayed through one stack at one budget (:class:`RunFigures`).
:class:`EvalReport` sums the runs of each (side, stack, budget) over the files into one
:class:`StackFigures`: counts and costs are sums; recall is pooled (visible pairs over due
pairs of every file: a transcript weighs by its probes); the peak is the largest request.
"""

from __future__ import annotations

__all__ = ["SCHEMA_VERSION", "EvalReport", "RunFigures", "StackFigures"]

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs

from harness.eval.recall import CLASSES

if TYPE_CHECKING:
    from harness.eval.pricing import Prices
    from harness.eval.stacks import EvalStack

SCHEMA_VERSION: Final = 1
"""Version of the ``harness eval --json`` document."""


@attrs.frozen
class RunFigures:
    """One transcript replayed through one stack at one budget.

    Attributes:
        file: The transcript.
        stack: The stack's label (preset name or stack string).
        spec: The short-form stack (for the reference side, its description).
        budget: The context window, in tokens.
        side: ``"harness"`` or ``"reference"`` (pydantic-ai-harness).
        requests: Model requests made.
        total_tokens: Input tokens over every request.
        peak_tokens: The largest request.
        over_budget: Requests above the budget.
        over_budget_unavoidable: Of those, the requests whose first message and newest turn
            alone exceed the budget (:mod:`harness.eval.budget`): no stack could fit them.
        costs: Cache-priced cost per provider, in units of the base input price.
        cached_tokens: Tokens served from the cache, per provider.
        cache_busts: Requests after the first whose token prefix changed.
        invalid_contexts: Sent contexts failing ``check_invariants``.
        recall: ``class -> (visible pairs, due pairs)``.
        compactions: Compaction edits reported (harness side; ``0`` for the reference).
        summarizer_calls: Summaries written (structural-digest calls).
        summaries_sent: Distinct summaries that appeared in a sent context.
        seconds: Wall time of the run.
    """

    file: str
    stack: str
    spec: str
    budget: int
    side: str
    requests: int
    total_tokens: int
    peak_tokens: int
    over_budget: int
    over_budget_unavoidable: int
    costs: Mapping[str, float]
    cached_tokens: Mapping[str, int]
    cache_busts: int
    invalid_contexts: int
    recall: Mapping[str, tuple[int, int]]
    compactions: int = 0
    summarizer_calls: int = 0
    summaries_sent: int = 0
    seconds: float = 0.0

    def recall_of(self, name: str) -> float | None:
        """Recall of one class (``None`` when no probe of it was due)."""
        return _recall(self.recall, name)

    def as_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "file": self.file,
            "side": self.side,
            "stack": self.stack,
            "spec": self.spec,
            "budget": self.budget,
            **_figures_json(self),
            "seconds": round(self.seconds, 3),
        }


@attrs.frozen
class StackFigures:
    """One (side, stack, budget) over every file: the runs summed (see the module docstring)."""

    side: str
    stack: str
    spec: str
    budget: int
    files: int
    requests: int
    total_tokens: int
    peak_tokens: int
    over_budget: int
    over_budget_unavoidable: int
    costs: Mapping[str, float]
    cached_tokens: Mapping[str, int]
    cache_busts: int
    invalid_contexts: int
    recall: Mapping[str, tuple[int, int]]
    compactions: int
    summarizer_calls: int
    summaries_sent: int

    @classmethod
    def of(cls, runs: Sequence[RunFigures]) -> StackFigures:
        """Sum ``runs`` (all of one side, stack and budget)."""
        first = runs[0]
        costs: dict[str, float] = {}
        cached: dict[str, int] = {}
        recall: dict[str, tuple[int, int]] = {}
        for run in runs:
            for key, value in run.costs.items():
                costs[key] = costs.get(key, 0.0) + value
            for key, value in run.cached_tokens.items():
                cached[key] = cached.get(key, 0) + value
            for key, (visible, due) in run.recall.items():
                old = recall.get(key, (0, 0))
                recall[key] = (old[0] + visible, old[1] + due)
        return cls(
            side=first.side,
            stack=first.stack,
            spec=first.spec,
            budget=first.budget,
            files=len(runs),
            requests=sum(r.requests for r in runs),
            total_tokens=sum(r.total_tokens for r in runs),
            peak_tokens=max(r.peak_tokens for r in runs),
            over_budget=sum(r.over_budget for r in runs),
            over_budget_unavoidable=sum(r.over_budget_unavoidable for r in runs),
            costs=costs,
            cached_tokens=cached,
            cache_busts=sum(r.cache_busts for r in runs),
            invalid_contexts=sum(r.invalid_contexts for r in runs),
            recall=recall,
            compactions=sum(r.compactions for r in runs),
            summarizer_calls=sum(r.summarizer_calls for r in runs),
            summaries_sent=sum(r.summaries_sent for r in runs),
        )

    def recall_of(self, name: str) -> float | None:
        """Pooled recall of one class (``None`` when no probe of it was due)."""
        return _recall(self.recall, name)

    def as_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "side": self.side,
            "stack": self.stack,
            "spec": self.spec,
            "budget": self.budget,
            "files": self.files,
            **_figures_json(self),
        }


def _recall(recall: Mapping[str, tuple[int, int]], name: str) -> float | None:
    visible, due = recall.get(name, (0, 0))
    return visible / due if due else None


def _figures_json(figures: RunFigures | StackFigures) -> dict[str, Any]:
    return {
        "requests": figures.requests,
        "total_tokens": figures.total_tokens,
        "peak_tokens": figures.peak_tokens,
        "over_budget": figures.over_budget,
        "over_budget_unavoidable": figures.over_budget_unavoidable,
        "cost": {key: round(value, 1) for key, value in figures.costs.items()},
        "cached_tokens": dict(figures.cached_tokens),
        "cache_busts": figures.cache_busts,
        "invalid_contexts": figures.invalid_contexts,
        "recall": {
            name: {
                "visible": figures.recall.get(name, (0, 0))[0],
                "due": figures.recall.get(name, (0, 0))[1],
                "recall": None if (value := figures.recall_of(name)) is None else round(value, 4),
            }
            for name in CLASSES
        },
        "compactions": figures.compactions,
        "summarizer_calls": figures.summarizer_calls,
        "summaries_sent": figures.summaries_sent,
    }


@attrs.frozen
class EvalReport:
    """Every run of an evaluation and their sums per (side, stack, budget).

    Attributes:
        runs: Every run, harness side first, in (file, stack, budget) order.
        files: The transcripts.
        stacks: The harness stacks.
        budgets: The budgets, ascending.
        prices: The pricing rules used.
        seconds: Wall time of the evaluation.
    """

    runs: tuple[RunFigures, ...]
    files: tuple[str, ...]
    stacks: tuple[EvalStack, ...]
    budgets: tuple[int, ...]
    prices: Prices
    seconds: float = 0.0

    def with_runs(self, runs: Sequence[RunFigures], seconds: float = 0.0) -> EvalReport:
        """This report with ``runs`` added (e.g. the reference side), ``seconds`` added to its time."""
        return attrs.evolve(self, runs=(*self.runs, *runs), seconds=self.seconds + seconds)

    def summary(self) -> list[StackFigures]:
        """One :class:`StackFigures` per (side, stack, budget), in budget, side, stack order."""
        groups: dict[tuple[str, str, int], list[RunFigures]] = {}
        for run in self.runs:
            groups.setdefault((run.side, run.stack, run.budget), []).append(run)
        sides = {"harness": 0, "reference": 1}
        order = {stack.label: index for index, stack in enumerate(self.stacks)}
        keys = sorted(groups, key=lambda k: (k[2], sides.get(k[0], 2), order.get(k[1], len(order)), k[1]))
        return [StackFigures.of(groups[key]) for key in keys]

    @property
    def invalid_contexts(self) -> int:
        """Invalid sent contexts over every run (must be 0)."""
        return sum(r.invalid_contexts for r in self.runs)

    def as_json(self) -> dict[str, Any]:
        """The ``harness eval --json`` document (schema version :data:`SCHEMA_VERSION`)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "files": list(self.files),
            "budgets": list(self.budgets),
            "stacks": [{"label": s.label, "spec": s.spec} for s in self.stacks],
            "prices": {
                key: {
                    "label": rules.label,
                    "model": rules.model,
                    "cache_read": rules.cache_read,
                    "cache_write": rules.cache_write,
                    "increment": rules.increment,
                    "minimum_prefix": rules.minimum_prefix,
                }
                for key, rules in self.prices.providers.items()
            },
            "prices_file": None if self.prices.source is None else str(self.prices.source),
            "summary": [figures.as_json() for figures in self.summary()],
            "runs": [run.as_json() for run in self.runs],
            "invalid_contexts": self.invalid_contexts,
            "seconds": round(self.seconds, 3),
        }
