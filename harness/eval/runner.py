"""Replaying transcripts through stacks and measuring every context sent.

Each (transcript, stack, budget) is replayed exactly as ``harness replay`` replays it
(:func:`harness.replay.replay_history`: the recorded responses, the recorded tool
results, the recording's system prompt, summarizing capabilities switched to their
offline structural digest), through the real agent loop. An observer plugin on the
agent's plugin manager receives every ``ModelRequestNode``; its ``sent`` messages (system
prompt and request-scoped parts included) are what the model received, and each is
scored as it happens:

* tokens with the model's token counter (what ``harness replay`` reports);
* the serialized token ids' common prefix with the previous request
  (:mod:`harness.eval.serialize`), later priced (:mod:`harness.eval.pricing`);
* :func:`harness.history.check_invariants` (an *invalid context* fails it);
* probe recall (:mod:`harness.eval.recall`);
* summaries: every summarizer call (each summarizing compaction event names its
  summarizer, whether its summary was applied or not) before a request that was sent is
  counted, and each distinct summary part (harness mark ``kind: "summary"``) seen in a
  sent context.

:func:`evaluate` runs many (transcript, stack, budget) combinations, in a process pool
when there are several and more than one CPU.
"""

from __future__ import annotations

__all__ = ["DEFAULT_BUDGETS", "ContextRecorder", "evaluate", "evaluate_history", "run_one"]

import asyncio
import os
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from harness.capabilities.context import CompactionEvent, RequestContext
from harness.core.markers import hookimpl
from harness.core.messages import CanonicalMessage, harness_mark
from harness.core.nodes import ModelRequestNode, Node
from harness.errors import EvalRunError, HistoryFileError
from harness.eval.budget import is_unavoidable
from harness.eval.pricing import Prices, load_prices, price_requests
from harness.eval.probes import ProbeSet, extract_probes
from harness.eval.recall import RecallScorer
from harness.eval.report import EvalReport, RunFigures
from harness.eval.serialize import RequestTokens
from harness.eval.stacks import DEFAULT_STACKS, EvalStack, build_eval_stack, eval_stack
from harness.history import check_invariants
from harness.hooks.manager import PluginManager
from harness.replay import ReplayModel, recorded_system_prompt, replay_history, use_structural_digest
from harness.tokens import TokenCounter
from harness.tools.context import RunContext

DEFAULT_BUDGETS = (8_000, 16_000, 32_000)


class ContextRecorder:
    """Observer plugin scoring every context an agent sends (see the module docstring).

    Args:
        counter: The model's token counter.
        scorer: Probe recall of the transcript being replayed.
        tokens: Serialized token ids (shared by every replay of a transcript).
    """

    def __init__(self, counter: TokenCounter, scorer: RecallScorer, tokens: RequestTokens) -> None:
        self.counter = counter
        self.scorer = scorer
        self.tokens = tokens
        self.requests: list[tuple[int, int]] = []  # (tokens, common prefix with the previous)
        self.budget: int | None = None
        self.unavoidable = 0
        self.invalid = 0
        self.compactions = 0
        self.summarizer_calls = 0
        self._pending_compactions = 0
        self._pending_summaries = 0
        self.summaries: set[str] = set()
        self._previous: tuple[CanonicalMessage, ...] = ()

    @hookimpl(trylast=True)
    def after_node(self, ctx: RunContext, node: Node) -> None:
        """Score a request that was sent."""
        if not isinstance(node, ModelRequestNode):
            return
        sent = node.sent
        previous = self._previous
        self.compactions += self._pending_compactions
        self.summarizer_calls += self._pending_summaries
        self._pending_compactions = self._pending_summaries = 0
        total = self.counter.count_messages(sent)
        prefix = self.tokens.common_prefix(previous, sent) if previous else 0
        self.requests.append((total, prefix))
        if self.budget is not None and is_unavoidable(sent, total, self.budget, self.counter):
            self.unavoidable += 1
        if check_invariants(sent):
            self.invalid += 1
        self.scorer.score(sent)
        start = 0
        while start < min(len(previous), len(sent)) and previous[start] is sent[start]:
            start += 1
        for message in sent[start:]:
            for part in message.parts:
                mark = harness_mark(part)
                if mark is not None and mark.get("kind") == "summary":
                    self.summaries.add(str(getattr(part, "content", "")))
        self._previous = sent
        self.tokens.forget_except(sent)

    @hookimpl
    def on_compaction(self, ctx: RequestContext, event: CompactionEvent) -> None:
        """Count compaction edits and summarizer calls (a roll-up of tiers is not counted again).

        They are counted with the request they prepared, when it is sent: a compaction for a
        request the recording never made (it ends after a tool result) is left out.
        """
        tiers: object = event.details.get("tiers")
        if isinstance(tiers, list | tuple):
            return
        self._pending_compactions += 1
        if "summarizer" in event.details:
            self._pending_summaries += 1


