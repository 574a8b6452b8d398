"""``SummarizingCompaction``: replace the older history with one summary.

Layout after a compaction (``S`` is the summary part, marked
``{"kind": "summary", ...}`` in its harness metadata)::

    [request: system prompts, first user request's prompts, kept user prompts, S, (first
     kept request's parts)] + rest of the kept tail

The summary request is merged into the first kept message when that is a request, so no
two requests follow each other. On the next compaction the parts before ``S`` in its
request are recognised as *carried* (kept verbatim again) and ``S`` as the previous
summary, which the summarizer updates: however often it runs, the history holds exactly
one summary, and the system prompt and the first user request once each.
"""

from __future__ import annotations

__all__ = [
    "FALLBACKS",
    "SUMMARY_KIND",
    "Fallback",
    "SummarizingCompaction",
    "find_summary_parts",
    "summary_text",
]

import asyncio
import inspect
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal, TypeAlias

from harness.capabilities import Capability, CompactionEvent, RequestContext, Trigger
from harness.core import (
    CanonicalMessage,
    Model,
    Part,
    UserPromptPart,
    harness_mark,
    with_harness_mark,
)
from harness.history import is_safe_cutoff, safe_cutoff, safe_token_cutoff
from harness.tokens import MESSAGE_OVERHEAD
from harness_summarizing.digest import StructuralDigest
from harness_summarizing.planning import SUMMARY_KIND, Plan, assemble, is_summary_part, plan_compaction
from harness_summarizing.prompt import (
    DEFAULT_INSTRUCTIONS,
    DEFAULT_SUMMARY_PROMPT,
    render_template,
    render_transcript,
    validate_template,
)
from harness_summarizing.summarizer import ModelSummarizer, Summarizer, Summary, SummaryRequest

Fallback: TypeAlias = Literal["digest", "sliding"] | None
FALLBACKS: tuple[Fallback, ...] = ("digest", "sliding", None)
"""Accepted values of ``SummarizingCompaction(fallback=...)``."""

_HEADER = (
    "[Summary of the earlier conversation: {count} messages were compacted into this summary. "
    "Continue the task from where it left off.]\n\n"
)


def _header(count: int, recall: tuple[str, str] | None) -> str:
    """The summary's header; with a recall range it ends with `` [recall: <first>-<last>]``."""
    header = _HEADER.format(count=count)
    if recall is None:
        return header
    first, last = recall
    span = first if first == last else f"{first}-{last}"
    return header.rstrip("\n") + f" [recall: {span}]\n\n"


def _recall_range(
    ctx: RequestContext,
    messages: Sequence[CanonicalMessage],
    cut: int,
    previous_mark: Mapping[str, Any] | None,
) -> tuple[str, str] | None:
    """The recall references of the first and last summarized messages (``None``: no recall).

    The first is the previous summary's (it summarized everything before), else the first
    message before ``cut`` that has a reference; the last is the last one that has.
    """
    if ctx.references is None:
        return None
    last: str | None = None
    for message in reversed(messages[:cut]):
        last = ctx.reference_for(message)
        if last is not None:
            break
    if last is None:
        return None
    first = None if previous_mark is None else previous_mark.get("recall_first")
    if isinstance(first, str):
        return first, last
    for message in messages[:cut]:
        found = ctx.reference_for(message)
        if found is not None:
            return found, last
    return last, last


def find_summary_parts(messages: Sequence[CanonicalMessage]) -> list[tuple[int, int]]:
    """Locate every summary part (recognised by its harness mark, never by text).

    Returns:
        ``(message_index, part_index)`` pairs in history order.
    """
    found: list[tuple[int, int]] = []
    for index, message in enumerate(messages):
        if message.kind != "request":
            continue
        for part_index, part in enumerate(message.parts):
            if is_summary_part(part):
                found.append((index, part_index))
    return found


def summary_text(part: UserPromptPart) -> str:
    """The summary itself, without the header shown to the model."""
    mark = harness_mark(part) or {}
    offset = mark.get("text_offset")
    text = part.text
    if isinstance(offset, int) and 0 <= offset <= len(text):
        return text[offset:]
    return text


def _int_mark(mark: Mapping[str, Any] | None, key: str) -> int:
    value = None if mark is None else mark.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _positive_or_none(name: str, value: float | None) -> None:
    if value is not None and value <= 0:
        raise ValueError(f"{name} must be positive or None.")


def _non_negative(name: str, value: int | None) -> None:
    if value is not None and value < 0:
        raise ValueError(f"{name} must be non-negative.")


