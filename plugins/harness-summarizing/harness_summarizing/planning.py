"""Planning a summarizing compaction: what is carried, summarized or kept, and the result's layout."""

from __future__ import annotations

__all__ = ["SUMMARY_KIND", "Plan", "assemble", "is_summary_part", "plan_compaction"]

from collections.abc import Sequence

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
)

SUMMARY_KIND = "summary"
"""The ``kind`` in a summary part's harness mark."""


def is_summary_part(part: Part) -> bool:
    """True for a summary part (recognised by its harness mark, never by text)."""
    if not isinstance(part, UserPromptPart) or part.metadata is None:
        return False
    mark = harness_mark(part)
    return mark is not None and mark.get("kind") == SUMMARY_KIND


def _is_user_prompt(part: Part) -> bool:
    """A user prompt written by the user (marks of other capabilities allowed, e.g. preserved)."""
    if not isinstance(part, UserPromptPart):
        return False
    mark = harness_mark(part)
    return mark is None or (mark.get("kind") != SUMMARY_KIND and not mark.get("request_scoped"))


def _any_marked(parts: Sequence[Part]) -> bool:
    return any(getattr(p, "metadata", None) is not None for p in parts)


def _stays(part: Part, pinned_ids: frozenset[str]) -> bool:
    """True for a part kept verbatim after the summary.

    That is a pinned pair's part, or a pinned part that is not a prompt (pinned prompts
    are carried in the summary's request).
    """
    if isinstance(part, ToolCallPart | ToolReturnPart | RetryPromptPart) and part.tool_call_id in pinned_ids:
        return True
    if getattr(part, "metadata", None) is None or isinstance(part, SystemPromptPart | UserPromptPart):
        return False
    return is_pinned(part)


def assemble(
    front: Sequence[Part], kept: Sequence[CanonicalMessage], tail: Sequence[CanonicalMessage]
) -> list[CanonicalMessage]:
    """``[request(front), *kept, *tail]`` with adjacent messages of one kind merged.

    ``kept`` are the pinned parts of the summarized range, in order; merging keeps every
    part and makes requests and responses alternate again.
    """
    out: list[CanonicalMessage] = [CanonicalMessage.request(*front)] if front else []
    for message in kept:
        if out and out[-1].kind == message.kind:
            out[-1] = out[-1].replace(parts=(*out[-1].parts, *message.parts))
        else:
            out.append(message)
    if out and out[-1].kind == tail[0].kind:
        return [*out[:-1], tail[0].replace(parts=(*out[-1].parts, *tail[0].parts)), *tail[1:]]
    return [*out, *tail]


class Plan:
    """What one compaction will do (built before the summarizer runs)."""

    def __init__(self) -> None:
        self.carried: list[Part] = []
        self.new_messages: list[CanonicalMessage] = []
        self.previous: list[UserPromptPart] = []
        self.droppable = 0
        self.removed_calls: list[str] = []
        self.kept: list[CanonicalMessage] = []  # pinned parts that stay verbatim after the summary
        self.max_tokens: int | None = None  # the summary's token bound, when compacting to a target


def plan_compaction(
    messages: Sequence[CanonicalMessage],
    cut: int,
    *,
    has_summary: bool,
    preserve_first_user_message: bool,
    keep_user_messages: bool,
) -> Plan:
    """Sort the parts of ``messages[:cut]``: carried verbatim, summarized, kept pinned.

    Args:
        messages: The history.
        cut: The summarized range is ``messages[:cut]`` (a safe cut).
        has_summary: The history already holds a summary (its first request was carried).
        preserve_first_user_message: Carry the first user request verbatim.
        keep_user_messages: Carry every user prompt verbatim.
    """
    plan = Plan()
    systems: set[str] = set()
    first_user_done = has_summary or not preserve_first_user_message
    removed = plan.removed_calls
    pinned_ids = pinned_call_ids(messages[:cut])
    for message in messages[:cut]:
        parts = message.parts
        if message.kind == "response":
            kept = [p for p in parts if _stays(p, pinned_ids)] if pinned_ids or _any_marked(parts) else []
            if kept:
                plan.kept.append(message if len(kept) == len(parts) else message.replace(parts=tuple(kept)))
                if len(kept) == len(parts):
                    continue
                message = message.replace(parts=tuple(p for p in parts if not _stays(p, pinned_ids)))
                parts = message.parts
            plan.new_messages.append(message)
            plan.droppable += len(parts)
            for part in parts:
                if isinstance(part, ToolCallPart):
                    removed.append(part.tool_call_id)
            continue
        if (
            first_user_done
            and not keep_user_messages
            and all(
                not isinstance(p, SystemPromptPart) and getattr(p, "metadata", None) is None for p in parts
            )
            and not (pinned_ids and any(_stays(p, pinned_ids) for p in parts))
        ):
            plan.new_messages.append(message)  # fast path: unmarked, nothing to carry
            plan.droppable += len(parts)
            continue
        summary_indices = [j for j, p in enumerate(message.parts) if is_summary_part(p)]
        last_summary = summary_indices[-1] if summary_indices else -1
        is_first_user = not first_user_done and any(_is_user_prompt(p) for p in message.parts)
        first_user_done = first_user_done or is_first_user
        new_parts: list[Part] = []
        kept_parts: list[Part] = []
        for part_index, part in enumerate(message.parts):
            if is_summary_part(part):
                plan.previous.append(part)  # pyright: ignore[reportArgumentType]
                continue
            if isinstance(part, SystemPromptPart):
                if part.content not in systems or is_pinned(part):
                    systems.add(part.content)
                    plan.carried.append(part)
                continue
            if isinstance(part, UserPromptPart) and part_index < last_summary:
                plan.carried.append(part)  # kept verbatim by an earlier compaction
                continue
            if isinstance(part, UserPromptPart) and (is_first_user or keep_user_messages or is_pinned(part)):
                plan.carried.append(part)
                new_parts.append(part)  # the summarizer still sees it
                continue
            if _stays(part, pinned_ids):
                kept_parts.append(part)  # a pinned pair's answer (or another pinned part)
                continue
            new_parts.append(part)
            plan.droppable += 1
        if kept_parts:
            plan.kept.append(message.replace(parts=tuple(kept_parts)))
        if len(new_parts) == len(message.parts):
            plan.new_messages.append(message)
        elif new_parts:
            plan.new_messages.append(message.replace(parts=tuple(new_parts)))
    return plan
