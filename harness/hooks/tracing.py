"""Hook-call tracing: ``HARNESS_TRACE_PLUGINS=1`` or :meth:`PluginManager.enable_tracing`.

Every line starts with ``harness-trace:`` and names the hook and the plugin. The manager
calls every hook implementation itself, so the dispatcher traces them all: a decision hook
(``count_tokens``, ``resolve_model``) with its implementations and its answer, an observer
call, and a ``before_model_request`` (or forced ``compact``) step with its duration and the
message count before and after (:func:`traced_step`). :class:`TraceSinks` holds where the
lines go, so that each :meth:`~harness.hooks.manager.PluginManager.enable_tracing` can be undone.
"""

from __future__ import annotations

__all__ = [
    "TRACE_ENV",
    "Trace",
    "TraceSinks",
    "make_trace",
    "traced_step",
    "tracing_requested",
]

import inspect
import os
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final, TypeAlias, cast

if TYPE_CHECKING:
    from harness.capabilities.context import RequestContext

TRACE_ENV: Final = "HARNESS_TRACE_PLUGINS"
"""Set to ``1`` (any value but empty, ``0``, ``false``, ``no``) to trace every hook call to stderr."""

Trace: TypeAlias = Callable[[str], None]
"""Receives one trace text (without the ``harness-trace:`` prefix and the newline)."""

_OFF: Final = frozenset({"", "0", "false", "no"})


def tracing_requested() -> bool:
    """Whether :data:`TRACE_ENV` asks every new manager to trace (read at each call)."""
    return os.environ.get(TRACE_ENV, "").strip().lower() not in _OFF


def _write_stderr(line: str) -> None:
    sys.stderr.write(line)


def make_trace(write: Callable[[str], None] | None = None) -> Trace:
    """A :data:`Trace` that writes one ``harness-trace: <text>`` line per call.

    Args:
        write: Receives each line (newline included); default: ``sys.stderr`` at the
            time of each line.
    """
    sink = write or _write_stderr

    def trace(text: str) -> None:
        sink(f"harness-trace: {text}\n")

    return trace


class TraceSinks:
    """Where one manager's trace lines go: each writer added, until its undo is called."""

    def __init__(self) -> None:
        self._writers: list[Callable[[str], None]] = []

    def add(self, write: Callable[[str], None] | None = None) -> Callable[[], None]:
        """Send every trace line to ``write`` too (default: ``sys.stderr`` at the time of each line).

        Adding a writer already present (an equal callable, or the default twice) changes
        nothing.

        Returns:
            The undo: it removes ``write``, so that its lines stop from the next hook call
            on. Calling it again does nothing.
        """
        writer = write or _write_stderr
        if writer not in self._writers:
            self._writers.append(writer)

        def undo() -> None:
            if writer in self._writers:
                self._writers.remove(writer)

        return undo

    @property
    def trace(self) -> Trace | None:
        """The :data:`Trace` to hand the dispatcher, or ``None`` when no writer is left."""
        return self._emit if self._writers else None

    def _emit(self, text: str) -> None:
        line = f"harness-trace: {text}\n"
        for writer in tuple(self._writers):
            writer(line)


def traced_step(
    trace: Trace, call: Callable[[], object], name: str, hook_name: str, ctx: RequestContext
) -> Callable[[], object]:
    """Wrap one ``before_model_request`` / ``compact`` step so that it is traced.

    The wrapper traces the call with the message count, then its duration and the new
    message count, or the exception it raised. An awaitable result is wrapped so that
    the trace is written once it is awaited.

    Args:
        trace: Where the lines go.
        call: The step.
        name: The plugin the step belongs to.
        hook_name: ``"before_model_request"`` or ``"compact"``.
        ctx: The request context the step edits (read for the message counts).
    """

    def done(start: float, before: int) -> None:
        elapsed = (time.perf_counter() - start) * 1000
        trace(f"{hook_name} <- {name}: {elapsed:.1f} ms, {before} -> {len(ctx.messages)} messages")

    def failed(exc: BaseException) -> None:
        trace(f"{hook_name} <- {name}: raised {type(exc).__name__}")

    def run() -> object:
        start = time.perf_counter()
        before = len(ctx.messages)
        trace(f"{hook_name} -> {name} ({before} messages)")
        try:
            result = call()
        except BaseException as exc:
            failed(exc)
            raise
        if not inspect.isawaitable(result):
            done(start, before)
            return result
        awaitable = cast("Awaitable[object]", result)

        async def finish() -> object:
            try:
                value = await awaitable
            except BaseException as exc:
                failed(exc)
                raise
            done(start, before)
            return value

        return finish()

    return run
