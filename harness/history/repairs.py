"""Lossless repairs of tool call problems and empty responses; each returns a :class:`HistoryEdit`."""

from __future__ import annotations

__all__ = [
    "answer_dangling_calls",
    "remove_empty_responses",
    "remove_orphan_returns",
    "rename_duplicate_call_ids",
]

from collections.abc import Callable, Mapping, Sequence
from typing import Literal

import attrs

from harness.core.messages import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    with_harness_mark,
)
from harness.history.changes import Change, HistoryEdit
from harness.history.pairs import answer_id, carried_id
from harness.history.queries import is_empty_response


def _drop_or_rebuild(message: CanonicalMessage, parts: list[Part]) -> CanonicalMessage | None:
    return message.replace(parts=tuple(parts)) if parts else None


def rename_duplicate_call_ids(messages: Sequence[CanonicalMessage]) -> HistoryEdit:
    """Give every reused tool call id a fresh one (``<id>~<n>``), answers included.

    The first call keeps its id. Each answer carrying a reused id is matched to a call
    before it: a return goes to the earliest such call without a return yet; a retry
    prompt to the earliest call with no answer yet, else the earliest without a return;
    failing both, to the latest call. Answers before every call keep their id (they are
    ``return_before_call`` problems, fixed by :func:`remove_orphan_returns`).

    Returns:
        The edit; one ``renamed_duplicate_call_id`` change per renamed call, with
        ``tool_call_ids == (old, new)``.
    """
    counts: dict[str, int] = {}
    taken: set[str] = set()
    for message in messages:
        for part in message.parts:
            carried = carried_id(part)
            if carried is not None:
                taken.add(carried)
            if isinstance(part, ToolCallPart):
                counts[part.tool_call_id] = counts.get(part.tool_call_id, 0) + 1
    duplicated = {call_id for call_id, count in counts.items() if count > 1}
    if not duplicated:
        return HistoryEdit(list(messages))

    occurrences: dict[str, list[_Occurrence]] = {}  # per reused id, every call seen so far
    result: list[CanonicalMessage] = []
    changes: list[Change] = []
    for index, message in enumerate(messages):
        new_parts: list[Part] = []
        touched = False
        for part in message.parts:
            if isinstance(part, ToolCallPart) and part.tool_call_id in duplicated:
                seen = occurrences.setdefault(part.tool_call_id, [])
                new_id = part.tool_call_id
                if seen:
                    suffix = len(seen)
                    new_id = f"{part.tool_call_id}~{suffix}"
                    while new_id in taken:
                        suffix += 1
                        new_id = f"{part.tool_call_id}~{suffix}"
                    taken.add(new_id)
                    changes.append(
                        Change(
                            "renamed_duplicate_call_id",
                            index,
                            (part.tool_call_id, new_id),
                            f"tool call id {part.tool_call_id!r} reused; renamed to {new_id!r}",
                        )
                    )
                    part = attrs.evolve(part, tool_call_id=new_id)
                    touched = True
                seen.append(_Occurrence(new_id))
            else:
                answer = answer_id(part)
                if answer and answer in occurrences:
                    target = _match_occurrence(occurrences[answer], isinstance(part, ToolReturnPart))
                    target.answered = True
                    if isinstance(part, ToolReturnPart):
                        target.returned = True
                    if target.call_id != answer:
                        part = attrs.evolve(part, tool_call_id=target.call_id)
                        touched = True
            new_parts.append(part)
        result.append(message.replace(parts=tuple(new_parts)) if touched else message)
    return HistoryEdit(result, tuple(changes))


@attrs.define
class _Occurrence:
    call_id: str
    answered: bool = False
    returned: bool = False


def _match_occurrence(seen: list[_Occurrence], is_return: bool) -> _Occurrence:
    if not is_return:
        for occurrence in seen:
            if not occurrence.answered:
                return occurrence
    for occurrence in seen:
        if not occurrence.returned:
            return occurrence
    return seen[-1]


