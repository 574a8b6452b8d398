"""The :class:`CompactOnRequest` capability: a ``compact_context`` tool the model calls to compact now."""

from __future__ import annotations

__all__ = ["COMPACTION_CAPABILITIES", "CompactOnRequest"]

import logging
from collections.abc import Sequence
from typing import ClassVar, cast

from harness import (
    CanonicalMessage,
    Capability,
    CapabilityError,
    CompactionEvent,
    PluginManager,
    RequestContext,
    RunContext,
    Tool,
    ToolRetry,
    ToolReturnPart,
    UserPromptPart,
    hookimpl,
)
from harness.config import StackEntry, build_stack, parse_stack, tiered_stack_entries
from harness.core import is_pinned, replace, with_harness_mark
from harness.errors import CapabilityOrderError
from harness.run import CompactionResult, compact
from harness_compact_on_request.decisions import MARK_KEY, TOOL_NAME, Decision, decide, pending_returns

COMPACTION_CAPABILITIES: tuple[str, ...] = (
    "recall",
    "dedupe_file_reads",
    "clear_tool_results",
    "summarizing",
    "sliding_window",
    "tiered",
)
"""The capabilities :class:`CompactOnRequest` runs after: it sees their events, and recall's references."""

_log = logging.getLogger("harness_compact_on_request")

_DESCRIPTION = (
    "Compact the conversation context now: older tool results and turns are cleared, summarized or "
    "dropped by the configured compaction stack before your next turn. Call it when the context is "
    "cluttered with output you no longer need (finished exploration, long logs), not every turn. "
    "Give the reason: what is done and what still matters."
)

_SOURCE = "compact_on_request"


def _is_stack_item(item: object) -> bool:
    return isinstance(item, str | StackEntry)


