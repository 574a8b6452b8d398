"""The :class:`SlidingWindow` capability."""

from __future__ import annotations

__all__ = ["SOURCE", "SlidingWindow", "is_preserved_part", "is_receipt_part"]

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs

from harness.capabilities import Capability, CompactionEvent, RequestContext, Trigger
from harness.core import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    SystemPromptPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    harness_mark,
    is_pinned,
    pinned_call_ids,
    with_harness_mark,
)
from harness.errors import CapabilityError, MessageError
from harness.history import safe_cutoff, safe_token_cutoff
from harness.tokens import MESSAGE_OVERHEAD, TokenCounter

SOURCE = "sliding_window"
"""Value of the ``source`` / ``preserved_by`` harness marks this capability writes."""

_RECEIPT_BOUND = 10**12  # a receipt's figures never print longer than this


def _mark(part: Part) -> Mapping[str, Any] | None:
    # Most parts carry no metadata: skip the mapping checks for them.
    if getattr(part, "metadata", None) is None:
        return None
    return harness_mark(part)


def is_receipt_part(part: Part) -> bool:
    """True when ``part`` is a receipt written by :class:`SlidingWindow` (recognised by its mark)."""
    mark = _mark(part)
    return mark is not None and mark.get("kind") == "receipt" and mark.get("source") == SOURCE


def is_preserved_part(part: Part) -> bool:
    """True when ``part`` was kept at the front of the history by :class:`SlidingWindow`."""
    mark = _mark(part)
    return mark is not None and mark.get("preserved_by") == SOURCE


def _is_front_part(part: Part) -> bool:
    return is_preserved_part(part) or is_receipt_part(part)


def _is_artifact(part: Part) -> bool:
    """Request-scoped parts and receipts are never preserved as part of the task."""
    mark = _mark(part)
    if mark is None:
        return False
    return bool(mark.get("request_scoped")) or is_receipt_part(part)


def _check_int(name: str, value: object, *, minimum: int, optional: bool) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be non-negative." if minimum == 0 else f"{name} must be positive.")


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