def _dangling_calls(messages: Sequence[CanonicalMessage]) -> dict[int, list[tuple[int, ToolCallPart]]]:
    """Dangling calls ``(part index, call)`` grouped by the index of the response holding them."""
    last_answer: dict[str, int] = {}
    for index, message in enumerate(messages):
        if message.is_request:
            for part in message.parts:
                answer = answer_id(part)
                if answer:
                    last_answer[answer] = index
    dangling: dict[int, list[tuple[int, ToolCallPart]]] = {}
    for index, message in enumerate(messages):
        if message.is_response:
            for part_index, part in enumerate(message.parts):
                if isinstance(part, ToolCallPart) and last_answer.get(part.tool_call_id, -1) <= index:
                    dangling.setdefault(index, []).append((part_index, part))
    return dangling


def _answer_insert_index(parts: Sequence[Part]) -> int:
    """Where synthetic returns go: after the leading answers, before the first user prompt."""
    first_user = next((i for i, p in enumerate(parts) if isinstance(p, UserPromptPart)), len(parts))
    last_answer = -1
    for i in range(first_user):
        if isinstance(parts[i], (ToolReturnPart, RetryPromptPart)):
            last_answer = i
    return last_answer + 1 if last_answer >= 0 else first_user


def answer_dangling_calls(
    messages: Sequence[CanonicalMessage],
    *,
    mode: Literal["answer", "remove"] = "answer",
    content: str = "Tool execution aborted",
) -> HistoryEdit:
    """Resolve tool calls that have no answer after them.

    ``mode="answer"`` (default, loses nothing) adds a synthetic
    :class:`~harness.core.messages.ToolReturnPart` per dangling call (``tool_name`` from the
    call, ``content`` as given, marked ``{"synthetic": True, "reason": "dangling"}``). The
    returns go into the request right after the response holding the calls, after that
    request's leading tool returns/retry prompts and before its user prompts; when the next
    message is a response or there is none, a new request (marked the same way) is
    inserted right after the response.

    ``mode="remove"`` is the contract's behaviour: delete each dangling call part and
    every other part carrying its id (unless another, answered call uses the same id, in
    which case only the dangling call goes); messages left empty are dropped.

    Args:
        messages: The history.
        mode: ``"answer"`` or ``"remove"``.
        content: Content of the synthetic returns.

    Returns:
        The edit: ``answered_dangling_call`` changes (one per response) or
        ``removed_dangling_call`` changes (one per message touched).

    Raises:
        ValueError: ``mode`` is neither ``"answer"`` nor ``"remove"``.
    """
    if mode not in ("answer", "remove"):
        raise ValueError(f"answer_dangling_calls: mode must be 'answer' or 'remove', got {mode!r}")
    dangling = _dangling_calls(messages)
    if not dangling:
        return HistoryEdit(list(messages))
    if mode == "remove":
        return _remove_dangling(messages, dangling)

    result: list[CanonicalMessage] = []
    changes: list[Change] = []
    pending: list[Part] | None = None  # synthetic returns for the request at this index
    for index, message in enumerate(messages):
        if pending is not None:
            parts = list(message.parts)
            at = _answer_insert_index(parts)
            parts[at:at] = pending
            result.append(message.replace(parts=tuple(parts)))
            pending = None
        else:
            result.append(message)
        found = dangling.get(index)
        if found is None:
            continue
        calls = [call for _, call in found]
        synthetic: list[Part] = [
            with_harness_mark(
                ToolReturnPart(tool_call_id=call.tool_call_id, tool_name=call.tool_name, content=content),
                synthetic=True,
                reason="dangling",
            )
            for call in calls
        ]
        ids = tuple(call.tool_call_id for call in calls)
        if index + 1 < len(messages) and messages[index + 1].is_request:
            pending = synthetic
            where = f"into request {index + 1}"
        else:
            request = CanonicalMessage.request(*synthetic)
            result.append(with_harness_mark(request, synthetic=True, reason="dangling"))
            where = "in a new request"
        changes.append(
            Change(
                "answered_dangling_call",
                index,
                ids,
                f"added {len(ids)} synthetic tool return(s) {where}",
            )
        )
    return HistoryEdit(result, tuple(changes))


