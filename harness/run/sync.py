"""Running the asynchronous API from synchronous code: ``Agent.run_sync``, ``compact_sync``.

A synchronous entry point runs its coroutine in a new event loop (``asyncio.run``). Inside
a running loop (a Jupyter notebook, an async function) it refuses with
:class:`~harness.errors.EventLoopRunningError` before doing anything, naming what to await
instead. It does not run the coroutine in a worker thread with a loop of its own: the
caller's thread would block until the run ends, and that thread is the one running the
loop, so every other task of it (a notebook's, a server's) would stop meanwhile; objects
bound to the caller's loop (an async store, a lock) would also be used from another loop.
"""

from __future__ import annotations

__all__ = ["check_no_running_loop", "run_sync"]

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from harness.errors import EventLoopRunningError

_T = TypeVar("_T")


def check_no_running_loop(function: str, instead: str) -> None:
    """Refuse to go on when this thread runs an event loop.

    Args:
        function: What was called, for the message (``"Agent.run_sync"``).
        instead: What to write instead (``"await agent.run(...)"``).

    Raises:
        EventLoopRunningError: An event loop is running in this thread.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise EventLoopRunningError(function, instead)


def run_sync(make: Callable[[], Coroutine[Any, Any, _T]], function: str, instead: str) -> _T:
    """Run the coroutine ``make()`` returns in a new event loop, and return its result.

    ``make`` is called only after the check, so a refused call leaves no coroutine
    behind un-awaited.

    Raises:
        EventLoopRunningError: An event loop is running in this thread.
    """
    check_no_running_loop(function, instead)
    return asyncio.run(make())
