"""Hook-call tracing: ``HARNESS_TRACE_PLUGINS=1`` or :meth:`PluginManager.enable_tracing`.

Every line starts with ``harness-trace:`` and names the hook and the plugin. Hooks pluggy
dispatches are traced through pluggy's hook-call monitoring (:func:`monitor_hookcalls`);
the context hooks the manager calls itself are traced by the dispatcher, a
``before_model_request`` (or forced ``compact``) step with its duration and the message
count before and after (:func:`traced_step`).
"""

from __future__ import annotations

__all__ = [
    "TRACE_ENV",
    "Trace",
    "make_trace",
    "monitor_hookcalls",
    "traced_step",
    "tracing_requested",
]

import inspect
import os
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Final, TypeAlias, cast

import pluggy

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


def make_trace(write: Callable[[str], None] | None = None) -> Trace:
    """A :data:`Trace` that writes one ``harness-trace: <text>`` line per call.

    Args:
        write: Receives each line (newline included); default: ``sys.stderr`` at the
            time of each line.
    """

    def default_write(line: str) -> None:
        sys.stderr.write(line)

    sink = write or default_write

    def trace(text: str) -> None:
        sink(f"harness-trace: {text}\n")

    return trace


def monitor_hookcalls(pm: pluggy.PluginManager, trace: Trace) -> None:
    """Trace every hook call pluggy dispatches on ``pm``: who is called, what comes back."""

    def before(hook_name: str, impls: Sequence[pluggy.HookImpl], kwargs: Mapping[str, object]) -> None:
        del kwargs
        trace(f"{hook_name} -> {', '.join(impl.plugin_name for impl in impls) or '(no implementation)'}")

    def after(
        outcome: pluggy.Result[object],
        hook_name: str,
        impls: Sequence[pluggy.HookImpl],
        kwargs: Mapping[str, object],
    ) -> None:
        del impls, kwargs
        error = outcome.exception
        trace(f"{hook_name} <- {type(error).__name__ if error else repr(outcome.get_result())}")

    pm.add_hookcall_monitoring(before, after)


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
