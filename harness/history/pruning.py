"""Replacing old, large tool results with a placeholder: :func:`prune_old_tool_outputs`."""

from __future__ import annotations

__all__ = [
    "PartCounter",
    "prune_old_tool_outputs",
]

from collections.abc import Mapping, Sequence
from typing import Protocol

import attrs

from harness.core.messages import CanonicalMessage, Part, ToolReturnPart, harness_mark, with_harness_mark
from harness.history.changes import Change, HistoryEdit
from harness.history.queries import has_user_turns


class PartCounter(Protocol):
    """Anything that counts the tokens of a part (e.g. :class:`harness.tokens.TokenCounter`)."""

    def count_part(self, part: Part) -> int:
        """Return the token count of ``part``."""
        ...


def _clearable(part: ToolReturnPart, placeholder: str) -> bool:
    if part.content is None or part.content == "" or part.content == placeholder:
        return False
    if part.metadata is not None and not isinstance(part.metadata, Mapping):
        return False  # cannot carry a harness mark
    mark = harness_mark(part)
    return not (mark and mark.get("cleared"))


def prune_old_tool_outputs(
    messages: Sequence[CanonicalMessage],
    *,
    counter: PartCounter,
    protect_tokens: int = 40_000,
    minimum_savings: int = 20_000,
    min_user_turns: int = 2,
    placeholder: str = "[Old tool result content cleared]",
) -> HistoryEdit:
    """Replace the content of old, large tool results with a placeholder (tunacode's rule).

    1. Nothing happens with fewer than ``min_user_turns`` user turns.
    2. Tool returns with content are scanned newest to oldest (messages, then parts
       last to first), adding up ``counter.count_part(part)``; returns already cleared,
       empty ones and ones whose metadata is not a mapping are skipped.
    3. The first return that takes the running total above ``protect_tokens``, and every
       older one, are candidates — except the newest tool return of the history, which
       is never cleared (the model has not seen it yet when a tool loop continues).
    4. Nothing happens when the candidates total less than ``minimum_savings``.
    5. Each candidate's content becomes ``placeholder`` and its metadata gets the harness
       mark ``cleared="pruned"``. Tool names, ids, calls and retry prompts are untouched.

    Args:
        messages: The history.
        counter: Counts the tokens of each part, e.g. a :class:`harness.tokens.TokenCounter`.
        protect_tokens: Tokens of newest tool output always kept.
        minimum_savings: Smallest worthwhile saving.
        min_user_turns: User turns needed before anything is pruned.
        placeholder: Replacement content.

    Returns:
        The edit; one ``pruned_tool_output`` change per message touched, and
        :attr:`HistoryEdit.tokens_reclaimed` (old part tokens minus new part tokens).
    """
    if min_user_turns > 0 and not has_user_turns(messages, min_user_turns):
        return HistoryEdit(list(messages))
    candidates: dict[int, list[tuple[int, ToolReturnPart, int]]] = {}
    total = 0
    crossed = False
    savings = 0
    seen_return = False
    for index in range(len(messages) - 1, -1, -1):
        parts = messages[index].parts
        for part_index in range(len(parts) - 1, -1, -1):
            part = parts[part_index]
            if not isinstance(part, ToolReturnPart):
                continue
            newest = not seen_return
            seen_return = True
            if not _clearable(part, placeholder):
                continue
            tokens = counter.count_part(part)
            total += tokens
            if not crossed and total > protect_tokens:
                crossed = True
            if crossed and not newest:
                candidates.setdefault(index, []).append((part_index, part, tokens))
                savings += tokens
    if not candidates or savings < minimum_savings:
        return HistoryEdit(list(messages))

    result = list(messages)
    changes: list[Change] = []
    reclaimed = 0
    for index in sorted(candidates):
        parts = list(messages[index].parts)
        ids: list[str] = []
        freed = 0
        for part_index, part, tokens in reversed(candidates[index]):
            cleared = with_harness_mark(attrs.evolve(part, content=placeholder), cleared="pruned")
            parts[part_index] = cleared
            ids.append(part.tool_call_id)
            freed += tokens - counter.count_part(cleared)
        result[index] = messages[index].replace(parts=tuple(parts))
        reclaimed += freed
        changes.append(
            Change(
                "pruned_tool_output", index, tuple(ids), f"cleared {len(ids)} tool result(s), {freed} tokens"
            )
        )
    return HistoryEdit(result, tuple(changes), tokens_reclaimed=reclaimed)
