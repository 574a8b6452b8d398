"""``Agent.run_stream``: a run whose events reach the caller as they happen.

:class:`RunStream` is the async context manager :meth:`Agent.run_stream
<harness.run.agent.Agent.run_stream>` returns. Entering it starts the run in a task of its
own; iterating it yields the run's :mod:`events <harness.run.events>` in order, ending
with :class:`~harness.run.events.RunFinished`; :attr:`RunStream.result` then holds the
same :class:`~harness.run.agent.RunResult` ``Agent.run`` returns. A run that fails raises
its error from the iteration (after saving, as ``Agent.run`` does).

Leaving the ``async with`` block before the run finished aborts it: it stops at its next
await, keeps completed tool results and the text streamed so far, saves, and the block
exits without an error (the abort was the caller's). :meth:`RunStream.abort` does the same
from inside the block; the iteration then raises :class:`~harness.errors.UserAbort`.

Example::

    async with agent.run_stream("Summarise README.md", session=session) as stream:
        async for event in stream:
            if isinstance(event, TextDelta):
                print(event.text, end="", flush=True)
    print(stream.result.usage)
"""

from __future__ import annotations

__all__ = ["RunStream"]

import asyncio
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Final

from harness.errors import HarnessError, UserAbort
from harness.run.events import EventSink, RunEvent, RunFinished
from harness.run.result import RunResult

_END: Final = object()
"""Put on the queue when the run ended with an error."""


class RunStream:
    """The events of one run, as an async iterator inside an async context manager.

    Args:
        start: Starts the run with an event sink and returns its result.
        abort: Aborts the run.
    """

    def __init__(self, start: Callable[[EventSink], Awaitable[RunResult]], abort: Callable[[], None]) -> None:
        self._start = start
        self._abort = abort
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._result: RunResult | None = None
        self._error: BaseException | None = None
        self._delivered = False
        self._finished = False
        self._aborted_by_exit = False

    # -- the run ---------------------------------------------------------------------------

    async def _drive(self) -> None:
        try:
            result = await self._start(self._queue.put_nowait)
        except BaseException as exc:
            self._error = exc
            self._queue.put_nowait(_END)
            if not isinstance(exc, Exception):
                raise
            return
        self._result = result
        self._queue.put_nowait(RunFinished(result))

    async def __aenter__(self) -> RunStream:
        if self._task is not None:
            raise HarnessError("a RunStream can be entered once")
        self._task = asyncio.create_task(self._drive())
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        task = self._task
        if task is None:
            return
        if not task.done():
            self._aborted_by_exit = True
            self._abort()
        await asyncio.wait([task])  # the run saves before it ends; never raises here
        if exc_type is not None:
            return  # the caller's own exception wins
        error = self._error
        if error is not None and not self._delivered:
            if isinstance(error, UserAbort) and self._aborted_by_exit:
                return  # the caller left early: the abort was theirs
            raise error

    # -- events ----------------------------------------------------------------------------

    def __aiter__(self) -> RunStream:
        return self

    async def __anext__(self) -> RunEvent:
        if self._task is None:
            raise HarnessError("iterate a RunStream inside its async with block")
        if self._finished:
            raise StopAsyncIteration
        item = await self._queue.get()
        if item is _END:
            self._finished = self._delivered = True
            assert self._error is not None
            raise self._error
        if isinstance(item, RunFinished):
            self._finished = True
        return item

    def abort(self) -> None:
        """Abort the run: it saves what it did and the iteration raises ``UserAbort``."""
        self._abort()

    @property
    def result(self) -> RunResult:
        """The run's result, once :class:`~harness.run.events.RunFinished` was yielded.

        Raises:
            HarnessError: The run has not finished (or failed: its error was raised).
        """
        if self._result is None:
            raise HarnessError("the run has not finished; iterate the stream to its RunFinished event")
        return self._result
