"""The :class:`ClampOversizedMessages` capability.

One oversized part can fill a context window on its own: a 200 KB build log returned by a
shell tool, a file dump, a pasted transcript. Budget-driven capabilities only notice it
once the whole history is over its budget, and then clear or summarize far more than that
one part. This capability looks at each tool result and user prompt once, when it first
appears, and cuts any that is over its token limit to its head and tail, with a marker
line in the middle saying how much was cut and how to read it back.

It only shortens content: no message or part is removed, ids and part kinds stay, so a
tool call is never split from its result and no prompt is lost. Clamped parts carry the
harness mark ``{"clamped": "clamp_oversized_messages", ...}`` and are never clamped again.
"""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_TOKENS", "MARK_KEY", "RECALL_TOOLS", "ClampOversizedMessages"]

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Final

import attrs

from harness.capabilities import Capability, RequestContext
from harness.core import (
    CanonicalMessage,
    Part,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    harness_mark,
    with_harness_mark,
)
from harness.core import replace as evolve
from harness.errors import MessageError
from harness.hooks import hookimpl
from harness_clamp_oversized.config import (
    check_bool,
    check_fraction,
    check_limit,
    check_non_negative,
    per_tool_limits,
)
from harness_clamp_oversized.cut import Cut, Recall, clamp_text

DEFAULT_MAX_TOKENS: Final = 4000
"""Default limit of one tool result or prompt, in tokens (about 16 KB of English text or code)."""

RECALL_TOOLS: Final = frozenset({"recall", "search_history"})
"""Tools whose results are never clamped unless ``per_tool`` names them: harness-recall's own
tools, which already page what they return (clamping them would hide what the model asked back)."""

MARK_KEY: Final = "clamped"
"""Key of the harness mark on a clamped part (its value is the capability's name)."""


def _marked(part: Part) -> bool:
    """Whether ``part`` carries any harness mark (pinned, cleared, clamped, a summary...)."""
    if getattr(part, "metadata", None) is None:  # the common case, without the Mapping check
        return False
    mark = harness_mark(part)
    return mark is not None and bool(mark)


def _text_item(item: object) -> str | None:
    """The text of one prompt content item: a string, or a ``{"kind": "text"}`` item's content."""
    if isinstance(item, str):
        return item
    if isinstance(item, Mapping):
        fields: Mapping[str, object] = item  # pyright: ignore[reportUnknownVariableType]
        content = fields.get("content")
        if fields.get("kind") == "text" and isinstance(content, str):
            return content
    return None


def _with_item(items: tuple[Any, ...], index: int, text: str) -> tuple[Any, ...]:
    item = items[index]
    new: object = text if isinstance(item, str) else {**item, "content": text}
    return (*items[:index], new, *items[index + 1 :])


@attrs.define
class _Memo:
    """The history as this capability last left it, and what may still need a decision there.

    Every part of ``seen`` was decided except the prompts of ``pending`` (the newest
    prompt's message, exempt while it is the newest). A part's decision cannot change while
    it stays the same object, so when the next history extends ``seen`` only ``pending``
    and the new messages are looked at.
    """

    seen: list[CanonicalMessage]
    pending: int = -1
    calls: dict[str, str] = attrs.field(factory=dict[str, str])  # tool call id -> tool name


@attrs.frozen
class _Change:
    message: int
    part: int
    new: Part
    kind: str  # "tool result" or "prompt"
    tool_call_id: str | None
    tokens_before: int
    tokens_after: int
    cut: Cut