async def evaluate_history(
    history: Sequence[CanonicalMessage],
    stack: EvalStack,
    budget: int,
    *,
    file: str = "<history>",
    probes: ProbeSet | None = None,
    prices: Prices | None = None,
    text_cache: dict[str, tuple[int, ...]] | None = None,
) -> RunFigures:
    """Replay one transcript through one stack at one budget and measure it.

    Raises:
        StackConfigError: The stack cannot be built.
        ReplayExhausted: The loop asked for more responses than were recorded.
    """
    started = time.perf_counter()
    probes = probes if probes is not None else extract_probes(history)
    prices = prices if prices is not None else load_prices()
    capabilities = build_eval_stack(stack, budget)
    use_structural_digest(capabilities)
    counter = TokenCounter(ReplayModel(history).model_name)
    recorder = ContextRecorder(counter, RecallScorer(probes, text_cache), RequestTokens(counter))
    recorder.budget = budget
    manager = PluginManager()
    manager.register(recorder, name="harness_eval_recorder")
    await replay_history(
        history,
        capabilities=capabilities,
        system_prompt=recorded_system_prompt(history),
        plugin_manager=manager,
    )
    priced = price_requests(prices, recorder.requests)
    sizes = [tokens for tokens, _ in recorder.requests]
    return RunFigures(
        file=file,
        stack=stack.label,
        spec=stack.spec,
        budget=budget,
        side="harness",
        requests=len(sizes),
        total_tokens=sum(sizes),
        peak_tokens=max(sizes, default=0),
        over_budget=sum(1 for size in sizes if size > budget),
        over_budget_unavoidable=recorder.unavoidable,
        costs=dict(priced.costs),
        cached_tokens=dict(priced.cached_tokens),
        cache_busts=priced.cache_busts,
        invalid_contexts=recorder.invalid,
        recall={name: (c.visible, c.due) for name, c in recorder.scorer.totals.items()},
        compactions=recorder.compactions,
        summarizer_calls=recorder.summarizer_calls,
        summaries_sent=len(recorder.summaries),
        seconds=time.perf_counter() - started,
    )


# ---------------------------------------------------------------------------- pool

_loaded: dict[str, tuple[list[CanonicalMessage], ProbeSet, dict[str, tuple[int, ...]]]] = {}


def _read_history(path: str) -> list[CanonicalMessage]:
    from harness.errors import WireFormatError
    from harness.wire import load_history

    try:
        return list(load_history(Path(path)))
    except WireFormatError as exc:
        raise HistoryFileError(Path(path), f"not a valid message history: {exc}") from exc
    except OSError as exc:
        raise HistoryFileError(Path(path), f"cannot read the file: {exc.strerror or exc}") from exc


