"""The :class:`ClearToolResults` capability.

Old tool results are usually the bulk of an agent's context and are rarely needed verbatim
once the model has acted on them. This capability replaces their content with a short
placeholder, keeping the newest ``keep_pairs`` results (and always the results of the
current step) intact. It never removes a message or a part, so a tool call is never
separated from its answer.

It clears in *batches*: the trigger counts only material that has not been cleared yet,
and each firing clears everything but the kept pairs, so the history prefix stays stable
(and prompt-cache friendly) until enough new material has accrued.

A cleared result keeps what an agent needs to see again (:mod:`.excerpt`): its failure
lines, the file paths and the names it named, bounded, after the placeholder. A pinned
part (:func:`harness.is_pinned`) is never cleared, and neither is the other half of its
pair. With ``cache_aware`` the trigger also asks whether clearing pays for the prompt-cache
write it causes (:func:`cache_pays`).
"""

from __future__ import annotations

__all__ = ["CLEARED_ARGS_KEY", "DEFAULT_PLACEHOLDER", "ClearToolResults"]

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs

from harness.capabilities import (
    CacheVerdict,
    Capability,
    RequestContext,
    Trigger,
    cache_pays,
    check_cache_settings,
    remaining_requests,
)
from harness.core import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    ToolCallPart,
    ToolReturnPart,
    declared_tool_kind,
    harness_mark,
    is_pinned,
    marked_metadata,
)
from harness.core import replace as evolve
from harness.errors import MessageError
from harness.history import PartCounter
from harness_clear_tool_results._scan import (
    Decision,
    Memo,
    References,
    extends,
    has_args,
    is_cleared,
    pair_id,
    tool_names,
    with_reference,
)
from harness_clear_tool_results.excerpt import excerpt, text_counter, text_of

DEFAULT_PLACEHOLDER = "[tool result cleared]"
"""Content that replaces a cleared tool result (the reference implementation's text)."""

CLEARED_ARGS_KEY = "_cleared"
"""Key of the JSON object that replaces cleared tool-call arguments: ``{"_cleared": placeholder}``."""


