"""The :class:`ToolLimits` plugin: a ``wrap_tool_call`` wrapper counting each run's tool calls."""

from __future__ import annotations

__all__ = [
    "NOTES_KEY",
    "SOURCE",
    "CallCounts",
    "LimitHit",
    "LimitScope",
    "OnLimit",
    "ToolLimitExceeded",
    "ToolLimits",
]

import asyncio
from collections.abc import Callable, Generator, Mapping
from typing import ClassVar, Literal, TypeAlias, cast

import attrs

from harness.capabilities import ToolCall
from harness.core import ToolOutcome
from harness.errors import RunStopped, UserAbort
from harness.hooks import hookimpl
from harness.tools import RunContext

SOURCE = "tool_limits"
"""The plugin's name (its entry point, its name in the plugin manager, its key in ``ctx.state``)."""

NOTES_KEY = "tool_limits"
"""The key of ``call.notes`` where the wrapper records what it decided."""

LimitScope: TypeAlias = Literal["tool", "run"]
"""Which limit a call hit: the tool's own (``per_tool``) or the run's (``per_run``)."""

OnLimit: TypeAlias = Literal["block", "stop"]
"""What happens to a call over a limit: refused with a result the model reads, or the run stops."""

_ON_LIMIT: tuple[OnLimit, ...] = ("block", "stop")

_INTERRUPTS = (asyncio.CancelledError, KeyboardInterrupt, UserAbort)
"""What stops a call without the tool failing: an abort, a cancellation, Ctrl-C."""


@attrs.frozen
class LimitHit:
    """A call refused because a limit was reached.

    Attributes:
        tool_name: The tool the model called.
        tool_call_id: The refused call's id.
        scope: ``"tool"`` (the tool's ``per_tool`` limit) or ``"run"`` (``per_run``).
        limit: The limit that was reached.
        count: Calls already counted against that limit in this run (``count >= limit``).
    """

    tool_name: str
    tool_call_id: str
    scope: LimitScope
    limit: int
    count: int

    def describe(self) -> str:
        """Which limit was reached and how many calls were made, in words the model reads."""
        if self.scope == "tool":
            return (
                f"tool {self.tool_name!r} may be called at most {_times(self.limit)} per run, "
                f"and it was already called {_times(self.count)} in this run"
            )
        verb = "was" if self.count == 1 else "were"
        made = f"{_calls(self.count)} {verb} already made"
        return f"this run may make at most {_calls(self.limit)} in all, and {made}"

    def message(self) -> str:
        """The default result the model reads for the refused call."""
        if self.scope == "tool":
            advice = f"Do not call {self.tool_name!r} again in this run; continue with the results you have."
        else:
            advice = "Do not call any tool again in this run; answer with the results you have."
        return f"call refused by the tool-call limits: {self.describe()}. This call was not run. {advice}"


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def _calls(count: int) -> str:
    return "1 tool call" if count == 1 else f"{count} tool calls"


class ToolLimitExceeded(RunStopped):
    """A tool call reached a limit of :class:`ToolLimits` with ``on_limit="stop"``.

    Raised from the ``wrap_tool_call`` wrapper before the call runs. Like every
    :class:`~harness.errors.RunStopped`, it reaches the caller unchanged after the run
    saved its history (the refused call is answered by the core's repair, so the saved
    history is valid and the session can be continued with another prompt).

    Attributes:
        hit: Which limit, which call, how many calls were made.
        tool_name: The tool the refused call named.
        tool_call_id: The refused call's id.
        scope: ``"tool"`` or ``"run"``.
        limit: The limit that was reached.
        count: Calls already counted against it in the run.
    """

    def __init__(self, hit: LimitHit) -> None:
        self.hit = hit
        self.tool_name = hit.tool_name
        self.tool_call_id = hit.tool_call_id
        self.scope: LimitScope = hit.scope
        self.limit = hit.limit
        self.count = hit.count
        which = f"per_tool[{hit.tool_name!r}]={hit.limit}" if hit.scope == "tool" else f"per_run={hit.limit}"
        super().__init__(
            f"tool_limits stopped the run at call {hit.tool_call_id!r} to {hit.tool_name!r}: "
            f"{hit.describe()} ({which}, on_limit='stop'); the call was not run and the history was saved"
        )