class SummarizingCompaction(Capability):
    """Replace the older part of the history with ONE summary when a trigger fires.

    The newest ``keep_messages`` (or ``keep_tokens``) stay verbatim; the cut never splits
    a tool call from its answers, at any distance, and the request being sent is always
    kept. A failing summarizer never loses history: the fallback (by default the
    structural digest, which cannot fail) is used, or the history is left unchanged, and
    the event's ``details`` say what happened. No error text is ever written into a
    summary. ``asyncio.CancelledError`` propagates.

    A summary is *useless* (and treated like a failure) when, after stripping
    whitespace, it is empty, shorter than ``min_summary_chars``, or identical to the
    previous summary although new messages were summarized.

    Args:
        max_messages: Fire when the history holds more than this many messages.
        max_tokens: Fire when the history holds more than this many tokens.
        max_fraction: Fire above this fraction of the context window.
        context_window: Overrides the model's context window for ``max_fraction``.
        keep_messages: Newest messages kept verbatim (at least the request being sent).
        keep_tokens: Keep the newest messages fitting this many tokens instead.
        model: Harness model that writes the summary; default: the agent's model
            (``ctx.model``), or the structural digest when there is none.
        summary_prompt: Template with ``{messages}`` (required), ``{previous_summary}``
            and ``{message_count}``; rendered in one pass, never with ``str.format``.
        instructions: System instructions sent to a model summarizer.
        incremental: Pass the previous summary to the summarizer to update (else the
            previous summary is summarized as ordinary content).
        preserve_first_user_message: Keep the first user request verbatim.
        keep_user_messages: Keep every user prompt of the summarized range verbatim,
            beside the summary.
        tool_return_max_chars: Bound of each tool return / retry / tool-call argument
            shown to the summarizer (``None``: unbounded).
        summarizer: Custom summarizer (returning ``str`` or :class:`Summary`, sync or
            async), exclusive with ``model``; or ``"digest"`` to always use the offline
            structural digest, or ``"model"`` (the default behaviour) to ask ``model`` or
            the agent's model. The strings let a configuration file choose.
        timeout: Seconds the summarizer may take (``None``: no limit).
        fallback: ``"digest"`` (structural digest summary), ``"sliding"`` (drop the
            range, keep the previous summary as is) or ``None`` (leave the history
            unchanged) when the summarizer fails.
        min_summary_chars: Shorter summaries count as useless.
        digest: The structural digest used as default and fallback summarizer.
        summary_fraction: When compacting to a target (``compact(..., target_tokens=T)``,
            as ``TieredCompaction`` calls it), the summary gets ``summary_fraction x T``
            tokens (the digest renders within it) and the newest messages the rest.

    Raises:
        ValueError: A parameter is out of range; the message names it.
    """

    name = "summarizing"
    default_trigger: ClassVar[Mapping[str, int | float]] = {"max_fraction": 0.8}

    def __init__(
        self,
        *,
        max_messages: int | None = None,
        max_tokens: int | None = None,
        max_fraction: float | None = None,
        context_window: int | None = None,
        keep_messages: int = 20,
        keep_tokens: int | None = None,
        model: Model | None = None,
        summary_prompt: str = DEFAULT_SUMMARY_PROMPT,
        instructions: str = DEFAULT_INSTRUCTIONS,
        incremental: bool = True,
        preserve_first_user_message: bool = True,
        keep_user_messages: bool = False,
        tool_return_max_chars: int | None = 500,
        summarizer: Summarizer | Literal["digest", "model"] | None = None,
        timeout: float | None = 60.0,
        fallback: Fallback = "digest",
        min_summary_chars: int = 20,
        digest: StructuralDigest | None = None,
        summary_fraction: float = 0.4,
    ) -> None:
        self.trigger = Trigger.create(
            max_messages=max_messages,
            max_tokens=max_tokens,
            max_fraction=max_fraction,
            context_window=context_window,
            required=False,
        )
        _non_negative("keep_messages", keep_messages)
        _non_negative("keep_tokens", keep_tokens)
        _non_negative("min_summary_chars", min_summary_chars)
        if tool_return_max_chars is not None and tool_return_max_chars < 1:
            raise ValueError("tool_return_max_chars must be positive or None.")
        _positive_or_none("timeout", timeout)
        if model is not None and summarizer is not None and not isinstance(summarizer, str):
            raise ValueError("Set at most one of model or summarizer.")
        if model is not None and not isinstance(model, Model):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(
                f"model must be a harness Model (model_name, context_window, async request()), "
                f"got {type(model).__name__}."
            )
        if isinstance(summarizer, str):
            if summarizer not in ("digest", "model"):
                raise ValueError(f"summarizer must be 'digest', 'model' or a callable, got {summarizer!r}.")
            if summarizer == "digest" and model is not None:
                raise ValueError("Set at most one of model or summarizer.")
        elif summarizer is not None and not callable(summarizer):  # pyright: ignore[reportUnnecessaryComparison]
            raise ValueError(f"summarizer must be callable, got {type(summarizer).__name__}.")
        if fallback not in FALLBACKS:
            raise ValueError(f"fallback must be 'digest', 'sliding' or None, got {fallback!r}.")
        validate_template(summary_prompt, parameter="summary_prompt")
        if not isinstance(instructions, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError("instructions must be a string.")
        self.keep_messages = keep_messages
        self.keep_tokens = keep_tokens
        self.model = model
        self.summary_prompt = summary_prompt
        self.instructions = instructions
        self.incremental = incremental
        self.preserve_first_user_message = preserve_first_user_message
        self.keep_user_messages = keep_user_messages
        self.tool_return_max_chars = tool_return_max_chars
        self.digest = digest if digest is not None else StructuralDigest()
        resolved: Summarizer | None
        if summarizer == "digest":
            resolved = self.digest
        elif summarizer == "model":
            resolved = None
        else:
            resolved = summarizer
        self.summarizer: Summarizer | None = resolved
        self.timeout = timeout
        self.fallback: Fallback = fallback
        self.min_summary_chars = min_summary_chars
        if not 0 < summary_fraction < 1:
            raise ValueError(f"summary_fraction must be in (0, 1), got {summary_fraction!r}.")
        self.summary_fraction = summary_fraction

    def __repr__(self) -> str:
        return (
            f"SummarizingCompaction(trigger={self.trigger!r}, keep_messages={self.keep_messages}, "
            f"keep_tokens={self.keep_tokens}, fallback={self.fallback!r})"
        )

    # ------------------------------------------------------------------ trigger

    def should_compact(self, ctx: RequestContext) -> str | None:
        """Why the trigger fires (``None`` when idle or when no trigger is configured).

        Without ``max_messages``/``max_tokens``/``max_fraction`` the capability only acts
        when called directly (``TieredCompaction``, ``harness.run.compaction.compact(force=True)``).
        """
        if not self.trigger.configured:
            return None
        return self.trigger.exceeded(ctx, self.name)

    # ------------------------------------------------------------------ compaction

    def _cut(
        self,
        ctx: RequestContext,
        messages: list[CanonicalMessage],
        summaries: list[tuple[int, int]],
        keep_tokens: int | None = None,
    ) -> int:
        keep_tokens = self.keep_tokens if keep_tokens is None else keep_tokens
        if keep_tokens is None:
            return safe_cutoff(messages, max(self.keep_messages, 1))
        counter = ctx.token_counter
        summary_at = {id(messages[index]): part_index for index, part_index in summaries}

        def count(message: CanonicalMessage) -> int:
            # The summary request counts only the parts merged after the summary, so a
            # compacted history measures like its kept tail (compaction is idempotent).
            part_index = summary_at.get(id(message))
            if part_index is None:
                return counter.count_message(message)
            return sum(counter.count_part(p) for p in message.parts[part_index + 1 :])

        return safe_token_cutoff(messages, keep_tokens, count)

    def _plan(self, messages: Sequence[CanonicalMessage], cut: int, has_summary: bool) -> Plan:
        return plan_compaction(
            messages,
            cut,
            has_summary=has_summary,
            preserve_first_user_message=self.preserve_first_user_message,
            keep_user_messages=self.keep_user_messages,
        )

    def _fit_cut(
        self,
        ctx: RequestContext,
        messages: list[CanonicalMessage],
        summaries: list[tuple[int, int]],
        cut: int,
        target: int,
        summary_tokens: int,
    ) -> int:
        """The cut keeping the most newest messages while the result fits ``target`` tokens.

        The front (carried parts, pinned parts kept, a summary of ``summary_tokens``) is
        measured at ``cut`` and the tail gets what is left. ``0`` (do nothing) when the
        front alone is over the target: the summary would be written for nothing.
        """
        counter = ctx.token_counter
        plan = self._plan(messages, cut, bool(summaries))
        front = MESSAGE_OVERHEAD + summary_tokens + sum(counter.count_part(p) for p in plan.carried)
        front += sum(counter.count_message(m) for m in plan.kept)
        if front > target:
            return 0  # the carried parts alone nearly fill it: a summary would not fit beside them
        return self._cut(ctx, messages, summaries, keep_tokens=target - front)

    def _summary_budget(self, target: int) -> int:
        """Tokens a summary may take when compacting to ``target``."""
        return max(int(target * self.summary_fraction), 100)

    async def compact(
        self, ctx: RequestContext, *, reason: str = "forced", target_tokens: int | None = None
    ) -> None:
        """Summarize the older history now (unconditionally), keeping the newest messages.

        Does nothing when there is nothing new to summarize (for example on a history
        this capability just compacted).

        Args:
            ctx: The request context.
            reason: Why (reported in the event).
            target_tokens: Make the compacted history fit this many tokens: instead of
                ``keep_messages``/``keep_tokens``, keep as many of the newest messages as
                fit beside the carried parts and the summary (``TieredCompaction`` passes
                its target, so one compaction frees enough and the prefix stays stable
                until the history has grown back to the trigger).
        """
        messages = ctx.messages
        total = len(messages)
        if total < 2:
            return
        summaries = find_summary_parts(messages)
        budget: int | None = None
        cut = self._cut(ctx, messages, summaries)
        if target_tokens is not None:
            budget = self._summary_budget(target_tokens)
            cut = self._fit_cut(ctx, messages, summaries, cut, target_tokens, budget)
        if cut <= 0:
            return
        if summaries and summaries[-1][0] >= cut:
            newest = summaries[-1][0]
            if newest >= total - 1 or not is_safe_cutoff(messages, newest + 1):
                return
            cut = newest + 1  # a summary must never survive beside a new one
        plan = self._plan(messages, cut, bool(summaries))
        if plan.droppable == 0:
            return
        plan.max_tokens = budget
        await self._summarize_and_apply(ctx, plan, cut, reason)

    def _request(self, ctx: RequestContext, plan: Plan, *, render: bool = True) -> SummaryRequest:
        previous_text: str | None = None
        previous_digest: Mapping[str, Any] | None = None
        new_messages = plan.new_messages
        if plan.previous:
            texts = [summary_text(p) for p in plan.previous]
            if self.incremental:
                previous_text = "\n\n".join(texts)
                mark = harness_mark(plan.previous[-1])
                payload = None if mark is None else mark.get("digest")
                if len(plan.previous) == 1 and isinstance(payload, Mapping):
                    previous_digest = payload  # pyright: ignore[reportUnknownVariableType]
            else:
                earlier = CanonicalMessage.request(*(UserPromptPart(t) for t in texts))
                new_messages = [earlier, *new_messages]
        if not render:  # the structural digest reads the messages, not the prompt
            return SummaryRequest(
                messages=tuple(new_messages),
                transcript="",
                prompt="",
                instructions=self.instructions,
                previous_summary=previous_text,
                previous_digest=previous_digest,  # pyright: ignore[reportUnknownArgumentType]
                kept_verbatim=tuple(plan.carried),
                context=ctx,
                max_tokens=plan.max_tokens,
            )
        transcript = render_transcript(new_messages, tool_return_max_chars=self.tool_return_max_chars)
        prompt = render_template(
            self.summary_prompt,
            {
                "messages": transcript,
                "previous_summary": previous_text if previous_text is not None else "(none)",
                "message_count": str(len(new_messages)),
            },
        )
        return SummaryRequest(
            messages=tuple(new_messages),
            transcript=transcript,
            prompt=prompt,
            instructions=self.instructions,
            previous_summary=previous_text,
            previous_digest=previous_digest,  # pyright: ignore[reportUnknownArgumentType]
            kept_verbatim=tuple(plan.carried),
            context=ctx,
            max_tokens=plan.max_tokens,
        )

    def _resolve(self, ctx: RequestContext) -> tuple[Summarizer, str]:
        if self.summarizer is not None:
            if isinstance(self.summarizer, StructuralDigest):
                return self.summarizer, "digest"
            label = getattr(self.summarizer, "__qualname__", None) or type(self.summarizer).__name__
            return self.summarizer, f"custom:{label}"
        model = self.model if self.model is not None else ctx.model
        if model is not None:
            return ModelSummarizer(model), f"model:{model.model_name}"
        return self.digest, "digest"

    def _useless(self, text: str, previous: str | None) -> str | None:
        stripped = text.strip()
        if not stripped:
            return "summarizer returned an empty summary"
        if len(stripped) < self.min_summary_chars:
            return f"summary too short ({len(stripped)} < min_summary_chars {self.min_summary_chars})"
        if previous is not None and " ".join(stripped.split()) == " ".join(previous.split()):
            return "summary identical to the previous summary although new messages were summarized"
        return None

    async def _run_summarizer(
        self, ctx: RequestContext, summarizer: Summarizer, request: SummaryRequest
    ) -> tuple[Summary | None, str | None]:
        try:
            async with asyncio.timeout(self.timeout):
                result = summarizer(request)
                if inspect.isawaitable(result):
                    result = await result
        except TimeoutError:
            return None, f"summarizer timed out after {self.timeout}s"
        except Exception as exc:
            return None, f"summarizer raised {type(exc).__name__}: {exc}"
        summary = result if isinstance(result, Summary) else Summary(text=str(result))
        if summary.usage is not None:
            ctx.add_usage(summary.usage)
        problem = self._useless(summary.text, request.previous_summary)
        if problem is not None:
            return None, problem
        return summary, None

    async def _summarize_and_apply(self, ctx: RequestContext, plan: Plan, cut: int, reason: str) -> None:
        summarizer, label = self._resolve(ctx)
        request = self._request(ctx, plan, render=not isinstance(summarizer, StructuralDigest))
        summary, error = await self._run_summarizer(ctx, summarizer, request)
        usage = summary.usage if summary is not None else None
        fallback_used: str | None = None
        if summary is None:
            fallback_used = self.fallback
            if self.fallback == "digest" and summarizer is not self.digest:
                summary = self.digest.summarize(request)
                label = "digest"
            elif self.fallback == "sliding":
                pass
            else:
                fallback_used = None
                self._report_unchanged(ctx, reason, label, error, request)
                return
        messages = ctx.messages
        if summary is None and not plan.carried and not plan.previous and messages[cut].kind == "response":
            # a bare sliding cut here would start the history with a response: keep it as is
            self._report_unchanged(ctx, reason, label, error, request)
            return
        previous_mark = harness_mark(plan.previous[-1]) if plan.previous else None
        summarized_now = len(plan.new_messages)
        details: dict[str, Any] = {
            "summarizer": label,
            "summarized_messages": summarized_now,
            "kept_messages": len(messages) - cut,
            "cut": cut,
            "incremental": bool(plan.previous) and self.incremental,
            "fallback_used": fallback_used,
            "error": error,
        }
        parts: list[Part] = list(plan.carried)
        if summary is not None:
            total_summarized = _int_mark(previous_mark, "summarized_messages") + summarized_now
            recall = _recall_range(ctx, messages, cut, previous_mark)
            header = _header(total_summarized, recall)
            mark: dict[str, Any] = {
                "kind": SUMMARY_KIND,
                "strategy": self.name,
                "summarized_messages": total_summarized,
                "compactions": _int_mark(previous_mark, "compactions") + 1,
                "summarizer": label,
                "text_offset": len(header),
            }
            if summary.digest is not None:
                mark["digest"] = summary.digest
            if recall is not None:
                mark["recall_first"] = recall[0]
            parts.append(with_harness_mark(UserPromptPart(header + summary.text.strip()), **mark))
            details["summary_chars"] = len(summary.text.strip())
            if usage is not None:
                details["summarizer_usage"] = {
                    "request_tokens": usage.request_tokens,
                    "response_tokens": usage.response_tokens,
                }
            details["total_summarized_messages"] = total_summarized
        elif plan.previous:
            parts.append(plan.previous[-1])  # sliding fallback: the old summary stays as it is
        if plan.kept:
            details["pinned_messages_kept"] = len(plan.kept)
        new_history = assemble(parts, plan.kept, messages[cut:])
        ctx.replace_messages(
            new_history,
            strategy=self.name,
            reason=reason,
            removed_tool_call_ids=plan.removed_calls,
            details=details,
        )

    def _report_unchanged(
        self, ctx: RequestContext, reason: str, label: str, error: str | None, request: SummaryRequest
    ) -> None:
        tokens = ctx.count_tokens()
        ctx.report(
            CompactionEvent(
                strategy=self.name,
                reason=reason,
                messages_before=len(ctx.messages),
                messages_after=len(ctx.messages),
                tokens_before=tokens,
                tokens_after=tokens,
                details={
                    "summarizer": label,
                    "summarized_messages": 0,
                    "attempted_messages": len(request.messages),
                    "fallback_used": None,
                    "error": error,
                    "applied": False,
                },
            )
        )