def _remove_dangling(
    messages: Sequence[CanonicalMessage], dangling: Mapping[int, list[tuple[int, ToolCallPart]]]
) -> HistoryEdit:
    positions = {(index, part_index) for index, found in dangling.items() for part_index, _ in found}
    dangling_ids = {call.tool_call_id for found in dangling.values() for _, call in found}
    answered_ids = {
        part.tool_call_id
        for index, message in enumerate(messages)
        for part_index, part in enumerate(message.parts)
        if isinstance(part, ToolCallPart) and (index, part_index) not in positions
    }
    wipe = dangling_ids - answered_ids  # ids whose every part may go

    def doomed(index: int, part_index: int, part: Part) -> str | None:
        carried = carried_id(part)
        if (index, part_index) in positions or (carried is not None and carried in wipe):
            return carried or ""
        return None

    return _remove_parts(messages, doomed, "removed_dangling_call", "part(s) of dangling tool calls")


def _remove_parts(
    messages: Sequence[CanonicalMessage],
    doomed: Callable[[int, int, Part], str | None],
    kind: str,
    what: str,
) -> HistoryEdit:
    """Drop every part ``doomed`` names (it returns the part's tool call id, else ``None``).

    Messages left empty are dropped; untouched messages keep their identity; one change
    of ``kind`` is recorded per message touched.
    """
    result: list[CanonicalMessage] = []
    changes: list[Change] = []
    for index, message in enumerate(messages):
        kept: list[Part] = []
        removed: list[str] = []
        for part_index, part in enumerate(message.parts):
            carried = doomed(index, part_index, part)
            if carried is None:
                kept.append(part)
            else:
                removed.append(carried)
        if not removed:
            result.append(message)
            continue
        rebuilt = _drop_or_rebuild(message, kept)
        if rebuilt is not None:
            result.append(rebuilt)
        changes.append(
            Change(
                kind,
                index,
                tuple(dict.fromkeys(removed)),
                f"removed {len(removed)} {what}"
                + ("" if rebuilt is not None else "; message dropped (left empty)"),
            )
        )
    return HistoryEdit(result, tuple(changes))


def remove_orphan_returns(messages: Sequence[CanonicalMessage]) -> HistoryEdit:
    """Remove answers that no earlier tool call explains; drop messages left empty.

    Removes tool returns and tool-naming retry prompts whose id matches no call
    (``orphan_return``) or only a later call (``return_before_call``). General retry
    prompts (no tool name) are kept.

    Returns:
        The edit; one ``removed_orphan_return`` change per message touched.
    """
    first_call: dict[str, int] = {}
    for index, message in enumerate(messages):
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                first_call.setdefault(part.tool_call_id, index)

    def doomed(index: int, _part_index: int, part: Part) -> str | None:
        answer = answer_id(part)
        if answer is not None and first_call.get(answer, index + 1) > index:
            return answer
        return None

    return _remove_parts(messages, doomed, "removed_orphan_return", "answer(s) with no earlier tool call")


def remove_empty_responses(messages: Sequence[CanonicalMessage]) -> HistoryEdit:
    """Drop every response :func:`is_empty_response` reports.

    Returns:
        The edit; one ``removed_empty_response`` change per dropped response.
    """
    result: list[CanonicalMessage] = []
    changes: list[Change] = []
    for index, message in enumerate(messages):
        if is_empty_response(message):
            changes.append(
                Change(
                    "removed_empty_response",
                    index,
                    (),
                    f"dropped empty response ({len(message.parts)} parts)",
                )
            )
        else:
            result.append(message)
    return HistoryEdit(result, tuple(changes))