def run_one(path: str, stack: EvalStack, budget: int, prices_file: str | None) -> RunFigures:
    """Evaluate one (file, stack, budget) in this process (the pool's task).

    Raises:
        HistoryFileError: The file is not a readable history.
        EvalRunError: The replay failed (the original error is named and chained).
    """
    entry = _loaded.get(path)
    if entry is None:
        history = _read_history(path)
        cache: dict[str, tuple[int, ...]] = {}
        entry = (history, extract_probes(history), cache)
        _loaded.clear()  # one transcript at a time per process
        _loaded[path] = entry
    history, probes, cache = entry
    prices = load_prices(Path(prices_file) if prices_file else None)
    try:
        return asyncio.run(
            evaluate_history(
                history, stack, budget, file=path, probes=probes, prices=prices, text_cache=cache
            )
        )
    except Exception as exc:  # a worker's exception must reach the parent whole, and name the run
        raise EvalRunError(path, stack.label, budget, f"{type(exc).__name__}: {exc}") from exc


def evaluate(
    files: Iterable[str | Path],
    stacks: Iterable[str | EvalStack] = DEFAULT_STACKS,
    budgets: Iterable[int] = DEFAULT_BUDGETS,
    *,
    prices_file: str | Path | None = None,
    processes: int | None = None,
    on_done: Callable[[RunFigures], None] | None = None,
    on_error: Callable[[HistoryFileError | EvalRunError], None] | None = None,
) -> EvalReport:
    """Evaluate every (file, stack, budget) combination.

    Args:
        files: Transcript files (any format :func:`harness.wire.load_history` reads).
        stacks: Preset names, short-form stack strings or :class:`EvalStack` objects.
        budgets: Context windows, in tokens.
        prices_file: A prices file merged over the packaged prices.
        processes: Worker processes (default: the CPUs, at most the number of runs;
            ``1`` runs everything in this process).
        on_done: Called with each run's figures as it finishes.
        on_error: Called with each file that cannot be read (once per file) and each replay
            that fails, while the other runs go on; the report holds the runs that
            succeeded. Without it the first such error is raised.

    Raises:
        StackConfigError: A stack string is bad.
        PricesFileError: The prices file is bad.
        HistoryFileError: A file is not a readable history.
    """
    chosen = [s if isinstance(s, EvalStack) else eval_stack(s) for s in stacks]
    sizes = sorted(set(budgets))
    paths = [str(f) for f in files]
    prices_path = str(prices_file) if prices_file is not None else None
    prices = load_prices(Path(prices_path) if prices_path else None)  # fail before any work
    for stack in chosen:
        build_eval_stack(stack, sizes[0] if sizes else 8_000)  # likewise
    for path in paths:
        _check_file(path)
    jobs = [(p, s, b) for p in paths for s in chosen for b in sizes]
    jobs.sort(key=lambda job: -os.path.getsize(job[0]))  # longest first: the pool ends together
    workers = processes if processes is not None else min(len(jobs), os.cpu_count() or 1)
    results: list[RunFigures] = []
    unreadable: set[str] = set()

    def failed(error: HistoryFileError | EvalRunError) -> None:
        if on_error is None:
            raise error
        if isinstance(error, HistoryFileError):
            if str(error.path) in unreadable:
                return
            unreadable.add(str(error.path))
        on_error(error)

    def finished(figures: RunFigures) -> None:
        results.append(figures)
        if on_done is not None:
            on_done(figures)

    started = time.perf_counter()
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            if job[0] in unreadable:
                continue
            try:
                figures = run_one(*job, prices_path)
            except (HistoryFileError, EvalRunError) as exc:
                failed(exc)
                continue
            finished(figures)
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(run_one, *job, prices_path) for job in jobs]
            for future in as_completed(futures):
                try:
                    figures = future.result()
                except (HistoryFileError, EvalRunError) as exc:
                    failed(exc)
                    continue
                finished(figures)
    order = {
        (p, s.label, b): i
        for i, (p, s, b) in enumerate((p, s, b) for p in paths for s in chosen for b in sizes)
    }
    results.sort(key=lambda r: order[(r.file, r.stack, r.budget)])
    return EvalReport(
        runs=tuple(results),
        files=tuple(paths),
        stacks=tuple(chosen),
        budgets=tuple(sizes),
        prices=prices,
        seconds=time.perf_counter() - started,
    )


def _check_file(path: str) -> None:
    if not Path(path).is_file():
        raise HistoryFileError(Path(path), "no such file")