@attrs.frozen(eq=False, kw_only=True)
class ClampOversizedMessages(Capability):
    """Cut any tool result or user prompt over its token limit to head + marker + tail.

    Which parts: every :class:`~harness.core.ToolReturnPart` with string content and (with
    ``prompts``) every :class:`~harness.core.UserPromptPart` (string content, or the
    largest text item of a multimodal prompt) whose token count (``ctx.token_counter``,
    framing included) is over ``max_tokens``, or over ``per_tool[tool]`` for a tool listed
    there (``None``: never clamp that tool; the results of harness-recall's ``recall`` and
    ``search_history`` tools, which page what they return, are never clamped unless listed
    there). Never: pinned parts, parts that carry any
    harness mark (another capability's output, or a part this one already clamped),
    structured tool results (dict, list, number content), retry prompts, system prompts,
    and the newest user prompt unless ``clamp_latest_prompt``.

    When: on every request, each part is decided once, when it first appears, so the
    prefix of later requests never changes because of this capability. The results in the
    request being sent are clamped before the model sees them (that is the point: a 200 KB
    tool output never reaches it whole). The newest prompt is exempt while it is the newest
    (the model must read what it was asked); it is decided on the first request after a
    newer prompt arrived.

    How: the head gets ``head_fraction`` of the tokens left after the marker, the tail the
    rest, each cut on a line boundary (inside a line only when not one whole line fits).
    The clamped part is at or under the limit, measured exactly; only when the limit cannot
    hold even the marker (a prompt whose images alone fill it) is the text replaced by the
    marker alone. A clamp that would save fewer than ``min_saved_tokens`` is not made.

    The marker names the recall reference of the original (``recall("r12.0",
    offset=5120) reads them``) when a recall capability (``harness-recall``) is installed,
    and otherwise says whether the session's stored log keeps the full text.

    Attributes:
        max_tokens: Token limit of one part (tools not in ``per_tool``, and prompts).
        per_tool: Limits by tool name; ``None`` never clamps that tool.
        head_fraction: Share of the kept tokens that goes to the head (the rest to the tail).
        prompts: Also clamp user prompts.
        clamp_latest_prompt: Also clamp the newest user prompt (the model then never
            sees it whole).
        min_saved_tokens: Skip a clamp that would save fewer tokens than this.
    """

    name: ClassVar[str] = "clamp_oversized_messages"
    runs_after: ClassVar[tuple[str, ...]] = ("recall",)
    runs_before: ClassVar[tuple[str, ...]] = (
        "dedupe_file_reads",
        "clear_tool_results",
        "summarizing",
        "sliding_window",
        "tiered",
    )

    max_tokens: int = DEFAULT_MAX_TOKENS
    per_tool: Mapping[str, int | None] = attrs.field(
        factory=lambda: per_tool_limits({}), converter=per_tool_limits
    )
    head_fraction: float = 0.6
    prompts: bool = True
    clamp_latest_prompt: bool = False
    min_saved_tokens: int = 100
    _memo: list[_Memo] = attrs.field(init=False, repr=False, factory=list[_Memo])
    _lock: threading.Lock = attrs.field(init=False, repr=False, factory=threading.Lock)

    def __attrs_post_init__(self) -> None:
        """Validate the parameters.

        Raises:
            ValueError: A parameter is out of range or of the wrong type; the message
                starts with its name.
        """
        check_limit("max_tokens", self.max_tokens)
        object.__setattr__(self, "head_fraction", check_fraction("head_fraction", self.head_fraction))
        check_bool("prompts", self.prompts)
        check_bool("clamp_latest_prompt", self.clamp_latest_prompt)
        check_non_negative("min_saved_tokens", self.min_saved_tokens)

    def describe(self) -> str:
        """One line saying what this configuration clamps (for logs and ``harness plugins``)."""
        tools = ", ".join(
            f"{tool}: {'never' if limit is None else f'{limit:,}'}" for tool, limit in self.per_tool.items()
        )
        what = "tool results and user prompts" if self.prompts else "tool results"
        latest = " (the newest prompt too)" if self.prompts and self.clamp_latest_prompt else ""
        head = round(self.head_fraction * 100)
        return (
            f"{self.name}: {what}{latest} over {self.max_tokens:,} tokens"
            f"{f' ({tools})' if tools else ''} keeping {head}% head + {100 - head}% tail"
        )

    def limit_for(self, tool_name: str | None) -> int | None:
        """The token limit of a result of ``tool_name`` (``None``: never clamped)."""
        if tool_name is not None and tool_name in self.per_tool:
            return self.per_tool[tool_name]
        if tool_name in RECALL_TOOLS:
            return None
        return self.max_tokens

    # -- the hook ----------------------------------------------------------------------

    def should_compact(self, ctx: RequestContext) -> str | None:
        """Why a clamp is due now (some part is over its limit), or ``None``; changes nothing."""
        with self._lock:
            changes, _memo = self._plan(ctx)
        return self._reason(changes) if changes else None

    @hookimpl
    async def before_model_request(self, ctx: RequestContext) -> None:
        """Clamp every part that is due, deciding only what is new since the last request."""
        await self.compact(ctx, reason="")

    async def compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
        """Clamp every part over its limit now, and report one :class:`CompactionEvent`.

        Args:
            ctx: The request context whose ``messages`` are edited.
            reason: Why (goes into the event); empty: say which parts were over their limit.
        """
        with self._lock:
            changes, memo = self._plan(ctx)
            if not changes:
                self._memo[:] = [memo]
                return
            messages = ctx.messages
            new_messages = list(messages)
            by_message: dict[int, list[_Change]] = {}
            for change in changes:
                by_message.setdefault(change.message, []).append(change)
            for mi, group in by_message.items():
                parts = list(messages[mi].parts)
                for change in group:
                    parts[change.part] = change.new
                new_messages[mi] = evolve(messages[mi], parts=tuple(parts))
            memo.seen = new_messages  # replace_messages copies it; this list stays private
            self._memo[:] = [memo]
        results = [c for c in changes if c.kind == "tool result"]
        ctx.replace_messages(
            new_messages,
            strategy=self.name,
            reason=reason or self._reason(changes),
            cleared_tool_call_ids=[c.tool_call_id for c in results if c.tool_call_id is not None],
            details={
                "clamped_results": len(results),
                "clamped_prompts": len(changes) - len(results),
                "saved_tokens": sum(c.tokens_before - c.tokens_after for c in changes),
                "cut_tokens": sum(c.cut.cut_tokens for c in changes),
                "parts": [
                    {
                        "message": c.message,
                        "part": c.part,
                        "kind": c.kind,
                        "tool_call_id": c.tool_call_id,
                        "tokens_before": c.tokens_before,
                        "tokens_after": c.tokens_after,
                        "cut_lines": c.cut.cut_lines,
                        "cut_chars": c.cut.cut_chars,
                    }
                    for c in changes
                ],
            },
        )

    @staticmethod
    def _reason(changes: Sequence[_Change]) -> str:
        largest = max(changes, key=lambda c: c.tokens_before)
        count = len(changes)
        parts = f"{count} part{'s' if count > 1 else ''}"
        return f"{parts} over the token limit (largest {largest.tokens_before:,} tokens)"

    # -- planning ----------------------------------------------------------------------

    def _plan(self, ctx: RequestContext) -> tuple[list[_Change], _Memo]:
        """The clamps due on ``ctx.messages`` and the memo to keep once they are applied."""
        messages = ctx.messages
        memo = self._memo[0] if self._memo else None
        if memo is not None and _extends(messages, memo.seen):
            start = len(memo.seen)
            candidates: Iterable[int] = (
                [memo.pending, *range(start, len(messages))]
                if memo.pending >= 0
                else range(start, len(messages))
            )
            calls = memo.calls
            latest = memo.pending
        else:
            start, candidates, calls, latest = 0, range(len(messages)), {}, -1
        for mi in range(start, len(messages)):
            message = messages[mi]
            if message.kind == "response":
                for part in message.parts:
                    if isinstance(part, ToolCallPart):
                        calls[part.tool_call_id] = part.tool_name
            elif any(isinstance(part, UserPromptPart) for part in message.parts):
                latest = mi
        exempt = -1 if self.clamp_latest_prompt else latest
        changes: list[_Change] = []
        for mi in candidates:
            message = messages[mi]
            if message.kind != "request":
                continue
            for pi, part in enumerate(message.parts):
                change = self._decide(ctx, message, mi, pi, part, calls, prompts_exempt=mi == exempt)
                if change is not None:
                    changes.append(change)
        pending = exempt if self.prompts and exempt >= 0 else -1
        return changes, _Memo(list(messages), pending, calls)

    def _decide(
        self,
        ctx: RequestContext,
        message: CanonicalMessage,
        mi: int,
        pi: int,
        part: Part,
        calls: Mapping[str, str],
        *,
        prompts_exempt: bool,
    ) -> _Change | None:
        if isinstance(part, ToolReturnPart):
            content = part.content
            if not isinstance(content, str) or _marked(part):
                return None
            limit = self.limit_for(part.tool_name or calls.get(part.tool_call_id))
            if limit is None:
                return None
            return self._clamp(ctx, message, mi, pi, part, limit, "tool result", part.tool_call_id)
        if isinstance(part, UserPromptPart) and self.prompts and not prompts_exempt and not _marked(part):
            return self._clamp(ctx, message, mi, pi, part, self.max_tokens, "prompt", None)
        return None

    def _clamp(
        self,
        ctx: RequestContext,
        message: CanonicalMessage,
        mi: int,
        pi: int,
        part: ToolReturnPart | UserPromptPart,
        limit: int,
        kind: str,
        tool_call_id: str | None,
    ) -> _Change | None:
        counter = ctx.token_counter
        before = counter.count_part(part)
        if before <= limit:
            return None
        content = part.content
        if isinstance(content, str):
            text, index = content, -1
        else:  # a prompt of content items: its largest text item
            assert isinstance(part, UserPromptPart)
            texts = [(len(t), i, t) for i, item in enumerate(content) if (t := _text_item(item)) is not None]
            if not texts:
                return None
            _length, index, text = max(texts)

        def build(new_text: str) -> ToolReturnPart | UserPromptPart:
            if index < 0:
                return evolve(part, content=new_text)
            assert not isinstance(content, str)
            return evolve(part, content=_with_item(tuple(content), index, new_text))

        def measure(new_text: str) -> int:
            return counter.count_part(build(new_text))

        recall = Recall(
            reference=ctx.reference_for(message, part),
            offsets=index < 0,
            stored=ctx.session is not None and ctx.session.store is not None,
        )
        cut = clamp_text(
            text,
            limit=limit,
            measure=measure,
            count=counter.count_text,
            head_fraction=self.head_fraction,
            what=kind,
            recall=recall,
            total_tokens=before,
        )
        try:
            new = with_harness_mark(build(cut.text), **{MARK_KEY: self.name, "original_tokens": before})
        except MessageError:
            return None  # metadata that cannot be marked: leave the part alone rather than lose track
        after = counter.count_part(new)
        if before - after < max(self.min_saved_tokens, 1):
            return None
        return _Change(mi, pi, new, kind, tool_call_id, before, after, cut)


def _extends(messages: Sequence[CanonicalMessage], seen: list[CanonicalMessage]) -> bool:
    """Whether ``messages`` starts with the messages of ``seen`` (identity first, at C speed)."""
    return len(messages) >= len(seen) and list(messages[: len(seen)]) == seen