@attrs.frozen(kw_only=True, eq=False)
class SlidingWindow(Capability):
    """Keep the newest messages of the history once a trigger fires.

    When the history exceeds ``max_messages`` messages, ``max_tokens`` tokens or
    ``max_fraction`` of the context window, everything but the newest ``keep_messages``
    messages (or the newest messages that fit in ``keep_tokens`` tokens) is dropped. The
    cut never separates a tool call from its return or from a retry prompt naming it, at
    any distance; it moves back (keeping more) until it is safe.

    Kept at the front, in their original order, when they fall before the cut:

    * the leading system prompts of the first request (the conversation's instructions,
      including a first request that holds only system prompts);
    * with ``preserve_first_user_message``, the system and user prompts of the first
      request that holds a user prompt (the task), never duplicated;
    * every pinned system or user prompt (:func:`harness.is_pinned`) of a dropped request;
    * with ``receipt``, a short user-prompt note saying how many messages and tokens were
      dropped (replaced, not accumulated, on later compactions).

    A pinned part that cannot stand at the front (a pinned tool call or its answer, which
    keep their whole pair, or a pinned part of a response) bounds the cut: the window
    keeps everything from it on. A pin on an old tool pair therefore limits what the
    window can free.

    These front parts form one request. If the kept window starts with a request they are
    merged into it, so the result never holds two consecutive requests; the request being
    sent is never modified (when it would be the only kept message the window grows back
    to the previous safe cut instead). Preserved parts carry the harness mark
    ``preserved_by="sliding_window"`` and receipts ``kind="receipt"``, so later
    compactions recognise them without reading text.

    ``keep_messages`` counts the kept window (the front adds at most one request on top);
    ``keep_tokens`` covers everything kept, front included, so the result fits it
    whenever the newest messages allow. Either way the result lands well below the
    trigger, so the following requests share a stable prefix until the history has grown
    back to the trigger.

    Attributes:
        max_messages: Fire when the history holds more than this many messages.
        max_tokens: Fire when the history holds more than this many tokens.
        max_fraction: Fire when the history exceeds this fraction of the context window.
        context_window: Context-window size to use with ``max_fraction`` when the model
            does not report one (or to override it).
        keep_messages: Messages to keep once the trigger fires (``0`` still keeps the
            request being sent). Ignored when ``keep_tokens`` is set.
        keep_tokens: Keep the newest messages that fit in this many tokens instead (the
            newest message is always kept, even if it alone is larger).
        preserve_first_user_message: Keep the first request holding a user prompt.
        receipt: Insert a note saying how much was dropped.
    """

    name: ClassVar[str] = SOURCE
    default_trigger: ClassVar[Mapping[str, int | float]] = {"max_fraction": 0.85}

    max_messages: int | None = None
    max_tokens: int | None = None
    max_fraction: float | None = None
    context_window: int | None = None
    keep_messages: int = 40
    keep_tokens: int | None = None
    preserve_first_user_message: bool = True
    receipt: bool = False
    trigger: Trigger = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        trigger = Trigger.create(
            max_messages=self.max_messages,
            max_tokens=self.max_tokens,
            max_fraction=self.max_fraction,
            context_window=self.context_window,
        )
        _check_int("keep_messages", self.keep_messages, minimum=0, optional=False)
        _check_int("keep_tokens", self.keep_tokens, minimum=0, optional=True)
        max_messages = self.max_messages
        if self.keep_tokens is None and max_messages is not None and self.keep_messages >= max_messages:
            raise ValueError(
                f"keep_messages ({self.keep_messages}) must be less than max_messages ({self.max_messages}): "
                "the window is cut down to keep_messages once the history exceeds max_messages, so keeping "
                "as many would cut again on every request."
            )
        if self.keep_tokens is not None:
            if self.max_tokens is not None and self.keep_tokens >= self.max_tokens:
                raise ValueError(
                    f"keep_tokens ({self.keep_tokens}) must be less than max_tokens ({self.max_tokens}): "
                    "the window is cut down to keep_tokens once the history exceeds max_tokens."
                )
            if self.max_fraction is not None and self.context_window is not None:
                limit = int(self.max_fraction * self.context_window)
                if self.keep_tokens >= limit:
                    raise ValueError(
                        f"keep_tokens ({self.keep_tokens}) must be less than max_fraction x context_window "
                        f"({self.max_fraction} x {self.context_window} = {limit} tokens)."
                    )
        object.__setattr__(self, "trigger", trigger)

    def should_compact(self, ctx: RequestContext) -> str | None:
        """Return why the window should be cut now, or ``None`` to stay idle.

        The message check is O(1) and the token check uses the cached counter, so an
        idle check costs only what changed since the last request.

        Raises:
            CapabilityError: ``keep_tokens`` is not below the token limit resolved from the
                model's context window (``max_fraction``), or ``max_fraction`` is set and
                no context window is known.
        """
        if self.keep_tokens is not None and self.max_fraction is not None and self.context_window is None:
            limit = self.trigger.token_limit(ctx, self.name)
            if limit is not None and self.keep_tokens >= limit:
                raise CapabilityError(
                    self.name,
                    f"keep_tokens ({self.keep_tokens}) must be less than max_fraction x the model's context "
                    f"window ({limit} tokens)",
                )
        return self.trigger.exceeded(ctx, self.name)

    async def compact(
        self, ctx: RequestContext, *, reason: str = "forced", target_tokens: int | None = None
    ) -> None:
        """Cut the history down to the keep target now, whatever the trigger says.

        Reports one ``on_compaction`` event when something was dropped, nothing otherwise.

        Args:
            ctx: The request context.
            reason: Why (reported in the event).
            target_tokens: Cut to fit this many tokens (front included) instead of
                ``keep_messages``/``keep_tokens``, keeping as many of the newest messages as
                fit (``TieredCompaction`` passes its target).
        """
        self.apply(ctx, reason=reason, target_tokens=target_tokens)

    def apply(
        self, ctx: RequestContext, *, reason: str = "forced", target_tokens: int | None = None
    ) -> CompactionEvent | None:
        """Synchronous form of :meth:`compact`; returns the reported event, if any."""
        messages = ctx.messages
        if len(messages) < 2:
            return None
        counter = ctx.token_counter
        cut = _pin_bound(messages, self._cut(messages, counter, target_tokens))
        if cut <= 0:
            return None
        front = self._front(messages, cut)
        if not _drops_anything(messages, cut, front):
            return None
        last = len(messages) - 1
        if (front.parts or self.receipt) and cut >= last and messages[last].is_request:
            # Never edit the request being sent: keep the previous safe cut instead.
            cut = min(cut, safe_cutoff(messages, 2))
            if cut <= 0:
                return None
            front = self._front(messages, cut)
            if not _drops_anything(messages, cut, front):
                return None
        return self._rebuild(ctx, messages, cut, front, reason)

    # -- cut selection -------------------------------------------------------------

    def _cut(
        self, messages: Sequence[CanonicalMessage], counter: TokenCounter, target: int | None = None
    ) -> int:
        n = len(messages)
        keep_tokens = self.keep_tokens if target is None else target
        if keep_tokens is None:
            return min(safe_cutoff(messages, max(self.keep_messages, 1)), n - 1)
        # The front (instructions, task, receipt) is part of the budget, so the result
        # fits keep_tokens and stays below the trigger until the history grows again.
        allowance = self._front_allowance(messages, counter)
        budget = max(keep_tokens - allowance, 0)
        first = messages[0]

        def count(message: CanonicalMessage) -> int:
            if message is first:
                return _count_without_front(message, counter)
            return counter.count_message(message)

        return min(safe_token_cutoff(messages, budget, count), n - 1)

    def _front_allowance(self, messages: Sequence[CanonicalMessage], counter: TokenCounter) -> int:
        """Tokens the front can take at most: every part it could hold, a receipt, framing."""
        front = self._front(messages, len(messages) - 1)
        if not front.parts and not self.receipt:
            return 0
        allowance = MESSAGE_OVERHEAD + sum(counter.count_part(p) for p in front.parts)
        if self.receipt:
            allowance += counter.count_part(_receipt(_RECEIPT_BOUND, _RECEIPT_BOUND))
        return allowance

    def _front(self, messages: Sequence[CanonicalMessage], cut: int) -> _Front:
        """What of ``messages[:cut]`` stands at the front of the result.

        Parts this capability preserved earlier (and its old receipt) live in the leading
        requests of the history, so only those are searched for marks: O(1), not O(n).
        """
        leading = 0
        while leading < cut and messages[leading].is_request:
            leading += 1
        marked: list[Part] = []
        sources: list[int] = []
        receipt_mark: Mapping[str, Any] | None = None
        for index in range(leading):
            found = False
            summary_at = _summary_index(messages[index])
            for part_index, part in enumerate(messages[index].parts):
                if part_index <= summary_at and not is_preserved_part(part) and not is_receipt_part(part):
                    marked.append(part)  # a summary and the parts it carries stay at the front
                    found = True
                elif is_preserved_part(part):
                    marked.append(part)
                    found = True
                elif is_receipt_part(part):
                    receipt_mark = harness_mark(part)
                    found = True
            if found:
                sources.append(index)
        if marked:
            return _with_pinned(messages, cut, _Front(tuple(marked), tuple(sources), receipt_mark))
        head: list[Part] = []
        first = messages[0]
        if first.is_request:
            for part in first.parts:
                if not isinstance(part, SystemPromptPart) or _is_artifact(part):
                    break
                head.append(part)
        if head and 0 not in sources:
            sources.insert(0, 0)
        if self.preserve_first_user_message:
            index = _first_user_request(messages, cut)
            if index is not None:
                task: list[Part] = [
                    p
                    for p in messages[index].parts
                    if isinstance(p, (SystemPromptPart, UserPromptPart)) and not _is_artifact(p)
                ]
                head = task if index == 0 else [*head, *task]
                if index not in sources:
                    sources.append(index)
        return _with_pinned(messages, cut, _Front(tuple(head), tuple(sorted(sources)), receipt_mark))

    # -- rebuilding ----------------------------------------------------------------

    def _rebuild(
        self,
        ctx: RequestContext,
        messages: list[CanonicalMessage],
        cut: int,
        found: _Front,
        reason: str,
    ) -> CompactionEvent | None:
        counter = ctx.token_counter
        dropped = messages[:cut]
        tail = messages[cut:]
        head = list(found.parts)
        kept_ids = {id(p) for p in head}
        # Both counts are incremental (the whole history was just counted by the trigger).
        dropped_tokens = counter.count_messages(messages) - counter.count_messages(tail)
        dropped_messages = cut
        for index in found.sources:
            message = dropped[index]
            front_only = bool(message.parts)
            for part in message.parts:
                if id(part) in kept_ids or is_receipt_part(part):
                    dropped_tokens -= counter.count_part(part)
                else:
                    front_only = False
            if front_only:
                dropped_messages -= 1
                dropped_tokens -= MESSAGE_OVERHEAD
        dropped_tokens = max(dropped_tokens, 0)
        removed_calls = [
            p.tool_call_id for m in dropped if m.is_response for p in m.parts if isinstance(p, ToolCallPart)
        ]
        previous = found.receipt_mark or {}
        total_messages = _as_int(previous.get("dropped_messages")) + dropped_messages
        total_tokens = _as_int(previous.get("dropped_tokens")) + dropped_tokens

        front: list[Part] = [p if is_preserved_part(p) else _mark_preserved(p) for p in head]
        if self.receipt:
            front.append(_receipt(total_messages, total_tokens))

        new: list[CanonicalMessage]
        if not front:
            new = list(tail)
        elif tail[0].is_request:
            new = [tail[0].replace(parts=(*front, *tail[0].parts)), *tail[1:]]
        else:
            base = _front_base(dropped, found)
            if base is not None and base.is_request and _same_parts(base.parts, front):
                front_message = base
            elif base is not None and base.is_request:
                front_message = base.replace(parts=tuple(front))
            else:
                front_message = CanonicalMessage.request(*front)
            new = [front_message, *tail]

        details: dict[str, Any] = {
            "cut": cut,
            "kept_window": len(tail),
            "dropped_messages": dropped_messages,
            "dropped_tokens": dropped_tokens,
            "preserved_parts": len(head),
            "receipt": self.receipt,
        }
        if self.receipt:
            details["total_dropped_messages"] = total_messages
            details["total_dropped_tokens"] = total_tokens
        return ctx.replace_messages(
            new,
            strategy=self.name,
            reason=reason,
            removed_tool_call_ids=removed_calls,
            details=details,
        )


