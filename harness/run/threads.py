"""The threads a run's sync tools run in: a bounded pool the agent owns, whose futures are tracked.

A sync tool cannot be cancelled: when a run is aborted or times out, its thread runs on,
and its effect may land after the run stopped. So sync tools never run in the event
loop's default executor (``asyncio.to_thread``), where nobody could tell whether they are
still running. They run in the agent's :class:`ToolThreads` (``Agent(tool_threads=...)``),
and the run keeps each call's :class:`concurrent.futures.Future` by call id
(:class:`CallThreads`). At recovery the run cancels the calls still queued (they never
ran), waits a bounded time (``Agent(tool_settle_timeout=...)``) for the ones still running,
and answers each with what it knows: its result, "aborted" (it never ran) or "outcome
unknown" (still running; see :mod:`harness.run.executor`).
"""

from __future__ import annotations

__all__ = ["DEFAULT_TOOL_THREADS", "CallThreads", "ThreadState", "ToolThreads"]

import asyncio
import contextvars
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Literal, TypeAlias

DEFAULT_TOOL_THREADS = 16
"""Threads of an agent's pool when ``Agent(tool_threads=...)`` is not given."""

ThreadState: TypeAlias = Literal["none", "never_ran", "finished", "running"]
"""What a call's thread did: none submitted, cancelled before it started, finished, still running."""


class ToolThreads:
    """A bounded pool of threads for sync tools, created on first use, tracking its futures.

    One agent owns one (runs of the agent share it); pass the same object to several
    agents to share a pool.

    Args:
        max_workers: Threads at most; a call beyond them waits in the queue (and, when
            its run stops first, never runs).

    Raises:
        ValueError: ``max_workers`` is below 1.
        TypeError: ``max_workers`` is not an int.
    """

    def __init__(self, max_workers: int = DEFAULT_TOOL_THREADS) -> None:
        if isinstance(max_workers, bool) or not isinstance(max_workers, int):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                f"tool_threads must be an int (threads) or ToolThreads, got {type(max_workers).__name__}"
            )
        if max_workers < 1:
            raise ValueError(f"tool_threads must be at least 1, got {max_workers}")
        self.max_workers = max_workers
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._futures: set[Future[Any]] = set()

    @property
    def unfinished(self) -> int:
        """Calls submitted and not finished yet (queued or running), across every run."""
        with self._lock:
            return len(self._futures)

    def submit(self, function: Callable[[], Any]) -> Future[Any]:
        """Run ``function()`` on a pool thread, in a copy of the caller's context variables."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.max_workers, thread_name_prefix="harness-tool")
            future = self._pool.submit(contextvars.copy_context().run, function)
            self._futures.add(future)
        future.add_done_callback(self._forget)
        return future

    def _forget(self, future: Future[Any]) -> None:
        with self._lock:
            self._futures.discard(future)

    def shutdown(self, *, wait: bool = True) -> None:
        """Stop the pool (queued calls are cancelled); a later :meth:`submit` starts a new one."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=wait, cancel_futures=True)


class CallThreads:
    """One run's sync-tool threads, by call id: what it runs, and what recovery asks.

    Args:
        threads: The agent's pool.
    """

    def __init__(self, threads: ToolThreads) -> None:
        self.threads = threads
        self._futures: dict[str, Future[Any]] = {}

    def runner(self, tool_call_id: str) -> Callable[[Callable[[], Any]], Awaitable[Any]]:
        """What :meth:`Tool.call <harness.tools.tool.Tool.call>` runs a sync function with, for one call."""

        async def run(function: Callable[[], Any]) -> Any:
            future = self.threads.submit(function)
            self._futures[tool_call_id] = future  # the last attempt's, when a call is retried
            # Cancelling the awaiting task cancels a queued call; a running one runs on.
            return await asyncio.wrap_future(future)

        return run

    def _state(self, tool_call_id: str) -> ThreadState:
        """Whether the call's latest thread never ran (a queued one is cancelled now), finished, or runs."""
        future = self._futures.get(tool_call_id)
        if future is None:
            return "none"
        if future.cancel() or future.cancelled():  # a queued call is cancelled now: it never runs
            return "never_ran"
        return "finished" if future.done() else "running"

    def outcome(self, tool_call_id: str) -> Future[Any] | None:
        """The call's latest future (``None`` when it ran no sync function)."""
        return self._futures.get(tool_call_id)

    async def settle(self, tool_call_ids: Iterable[str], timeout: float) -> Mapping[str, ThreadState]:
        """Wait up to ``timeout`` seconds for the calls' threads still running; return each one's state.

        Queued calls are cancelled first (they never run). Nothing is cancelled on timeout:
        a thread cannot be stopped, so a call still running is reported ``"running"``.
        """
        ids = list(tool_call_ids)
        states: dict[str, ThreadState] = {call_id: self._state(call_id) for call_id in ids}
        running = [self._futures[call_id] for call_id, state in states.items() if state == "running"]
        if running and timeout > 0:
            waiters = [asyncio.wrap_future(f) for f in running]
            try:
                await asyncio.wait(waiters, timeout=timeout)
            finally:
                for waiter in waiters:  # a thread finishing later must not reach a closed loop
                    waiter.cancel()
            states = {call_id: self._state(call_id) for call_id in ids}
        return states

    def forget(self) -> None:
        """Drop the finished calls (a new batch starts)."""
        self._futures = {k: f for k, f in self._futures.items() if not f.done()}