class CompactOnRequest(Capability):
    """Give the model a ``compact_context(reason)`` tool that compacts the context before its next turn.

    The tool answers at once ("the context will be compacted before your next turn:
    reason ..."). Before the next model request the configured stack runs with
    ``force`` semantics (every capability's ``compact`` is called, its trigger bypassed,
    as ``harness.compact(..., force=True)`` does), under the invariant guard; its events
    are reported through ``ctx`` followed by one ``compact_on_request`` roll-up event,
    and the tool's return is rewritten to say what happened (tokens before and after).

    A guard refuses (the tool's answer says why, nothing is compacted):

    * a call made when fewer than ``min_messages_between`` messages of work (anything
      but thinking and the tool's own calls and returns) were added since the last
      compaction it did: compacting twice in a row;
    * a second call in the same response;
    * and, before the request, when another capability already compacted during this
      request (``ctx.events`` holds an event of another strategy) or a compaction of the
      same session by a ``CompactOnRequest`` is in progress (a concurrent run, or one
      nested in its own stack): the call is then *skipped* and its return says so.

    What became of each call is kept in the harness mark of its return
    (``compact_on_request``: ``compacted``, ``unchanged``, ``skipped``, ``refused`` or
    ``failed``), so the guard reads only the history and holds across runs, processes
    and durable replays. A stack that fails (``CapabilityError``) leaves the history as
    it was, and the return says so. Pinned parts are never lost: the built-in
    capabilities keep them and the invariant guard rejects any edit that drops one; a
    pinned return is never rewritten (a request-scoped note carries the outcome instead).

    Args:
        stack: The capabilities to run: capability objects (used as given), or a stack
            string (``"clear_tool_results:keep_pairs=2 sliding_window:keep_messages=8"``),
            or a list mixing objects with strings and entries. Strings are built for each
            compaction with ``context_window`` (below). ``None`` or ``"tiered"``: the
            default tiered stack (dedupe, clear, summarize, slide) down to
            ``target_fraction`` of the window.
        target_fraction: The default tiered stack's target, a fraction of the window.
        context_window: The window the stack strings' fractions refer to. Default: the
            history's own size when the compaction runs, so the default stack halves the
            history, as ``harness compact`` does without ``--window``.
        min_messages_between: Messages of work needed since the last compaction this
            capability did before it compacts again (at least 1).
        tool_name: The tool's name.

    Raises:
        ValueError: ``min_messages_between`` is below 1, ``target_fraction`` is not in
            (0, 1], ``context_window`` is below 1, ``tool_name`` is empty, or ``stack`` is
            empty, not a list, string or ``None``, holds something that is not a capability,
            or cannot be ordered.
        StackConfigError: A stack string is invalid (the message names the entry and
            parameter); also a ``ValueError``.
    """

    name: ClassVar[str] = "compact_on_request"
    runs_after: ClassVar[tuple[str, ...]] = COMPACTION_CAPABILITIES
    runs_before: ClassVar[tuple[str, ...]] = ("limit_warner",)

    _running: ClassVar[set[str]] = set()
    """Sessions (by id) a CompactOnRequest is compacting right now, in this process."""

    def __init__(
        self,
        stack: Sequence[object] | str | None = None,
        *,
        target_fraction: float = 0.5,
        context_window: int | None = None,
        min_messages_between: int = 2,
        tool_name: str = TOOL_NAME,
    ) -> None:
        _check_int("min_messages_between", min_messages_between, 1)
        if context_window is not None:
            _check_int("context_window", context_window, 1)
        fraction = cast("object", target_fraction)
        if isinstance(fraction, bool) or not isinstance(fraction, int | float):
            raise ValueError(f"target_fraction must be a number, got {target_fraction!r}.")
        if not 0 < target_fraction <= 1:
            raise ValueError(f"target_fraction must be in (0, 1], got {target_fraction}.")
        if not isinstance(tool_name, str) or not tool_name.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"tool_name must be a non-empty string, got {tool_name!r}.")
        self.target_fraction = float(target_fraction)
        self.context_window = context_window
        self.min_messages_between = min_messages_between
        self.tool_name = tool_name
        self.items: tuple[object, ...] = self._items(stack)
        # Build once now: a bad string or object fails here, naming the entry and parameter.
        try:
            PluginManager().add_capabilities(self._build(self.context_window or 100_000))
        except (TypeError, CapabilityOrderError) as exc:
            raise ValueError(f"stack: {exc}") from exc
        self._tools = (self._build_tool(),)

    def __repr__(self) -> str:
        return f"CompactOnRequest({self.describe()!r}, min_messages_between={self.min_messages_between})"

    def _items(self, stack: Sequence[object] | str | None) -> tuple[object, ...]:
        given = cast("object", stack)  # typed, but configuration passes whatever it was given
        if given is None or (isinstance(given, str) and given.strip() == "tiered"):
            entries = tiered_stack_entries(target_fraction=self.target_fraction)
            if not entries:
                raise ValueError(
                    "stack: the default stack needs compaction plugins (harness-tiered, "
                    "harness-clear-tool-results, ...) and none is installed; pass stack=[...]"
                )
            return tuple(entries)
        if isinstance(given, str):
            entries = parse_stack(given, source="CompactOnRequest stack")
            if not entries:
                raise ValueError("stack must name at least one capability, got an empty string.")
            return tuple(entries)
        if not isinstance(given, Sequence):
            raise ValueError(
                f"stack must be a list of capabilities, a stack string or None, got {type(given).__name__}."
            )
        items: tuple[object, ...] = tuple(cast("Sequence[object]", given))
        if not items:
            raise ValueError("stack must hold at least one capability, got an empty list.")
        return items

    def describe(self) -> str:
        """The stack, named: capability names and stack entries in the short form."""
        names: list[str] = []
        for item in self.items:
            if isinstance(item, StackEntry):
                names.append(item.name)
            elif isinstance(item, str):
                names.append(item)
            else:
                names.append(str(getattr(item, "name", "") or type(item).__name__))
        return " ".join(names)

    def _build(self, window: int) -> list[object]:
        built: list[object] = []
        pending: list[StackEntry] = []
        for item in self.items:
            if isinstance(item, str):
                pending.extend(parse_stack(item, source="CompactOnRequest stack"))
            elif isinstance(item, StackEntry):
                pending.append(item)
            else:
                if pending:
                    built.extend(build_stack(pending, context_window=window))
                    pending = []
                built.append(item)
        if pending:
            built.extend(build_stack(pending, context_window=window))
        return built

    def capabilities_for(self, ctx: RequestContext) -> list[object]:
        """The stack for a compaction of ``ctx``: strings built with the window in force."""
        if not any(_is_stack_item(item) for item in self.items):
            return list(self.items)
        window = self.context_window or max(ctx.count_tokens(), 1)
        return self._build(window)

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The ``compact_context`` tool (the same object every time); an ``Agent`` offers it to the model."""
        return self._tools

    def decide(self, messages: Sequence[CanonicalMessage], call_id: str | None) -> Decision:
        """What the guard says about call ``call_id`` of ``messages`` (see :func:`.decisions.decide`)."""
        return decide(
            messages, call_id, min_messages_between=self.min_messages_between, tool_name=self.tool_name
        )

    def should_compact(self, ctx: RequestContext) -> str | None:
        """Why to compact now: the reason of an accepted ``compact_context`` call in the last request."""
        if not ctx.messages:
            return None
        last = ctx.messages[-1]
        for index in pending_returns(last, self.tool_name):
            part = last.parts[index]
            decision = self.decide(ctx.messages, getattr(part, "tool_call_id", None))
            if decision.accepted:
                return decision.reason or "requested by the model"
        return None

    @hookimpl
    async def before_model_request(self, ctx: RequestContext) -> None:
        """Compact when the request being sent answers an accepted ``compact_context`` call."""
        if not ctx.messages:
            return
        last = ctx.messages[-1]
        pending = pending_returns(last, self.tool_name)
        if not pending:
            return
        decisions: dict[str, Decision] = {}
        chosen: str | None = None
        for index in pending:
            call_id = getattr(last.parts[index], "tool_call_id", "")
            decisions[call_id] = decision = self.decide(ctx.messages, call_id)
            if decision.accepted and chosen is None:
                chosen = call_id
        # A refused call's answer is what the tool said; written again in case the tool ran
        # where the history could not be read (a durable engine's worker), so the two agree.
        outcome: dict[str, tuple[str, str | None]] = {
            call_id: ("refused", decision.message)
            for call_id, decision in decisions.items()
            if call_id != chosen
        }
        if chosen is not None:
            outcome[chosen] = await self._perform(ctx, decisions[chosen])
        self._mark(ctx, outcome)

    async def _perform(self, ctx: RequestContext, decision: Decision) -> tuple[str, str | None]:
        """Run the stack, or say why not: ``(status, what the tool's return should now say)``."""
        said = f" (reason: {decision.reason!r})" if decision.reason else ""
        others = [event for event in ctx.events if event.strategy != self.name]
        if others:
            names = ", ".join(dict.fromkeys(event.strategy for event in others))
            before, after = others[0].tokens_before, others[-1].tokens_after
            return "skipped", (
                f"Not compacted again{said}: {names} already compacted the context before this turn "
                f"({before:,} -> {after:,} tokens)."
            )
        key = _session_key(ctx)
        if key in CompactOnRequest._running:
            return "skipped", (
                f"Not compacted{said}: a compaction of this session is already in progress; "
                "its result will be in the context."
            )
        CompactOnRequest._running.add(key)
        try:
            result = await compact(ctx.messages, self.capabilities_for(ctx), context=ctx, force=True)
        except CapabilityError as exc:
            _log.warning("compact_context: the stack failed, the context is unchanged: %s", exc)
            return (
                "failed",
                f"Not compacted{said}: the compaction stack failed ({exc}); the context is unchanged.",
            )
        finally:
            CompactOnRequest._running.discard(key)
        if not result.events:
            return "unchanged", (
                f"Compaction ran{said}, but the stack ({self.describe()}) found nothing to remove; "
                "the context is unchanged."
            )
        self._adopt(ctx, result, decision)
        return "compacted", (
            f"The context was compacted{said}: {result.tokens_before:,} -> {result.tokens_after:,} tokens, "
            f"{len(result.messages)} messages kept "
            f"(by {', '.join(dict.fromkeys(e.strategy for e in result.events))})."
        )

    def _adopt(self, ctx: RequestContext, result: CompactionResult, decision: Decision) -> None:
        """Make the stack's result the history, and report its events and a roll-up."""
        messages_before = len(ctx.messages)
        ctx.messages[:] = result.messages
        ctx.request_scoped.extend(result.request_scoped)
        ctx.usage = result.usage
        removed: list[str] = []
        cleared: list[str] = []
        for event in result.events:
            ctx.report(event)
            removed.extend(event.removed_tool_call_ids)
            cleared.extend(event.cleared_tool_call_ids)
        ctx.report(
            CompactionEvent(
                strategy=self.name,
                reason=f"requested by the model: {decision.reason}"
                if decision.reason
                else "requested by the model",
                messages_before=messages_before,
                messages_after=len(result.messages),
                tokens_before=result.tokens_before,
                tokens_after=result.tokens_after,
                removed_tool_call_ids=tuple(dict.fromkeys(removed)),
                cleared_tool_call_ids=tuple(dict.fromkeys(cleared)),
                details={
                    "tiers": [event.strategy for event in result.events],
                    "stack": self.describe(),
                    "requested_reason": decision.reason,
                },
            )
        )

    def _mark(self, ctx: RequestContext, outcome: dict[str, tuple[str, str | None]]) -> None:
        """Mark each handled return with its status; rewrite the chosen one's content (unless pinned)."""
        last = ctx.messages[-1]
        parts = list(last.parts)
        changed = False
        for index, part in enumerate(parts):
            if not isinstance(part, ToolReturnPart) or part.tool_call_id not in outcome:
                continue
            status, content = outcome[part.tool_call_id]
            new = part
            if content is not None:
                if is_pinned(part):
                    ctx.add_request_scoped(
                        UserPromptPart(f"[compact_context {part.tool_call_id}] {content}"), source=_SOURCE
                    )
                else:
                    new = replace(new, content=content)
            parts[index] = with_harness_mark(new, **{MARK_KEY: status})
            changed = True
        if changed:
            ctx.messages[-1] = last.replace(parts=tuple(parts))

    def _build_tool(self) -> Tool:
        capability = self

        async def compact_context(ctx: RunContext, reason: str) -> str:
            """Compact the conversation context before your next turn.

            Args:
                ctx: The run (its history is read by the guard).
                reason: Why now: what is finished and what still matters.
            """
            if not reason.strip():
                raise ToolRetry(
                    "give a reason: say what is finished and what still matters, e.g. "
                    "'exploration done; only the failing test and the plan matter now'"
                )
            return capability.decide(ctx.messages, ctx.tool_call_id).message

        return Tool.from_function(compact_context, name=self.tool_name, description=_DESCRIPTION)


def _session_key(ctx: RequestContext) -> str:
    if ctx.session is not None:
        return f"session:{ctx.session.session_id}"
    return f"history:{id(ctx.messages)}"


def _check_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}.")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}.")