@attrs.frozen(eq=False, kw_only=True)
class ClearToolResults(Capability):
    """Replace the content of old tool results with a placeholder, in batches.

    Pairs are the tool returns that answer a known, earlier tool call, ordered by the
    position of the return; parallel calls count individually. The newest ``keep_pairs``
    pairs are kept whatever their tool; every older pair whose tool is not in
    ``exclude_tools`` has its return content replaced by ``placeholder`` (and, with
    ``clear_tool_inputs``, its call arguments by ``{"_cleared": placeholder}``). The returns
    of the current step (the request being sent) and their calls are never touched, and
    retry prompts are never cleared: they are answers too, and they are short.

    Trigger semantics (batching): ``max_messages`` counts the messages *after the newest
    result this capability cleared* (all messages when it never cleared anything);
    ``max_tokens`` / ``max_fraction`` compare the current size of the history, which
    drops after each clear. A firing clears everything but the kept pairs, so the next
    firing needs about ``max_messages - 2 * keep_pairs`` new messages (or the size to grow
    back over the limit). A part is only replaced when that frees tokens, so clearing never
    grows the history.

    Cleared parts carry the harness mark ``{"cleared": "clear_tool_results"}``; they are
    recognised by that mark, never by their text, so running twice changes nothing.

    **What a cleared result keeps** (``keep_errors``, ``keep_paths``, ``keep_names``):
    the placeholder is followed by the result's failure lines, verbatim, then the file
    paths and the names it defined (see :func:`harness_clear_tool_results.excerpt.excerpt`),
    at most ``keep_max_lines`` failure lines and ``keep_max_tokens`` tokens in all. A
    result with none of them gets exactly ``placeholder``. The text is a pure function of
    the result and these settings, so it never changes once written.

    **Pins:** a pair whose call, return or retry prompt is pinned (:func:`harness.is_pinned`)
    is never cleared, neither its return nor (with ``clear_tool_inputs``) its arguments.

    **Typed pairs:** a pair whose call or return declares a tool kind
    (:func:`harness.core.declared_tool_kind`, e.g. pydantic-ai's tool search) is never
    cleared either: its content has a declared structure the framework validates and reads
    (the tools a search discovered), which a text placeholder would not fit.

    **Cache-aware trigger** (``cache_aware=True``): when the trigger fires, the clear it
    would make is planned first, and it only goes ahead when :func:`cache_pays` says the
    tokens it frees over ``expected_remaining_requests`` (default: as many requests as
    the run made so far) are worth more than writing the prompt from the first changed
    message to the end into the cache again. A forced ``compact`` (``harness.compact(...,
    force=True)``, a ``TieredCompaction`` tier) is never held back: its caller decided
    the history must shrink.

    With a recall capability installed (``harness-recall`` sets ``ctx.references``), each
    placeholder ends with `` [recall: <ref>]``, the reference of the original in the
    session's log; without one (``ctx.references is None``) it is exactly ``placeholder``.

    The instance remembers its last scan (the history as it left it, the pairs, which old
    pairs are settled and its decisions for the others). When the next history is that one
    with messages appended (an identity check), only the new messages and the unsettled
    pairs are looked at; any other history gets a full scan with the same result.

    Attributes:
        max_messages: Fire when more than this many messages follow the newest cleared result.
        max_tokens: Fire when the history holds more than this many tokens.
        max_fraction: Fire when the history exceeds this fraction of the context window.
        context_window: Context window for ``max_fraction`` when the model reports none.
        keep_pairs: Newest tool results kept intact (any tool).
        placeholder: Text that replaces a cleared result (always a string, see README).
        exclude_tools: Names of tools whose results are never cleared.
        clear_tool_inputs: Also replace the arguments of cleared calls.
        min_clear_tokens: Skip a clear that would free fewer tokens than this.
        keep_errors: A cleared result keeps its failure lines.
        keep_paths: A cleared result keeps the file paths it named.
        keep_names: A cleared result keeps the names it defined.
        keep_max_lines: At most this many failure lines per cleared result.
        keep_max_tokens: At most this many tokens of kept lines, paths and names per result.
        cache_aware: The trigger also requires :func:`cache_pays`.
        expected_remaining_requests: ``R`` for the cache arithmetic (``None``: estimated,
            see :func:`remaining_requests`).
        cache_write_multiplier: Price of a cache write in base input prices (Anthropic: 1.25).
        cache_read_multiplier: Price of a cache read in base input prices (Anthropic: 0.1).
        trigger: The validated trigger (derived; not a constructor argument).
    """

    name: ClassVar[str] = "clear_tool_results"
    runs_before: ClassVar[tuple[str, ...]] = ("summarizing", "sliding_window")
    default_trigger: ClassVar[Mapping[str, int | float]] = {"max_fraction": 0.6}

    max_messages: int | None = None
    max_tokens: int | None = None
    max_fraction: float | None = None
    context_window: int | None = None
    keep_pairs: int = 3
    placeholder: str = DEFAULT_PLACEHOLDER
    exclude_tools: frozenset[str] = attrs.field(default=frozenset[str](), converter=tool_names)
    clear_tool_inputs: bool = False
    min_clear_tokens: int | None = None
    keep_errors: bool = True
    keep_paths: bool = True
    keep_names: bool = False
    keep_max_lines: int = 6
    keep_max_tokens: int = 60
    cache_aware: bool = False
    expected_remaining_requests: int | None = None
    cache_write_multiplier: float = 1.25
    cache_read_multiplier: float = 0.1
    trigger: Trigger = attrs.field(init=False, repr=False)
    _memo: list[Memo] = attrs.field(init=False, repr=False, factory=list[Memo])
    _lock: threading.Lock = attrs.field(init=False, repr=False, factory=threading.Lock)

    def __attrs_post_init__(self) -> None:
        """Validate the parameters.

        Raises:
            ValueError: A parameter is out of range; the message names it.
        """
        trigger = Trigger.create(
            max_messages=self.max_messages,
            max_tokens=self.max_tokens,
            max_fraction=self.max_fraction,
            context_window=self.context_window,
        )
        if not isinstance(self.keep_pairs, int) or isinstance(self.keep_pairs, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"keep_pairs must be an integer, got {self.keep_pairs!r}.")
        if self.keep_pairs < 0:
            raise ValueError("keep_pairs must be non-negative.")
        if not isinstance(self.placeholder, str) or not self.placeholder:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError("placeholder must be a non-empty string.")
        if self.min_clear_tokens is not None and self.min_clear_tokens < 0:
            raise ValueError("min_clear_tokens must be non-negative.")
        for flag in ("keep_errors", "keep_paths", "keep_names", "cache_aware"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"{flag} must be True or False, got {getattr(self, flag)!r}.")
        for field in ("keep_max_lines", "keep_max_tokens"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{field} must be a non-negative integer, got {value!r}.")
        check_cache_settings(
            self.expected_remaining_requests, self.cache_write_multiplier, self.cache_read_multiplier
        )
        object.__setattr__(self, "trigger", trigger)

    # -- trigger -------------------------------------------------------------------------

    def messages_since_last_clear(
        self, messages: Sequence[CanonicalMessage], limit: int | None = None
    ) -> int:
        """Count the messages after the newest result this capability cleared.

        Walks back from the end, so the cost is the distance to that result, capped at
        ``limit + 1`` messages when ``limit`` is given (enough to decide a trigger).

        Args:
            messages: The history.
            limit: Stop counting once the count exceeds this.

        Returns:
            The number of messages after the newest cleared result (all of them when
            nothing was cleared), or ``limit + 1`` when the walk stopped early.
        """
        count = 0
        for message in reversed(messages):
            if message.kind == "request":
                for part in message.parts:
                    if isinstance(part, ToolReturnPart) and part.metadata is not None:
                        mark = harness_mark(part)
                        if mark is not None and mark.get("cleared") == self.name:
                            return count
            count += 1
            if limit is not None and count > limit:
                return count
        return count

    def should_compact(self, ctx: RequestContext) -> str | None:
        """Return why the trigger fires, or ``None``.

        The message check walks back at most ``max_messages + 1`` messages; the token check
        uses the cached counter. Neither depends on the length of the whole history. With
        ``cache_aware``, a firing trigger also plans the clear (the plan is remembered, so
        the clear that follows does not decide again) and holds it back unless
        :func:`cache_pays`.
        """
        reason = self._triggered(ctx)
        if reason is None or not self.cache_aware or self._over_window(ctx):
            return reason
        verdict = self.cache_verdict(ctx)
        if verdict is None or not verdict.pays:
            return None
        return f"{reason}; {verdict.describe()}"

    def _over_window(self, ctx: RequestContext) -> bool:
        """Whether the history is larger than the whole context window (never held back then)."""
        window = self.context_window or ctx.context_window
        return window is not None and ctx.context_tokens() > window

    def _triggered(self, ctx: RequestContext) -> str | None:
        trigger = self.trigger
        if trigger.max_messages is not None and len(ctx.messages) > trigger.max_messages:
            pending = self.messages_since_last_clear(ctx.messages, trigger.max_messages)
            if pending > trigger.max_messages:
                return (
                    f"more than max_messages={trigger.max_messages} messages since the newest cleared result"
                )
        limit = trigger.token_limit(ctx, self.name)
        if limit is not None:
            tokens = ctx.context_tokens()
            if tokens > limit:
                return f"{tokens} tokens > limit {limit}"
        return None

    def cache_verdict(self, ctx: RequestContext) -> CacheVerdict | None:
        """The cache arithmetic of the clear :meth:`compact` would make now (``None``: nothing to clear).

        ``S`` is the tokens the clear frees, ``P`` the tokens from the first message it
        changes to the end of the history after the clear, ``R`` from
        :func:`remaining_requests`; see :func:`cache_pays`.
        """
        messages = ctx.messages
        with self._lock:
            memo = self._scan(messages)
            changes, _ids, freed, _settled, untouched = self._evaluate(
                messages, memo, ctx.token_counter, ctx.references
            )
            memo.settled = untouched
            self._memo[:] = [memo]
        if not changes:
            return None
        first = min(changes)
        rewritten = ctx.token_counter.count_messages(messages[first:]) - freed
        return cache_pays(
            freed,
            rewritten,
            remaining_requests(ctx, self.expected_remaining_requests),
            write_multiplier=self.cache_write_multiplier,
            read_multiplier=self.cache_read_multiplier,
        )

    # -- action --------------------------------------------------------------------------

    def _cleared_return(
        self,
        part: ToolReturnPart,
        message: CanonicalMessage | None = None,
        references: References | None = None,
        counter: PartCounter | None = None,
    ) -> ToolReturnPart | None:
        if is_cleared(part) or part.content == self.placeholder:
            return None
        try:
            metadata = marked_metadata(part.metadata, cleared=self.name)
        except MessageError:
            return None  # metadata we cannot mark: leave the part alone rather than lose track of it
        content = with_reference(self.placeholder, references, message, part)
        kept = self._excerpt(part.content, counter)
        if kept:
            content = f"{content}\n{kept}"
        return evolve(part, content=content, metadata=metadata)

    def _excerpt(self, content: Any, counter: PartCounter | None) -> str:
        """What the cleared result keeps after the placeholder (empty: nothing)."""
        if not (self.keep_errors or self.keep_paths or self.keep_names) or content is None:
            return ""
        return excerpt(
            text_of(content),
            errors=self.keep_errors,
            paths=self.keep_paths,
            names=self.keep_names,
            max_lines=self.keep_max_lines,
            max_tokens=self.keep_max_tokens,
            count=None if counter is None else text_counter(counter),
        ).render()

    def _cleared_call(
        self,
        part: ToolCallPart,
        message: CanonicalMessage | None = None,
        references: References | None = None,
    ) -> ToolCallPart | None:
        if is_cleared(part) or not has_args(part):
            return None
        try:
            metadata = marked_metadata(part.metadata, cleared=self.name)
        except MessageError:
            return None
        replacement: dict[str, Any] = {
            CLEARED_ARGS_KEY: with_reference(self.placeholder, references, message, part)
        }
        args: Mapping[str, Any] | str = json.dumps(replacement) if isinstance(part.args, str) else replacement
        return evolve(part, args=args, metadata=metadata)

    def plan(
        self, messages: Sequence[CanonicalMessage], counter: PartCounter
    ) -> tuple[dict[int, dict[int, Part]], list[str], int]:
        """Compute the replacements a clear would make, without applying them.

        A part is only replaced when the replacement has fewer tokens (a result shorter
        than the placeholder stays as it is), so clearing never grows the history.

        Args:
            messages: The history.
            counter: Counts the tokens of a part (the context's cached token counter).

        Returns:
            ``(changes, call_ids, freed)``: ``changes[message_index][part_index]`` is the
            replacement part; ``call_ids`` lists the affected tool calls in return order;
            ``freed`` is the number of tokens the replacements free.
        """
        with self._lock:
            memo = self._scan(messages)
            changes, ids, freed, _settled, untouched = self._evaluate(messages, memo, counter, None)
            memo.settled = untouched
            self._memo[:] = [memo]
            return changes, ids, freed

    def _scan(self, messages: Sequence[CanonicalMessage]) -> Memo:
        """The pairs of ``messages``, extending the remembered scan when only messages were appended."""
        memo = self._memo[0] if self._memo else None
        if memo is not None and extends(messages, memo.seen):
            start = len(memo.seen)
        else:
            memo, start = Memo([], {}, [], 0), 0
        calls, pairs, pinned = memo.calls, memo.pairs, memo.pinned
        for mi in range(start, len(messages)):
            message = messages[mi]
            if message.kind == "response":
                for pi, part in enumerate(message.parts):
                    if isinstance(part, ToolCallPart):
                        calls[part.tool_call_id] = (mi, pi)
                        if part.metadata is not None and is_pinned(part):
                            pinned.add(part.tool_call_id)
            else:
                for pi, part in enumerate(message.parts):
                    if isinstance(part, ToolReturnPart):
                        call = calls.get(part.tool_call_id)
                        if call is not None:
                            pairs.append((mi, pi, call[0], call[1]))
                    if (
                        isinstance(part, ToolReturnPart | RetryPromptPart)
                        and part.metadata is not None
                        and part.tool_call_id
                        and is_pinned(part)
                    ):
                        pinned.add(part.tool_call_id)
        memo.seen = list(messages)
        return memo

    def _decide(
        self,
        messages: Sequence[CanonicalMessage],
        pair: tuple[int, int, int, int],
        counter: PartCounter,
        references: References | None = None,
    ) -> Decision:
        """The replacements one old pair gets (a pure function of its two parts and ``references``)."""
        rm, rp, cm, cp = pair
        ret = messages[rm].parts[rp]
        call = messages[cm].parts[cp]
        assert isinstance(ret, ToolReturnPart)
        assert isinstance(call, ToolCallPart)
        exclude = self.exclude_tools
        if call.tool_name in exclude or (ret.tool_name is not None and ret.tool_name in exclude):
            return None, 0, None, 0
        if declared_tool_kind(ret) is not None or declared_tool_kind(call) is not None:
            return None, 0, None, 0  # typed content (a tool search's discoveries): text would not fit it
        new_ret = self._cleared_return(ret, messages[rm], references, counter)
        saved_ret = 0 if new_ret is None else counter.count_part(ret) - counter.count_part(new_ret)
        new_call = self._cleared_call(call, messages[cm], references) if self.clear_tool_inputs else None
        saved_call = 0 if new_call is None else counter.count_part(call) - counter.count_part(new_call)
        return (
            new_ret if saved_ret > 0 else None,
            saved_ret,
            new_call if saved_call > 0 else None,
            saved_call,
        )

    def _evaluate(
        self,
        messages: Sequence[CanonicalMessage],
        memo: Memo,
        counter: PartCounter,
        references: References | None,
    ) -> tuple[dict[int, dict[int, Part]], list[str], int, int, int]:
        """Decide every old pair not yet settled.

        Returns ``(changes, call_ids, freed, settled_if_applied, settled_if_not)``: the
        number of leading pairs that need nothing more once the changes are applied, and
        if they are not (a clear skipped by ``min_clear_tokens``, or a dry ``plan``).
        ``references`` (``ctx.references``) adds recall references to the placeholders.
        """
        if memo.references is not references:  # remembered decisions carry the other references
            memo.decisions.clear()
            memo.references = references
        last = len(messages) - 1
        current = last if last >= 0 and messages[last].kind == "request" else -1
        pairs = memo.pairs
        old_end = max(len(pairs) - self.keep_pairs, 0)
        changes: dict[int, dict[int, Part]] = {}
        ids: list[str] = []
        freed = 0
        blocked = untouched = -1  # first pair left for later / first pair with a change
        protected_calls: set[tuple[int, int]] = set()
        if self.clear_tool_inputs:
            for rm, _rp, cm, cp in reversed(pairs):
                if rm != current:
                    break
                protected_calls.add((cm, cp))
        decisions = memo.decisions
        pinned = memo.pinned
        for index in range(memo.settled, old_end):
            rm, rp, cm, cp = pairs[index]
            if rm == current:
                if blocked < 0:
                    blocked = index
                continue
            if pinned:
                answer = messages[rm].parts[rp]
                if isinstance(answer, ToolReturnPart) and answer.tool_call_id in pinned:
                    continue  # a pinned pair: never cleared (settled, nothing to do)
            decision = decisions.get(index)
            if decision is None:
                decision = decisions[index] = self._decide(messages, pairs[index], counter, references)
            new_ret, saved_ret, new_call, saved_call = decision
            touched = False
            if new_ret is not None:
                changes.setdefault(rm, {})[rp] = new_ret
                freed += saved_ret
                touched = True
            if new_call is not None and cp not in changes.get(cm, {}):
                if (cm, cp) in protected_calls:
                    if blocked < 0:
                        blocked = index
                else:
                    changes.setdefault(cm, {})[cp] = new_call
                    freed += saved_call
                    touched = True
            if touched:
                ids.append(pair_id(new_ret, new_call))
                if untouched < 0:
                    untouched = index
        settled = old_end if blocked < 0 else blocked
        if untouched < 0 or untouched > settled:
            untouched = settled
        return changes, list(dict.fromkeys(ids)), freed, settled, untouched

    async def compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
        """Clear every old result now (ignoring the trigger) and report the change.

        Nothing is reported when nothing changes, or when ``min_clear_tokens`` is set and
        the clear would free fewer tokens than that.

        Args:
            ctx: The request context whose ``messages`` are edited.
            reason: Why the clear runs (goes into the reported event).
        """
        messages = ctx.messages
        with self._lock:
            memo = self._scan(messages)
            changes, ids, freed, settled, untouched = self._evaluate(
                messages, memo, ctx.token_counter, ctx.references
            )
            self._memo[:] = [memo]
            if not changes or (self.min_clear_tokens is not None and freed < self.min_clear_tokens):
                memo.settled = untouched
                return
            new_messages = list(messages)
            results = inputs = 0
            for mi, replaced in changes.items():
                parts = list(messages[mi].parts)
                for pi, new_part in replaced.items():
                    parts[pi] = new_part
                    if isinstance(new_part, ToolReturnPart):
                        results += 1
                    else:
                        inputs += 1
                new_messages[mi] = evolve(messages[mi], parts=tuple(parts))
            memo.seen = new_messages  # replace_messages copies it; this list stays private
            memo.settled = settled
            memo.decisions.clear()  # decided on parts that were just replaced
        ctx.replace_messages(
            new_messages,
            strategy=self.name,
            reason=reason,
            cleared_tool_call_ids=ids,
            details={
                "cleared_results": results,
                "cleared_inputs": inputs,
                "freed_tokens": freed,
                "keep_pairs": self.keep_pairs,
            },
        )