@attrs.frozen
class _Front:
    """Parts of the dropped range kept at the front, where they come from, the old receipt."""

    parts: tuple[Part, ...]
    sources: tuple[int, ...]
    receipt_mark: Mapping[str, Any] | None


def _is_summary(part: Part) -> bool:
    mark = _mark(part)
    return mark is not None and mark.get("kind") == "summary" and isinstance(part, UserPromptPart)


def _summary_index(message: CanonicalMessage) -> int:
    """Index of the last summary part of a request (harness mark ``kind="summary"``), or -1.

    A summarizing capability puts its summary after the parts it carries (instructions,
    task), so everything up to it is the front of a summarized history.
    """
    found = -1
    for index, part in enumerate(message.parts):
        if _is_summary(part):
            found = index
    return found


def _is_movable_pin(part: Part) -> bool:
    """A pinned prompt part: it can stand at the front, like the task."""
    return isinstance(part, (SystemPromptPart, UserPromptPart)) and not is_receipt_part(part)


def _with_pinned(messages: Sequence[CanonicalMessage], cut: int, front: _Front) -> _Front:
    """``front`` plus the pinned prompt parts of the dropped requests it does not hold yet.

    They are kept at the front in history order, after the parts already there, and
    marked ``preserved_by`` like the task, so a later compaction carries them again.
    """
    kept = {id(p) for p in front.parts}
    extra: list[Part] = []
    sources = set(front.sources)
    for index in range(cut):
        message = messages[index]
        if not message.is_request:
            continue
        for part in message.parts:
            if getattr(part, "metadata", None) is None or id(part) in kept:
                continue
            if is_pinned(part) and _is_movable_pin(part):
                extra.append(part)
                sources.add(index)
    if not extra:
        return front
    return _Front((*front.parts, *extra), tuple(sorted(sources)), front.receipt_mark)