@attrs.define(eq=False)
class CallCounts:
    """One run's tool calls as :class:`ToolLimits` counts them.

    Attributes:
        per_tool: Counted calls by tool name.
        total: Counted calls of every tool.
        blocked: Every call refused so far (``on_limit="block"``), in order.
    """

    per_tool: dict[str, int] = attrs.field(factory=dict[str, int])
    total: int = 0
    blocked: list[LimitHit] = attrs.field(factory=list[LimitHit])

    def count(self, tool_name: str) -> None:
        """Count one call of ``tool_name``."""
        self.per_tool[tool_name] = self.per_tool.get(tool_name, 0) + 1
        self.total += 1

    def uncount(self, tool_name: str) -> None:
        """Take back one counted call of ``tool_name`` (it did not run after all)."""
        self.per_tool[tool_name] -= 1
        self.total -= 1


def _limit(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int (a number of calls), got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0 (0 forbids every call), got {value}")
    return value


def _per_tool(value: Mapping[str, int]) -> Mapping[str, int]:
    given = cast(object, value)
    if not isinstance(given, Mapping):
        raise TypeError(
            f"per_tool must be a mapping of tool names to call limits, e.g. {{'search': 5}}, "
            f"got {type(given).__name__}"
        )
    limits: dict[str, int] = {}
    for name, limit in cast(Mapping[object, object], given).items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"per_tool keys must be tool names (non-empty strings), got {name!r}")
        limits[name] = _limit(f"per_tool[{name!r}]", limit)
    return limits


def _per_run(value: int | None) -> int | None:
    return None if value is None else _limit("per_run", value)


def _on_limit(value: OnLimit) -> OnLimit:
    if value not in _ON_LIMIT:
        raise ValueError(f"on_limit must be 'block' or 'stop', got {value!r}")
    return value


def _check_bool(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__}")


