"""Offline evaluation of compaction stacks on recorded transcripts (``harness eval``).

Each transcript is replayed request by request through each stack, exactly as
``harness replay`` does, and every context actually sent is measured: probe recall
(:mod:`~harness.eval.probes`, :mod:`~harness.eval.recall`), tokens, the cache-priced
cost of its token prefix (:mod:`~harness.eval.serialize`, :mod:`~harness.eval.pricing`),
and validity (``check_invariants``). :mod:`~harness.eval.runner` runs the replays (in a
process pool), :mod:`~harness.eval.report` sums them, and :mod:`~harness.eval.reference`
runs pydantic-ai-harness's equivalent stacks on the same transcripts in their own
environment.

Example::

    from harness.eval import evaluate

    report = evaluate(["session.json"], stacks=["tiered", "clear+window"], budgets=[8000])
    for figures in report.summary():
        print(figures.stack, figures.budget, figures.recall_of("older_continuation"))
"""

from __future__ import annotations

from harness.eval.pricing import CacheRules, Prices, load_prices, price_requests
from harness.eval.probes import Probe, ProbeSet, extract_probes
from harness.eval.recall import CLASSES, RecallScorer
from harness.eval.report import EvalReport, RunFigures, StackFigures
from harness.eval.runner import DEFAULT_BUDGETS, evaluate, evaluate_history
from harness.eval.stacks import DEFAULT_STACKS, PRESETS, EvalStack, eval_stack

__all__ = [
    "CLASSES",
    "DEFAULT_BUDGETS",
    "DEFAULT_STACKS",
    "PRESETS",
    "CacheRules",
    "EvalReport",
    "EvalStack",
    "Prices",
    "Probe",
    "ProbeSet",
    "RecallScorer",
    "RunFigures",
    "StackFigures",
    "eval_stack",
    "evaluate",
    "evaluate_history",
    "extract_probes",
    "load_prices",
    "price_requests",
]