def _pin_bound(messages: Sequence[CanonicalMessage], cut: int) -> int:
    """``cut`` moved back so no pinned part that cannot move to the front is dropped.

    A pinned tool call or answer keeps its whole pair: the cut stops at (or before) the
    response holding the call. Any other pinned part of a response (or a pinned general
    retry prompt) stops the cut at its message. The result is a safe cut again.
    """
    if cut <= 0:
        return cut
    ids = pinned_call_ids(messages[:cut])
    bound = cut
    for index in range(cut):
        for part in messages[index].parts:
            if isinstance(part, (ToolCallPart, ToolReturnPart, RetryPromptPart)) and part.tool_call_id in ids:
                bound = index
                break
            if getattr(part, "metadata", None) is not None and is_pinned(part) and not _is_movable_pin(part):
                bound = index
                break
        if bound < cut:
            break
    if bound == cut:
        return cut
    return safe_cutoff(messages, len(messages) - bound)


def _drops_anything(messages: Sequence[CanonicalMessage], cut: int, front: _Front) -> bool:
    """True when ``messages[:cut]`` holds anything that is not kept at the front."""
    sources = set(front.sources)
    kept = {id(p) for p in front.parts}
    for index in range(cut):
        message = messages[index]
        if index not in sources:
            if message.parts:
                return True
            continue
        if any(id(p) not in kept and not is_receipt_part(p) for p in message.parts):
            return True
    return False