@attrs.frozen(kw_only=True, eq=False)
class ToolLimits:
    """Limit how many times each tool, and all tools together, may be called in one run.

    Every call that reaches the wrapper is checked against ``per_tool[call.tool_name]``,
    then ``per_run``. A call under both limits is counted and runs; a call over one of them
    does not run, and with:

    * ``on_limit="block"`` (default): the model reads a tool result saying which limit was
      reached and how many calls were made (``message``), so it can finish without the
      tool. The result is the call's return (as a rejection by ``harness-tool-approval``
      is), not a failure: a failure would tell the model that a non-idempotent tool may
      have taken effect, and this call never ran. The run goes on.
    * ``on_limit="stop"``: the wrapper raises :class:`ToolLimitExceeded` (a
      :class:`~harness.errors.RunStopped`); the run saves its history and the error
      reaches the caller unchanged.

    What counts (the limits bound how often a tool *runs*):

    * a call is counted when it starts, before it runs, so calls running in parallel
      (``max_parallel_tools > 1``) are counted one by one and never overshoot a limit;
    * a call over a limit is refused whatever its arguments (the tool could not run anyway);
    * a call that then did not run is not counted after all: arguments the tool's schema
      rejects (the model gets the usual retry prompt), a call an inner wrapper answered or
      held back (``harness-tool-approval``), a call an abort or a fatal error stopped
      before it ran (thrown in at the wrapper's ``yield``). Whether it ran is the
      tool-call registry's attempt count, so a call a durable engine ran elsewhere counts too;
    * a call to a tool the agent does not have is passed through uncounted (the core
      answers with its retry prompt);
    * refused (blocked) calls are not counted: the limit counts calls that ran;
    * a call that ran and raised counts, unless ``count_failed=False`` (a fatal error such
      as a ``HarnessError`` the tool raised is a failure too; an abort is not); a retry the
      tool asked for itself (``ToolRetry``) counts, since the tool ran.

    Counts are per run (``Agent.run`` / ``run_stream``), kept in ``ctx.state`` and gone
    with the run: a new run, including one resuming held-back calls, starts from zero.
    :meth:`counts` reads them. ``call.notes["tool_limits"]`` records each decision, set
    before the call runs: ``{"blocked": False, "count": n, "total": t}`` (this call
    included), or ``{"blocked": True, "scope": ..., "limit": ..., "count": ...}``; a call
    taken back afterwards has ``"uncounted": "did not run" | "failed"`` and the counts
    without it.

    Attributes:
        per_tool: Limits by tool name (``{"search": 5}``); ``0`` forbids a tool.
        per_run: Limit on the calls of every tool together, or ``None``.
        on_limit: ``"block"`` or ``"stop"`` (see above).
        count_failed: Whether a call that ran and failed counts against the limits.
        message: ``message(hit) -> str``, the result the model reads for a blocked call;
            default :meth:`LimitHit.message`.

    Raises:
        TypeError: A limit is not an int, ``per_tool`` is not a mapping of names,
            ``count_failed`` is not a bool, or ``message`` is not callable.
        ValueError: A limit is negative, no limit is set, or ``on_limit`` is neither
            ``"block"`` nor ``"stop"``.
    """

    name: ClassVar[str] = SOURCE
    runs_before: ClassVar[tuple[str, ...]] = ()
    runs_after: ClassVar[tuple[str, ...]] = ()  # tool_approval declares it runs before (outside) us

    per_tool: Mapping[str, int] = attrs.field(factory=dict[str, int], converter=_per_tool)
    per_run: int | None = attrs.field(default=None, converter=_per_run)
    on_limit: OnLimit = attrs.field(default="block", converter=_on_limit)
    count_failed: bool = True
    message: Callable[[LimitHit], str] | None = None

    def __attrs_post_init__(self) -> None:
        if not self.per_tool and self.per_run is None:
            raise ValueError("ToolLimits needs a limit: set per_tool={'tool': n} and/or per_run=n")
        _check_bool("count_failed", self.count_failed)
        if self.message is not None and not callable(self.message):
            raise TypeError(
                f"message must be a function (hit) -> str or None, got {type(self.message).__name__}"
            )

    def counts(self, ctx: RunContext) -> CallCounts:
        """The calls counted so far in ``ctx``'s run (a fresh record for a new run)."""
        runs = cast(dict[int, CallCounts], ctx.state.setdefault(SOURCE, {}))
        record = runs.get(id(self))
        if record is None:
            record = runs[id(self)] = CallCounts()
        return record

    def check(self, counts: CallCounts, call: ToolCall) -> LimitHit | None:
        """The limit ``call`` would exceed given ``counts``, or ``None`` when it may run."""
        name = call.tool_name
        limit = self.per_tool.get(name)
        if limit is not None:
            made = counts.per_tool.get(name, 0)
            if made >= limit:
                return LimitHit(name, call.tool_call_id, "tool", limit, made)
        if self.per_run is not None and counts.total >= self.per_run:
            return LimitHit(name, call.tool_call_id, "run", self.per_run, counts.total)
        return None

    def blocked_content(self, hit: LimitHit) -> str:
        """What the model reads for a call ``hit`` refused."""
        return self.message(hit) if self.message is not None else hit.message()

    @hookimpl(wrapper=True)
    def wrap_tool_call(self, ctx: RunContext, call: ToolCall) -> Generator[None, ToolOutcome, object]:
        """Count the call, refuse it over a limit, and take it back when it did not run."""
        if call.tool is None:  # an unknown tool: the core answers with a retry prompt
            return (yield)
        counts = self.counts(ctx)
        hit = self.check(counts, call)
        if hit is not None:
            call.notes[NOTES_KEY] = {
                "blocked": True,
                "scope": hit.scope,
                "limit": hit.limit,
                "count": hit.count,
            }
            if self.on_limit == "stop":
                raise ToolLimitExceeded(hit)
            counts.blocked.append(hit)
            return ToolOutcome("returned", content=self.blocked_content(hit))
        name = call.tool_name
        counts.count(name)  # before the yield: parallel calls see each other's counts
        count, total = counts.per_tool[name], counts.total
        call.notes[NOTES_KEY] = {"blocked": False, "count": count, "total": total}
        try:
            outcome = yield
        except BaseException as stopped:  # an abort or a fatal error thrown in at the yield
            failed = not isinstance(stopped, _INTERRUPTS)  # an abort is no failure of the tool
            self._take_back(ctx, call, counts, (count, total), failed=failed)
            raise
        self._take_back(ctx, call, counts, (count, total), failed=outcome.kind == "failed")
        return outcome

    def _take_back(
        self, ctx: RunContext, call: ToolCall, counts: CallCounts, noted: tuple[int, int], *, failed: bool
    ) -> None:
        """Uncount the call when it did not run, or failed with ``count_failed=False``; note it.

        ``noted`` is ``(count, total)`` as counted with this call; the note says them without it.
        """
        uncounted = None
        if not _ran(ctx, call):
            uncounted = "did not run"
        elif failed and not self.count_failed:
            uncounted = "failed"
        if uncounted is None:
            return
        counts.uncount(call.tool_name)
        call.notes[NOTES_KEY] = {
            "blocked": False,
            "count": noted[0] - 1,
            "total": noted[1] - 1,
            "uncounted": uncounted,
        }


def _ran(ctx: RunContext, call: ToolCall) -> bool:
    """Whether the tool ran for ``call`` (the registry counts every attempt made)."""
    registry = ctx.run.tool_registry
    if call.tool_call_id not in registry:  # pragma: no cover - the core registers every call
        return True
    return registry.get(call.tool_call_id).attempts > 0