def _count_without_front(message: CanonicalMessage, counter: TokenCounter) -> int:
    """Token count of ``message`` without the parts this capability put at the front."""
    parts = tuple(p for p in message.parts if not _is_front_part(p))
    if len(parts) == len(message.parts):
        return counter.count_message(message)
    if not parts:
        return 0
    return counter.count_message(message.replace(parts=parts))


def _first_user_request(messages: Sequence[CanonicalMessage], cut: int) -> int | None:
    for index in range(cut):
        message = messages[index]
        if message.is_request and any(
            isinstance(p, UserPromptPart) and not _is_artifact(p) for p in message.parts
        ):
            return index
    return None


def _front_base(dropped: Sequence[CanonicalMessage], front: _Front) -> CanonicalMessage | None:
    """The dropped request the first preserved part came from (its fields are kept)."""
    if not front.parts:
        return None
    first = front.parts[0]
    for index in front.sources:
        if any(p is first for p in dropped[index].parts):
            return dropped[index]
    return None


def _same_parts(a: Sequence[Part], b: Sequence[Part]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _mark_preserved(part: Part) -> Part:
    try:
        if isinstance(part, SystemPromptPart):
            return with_harness_mark(part, preserved_by=SOURCE)
        if isinstance(part, UserPromptPart):
            return with_harness_mark(part, preserved_by=SOURCE)
    except MessageError:
        # ``metadata`` is not a mapping: keep the part unmarked rather than rewrite it.
        return part
    return part


def _as_int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _receipt(messages: int, tokens: int) -> UserPromptPart:
    text = (
        f"[Note from the harness: {_plural(messages, 'earlier message')} (about {tokens:,} tokens) "
        "were removed from this conversation to stay within the context limit. Their content is no "
        "longer available; re-read files or re-run tools if you need it.]"
    )
    return with_harness_mark(
        UserPromptPart(text),
        kind="receipt",
        source=SOURCE,
        dropped_messages=messages,
        dropped_tokens=tokens,
    )
