"""Pure rules about histories: invariants, lossless repairs and safe cut points.

Nothing here mutates its input. Repairs return a :class:`HistoryEdit` holding a new list
in which every message that was not changed is the *same object* as in the input (token
caches key on identity), plus a :class:`Change` for everything that was done.

Vocabulary:

* An **answer** to a tool call is a :class:`~harness.messages.ToolReturnPart` or a
  :class:`~harness.messages.RetryPromptPart` that names a tool (``tool_name`` is set)
  carrying the call's ``tool_call_id``. A retry prompt without a tool name is a general
  retry and answers nothing. A retry prompt that names a tool but has no id answers no
  call and is reported as an orphan (id ``""``).
* A history is **sendable** when :func:`check_invariants` returns ``[]``. The empty
  history is sendable, and so is a history ending with a request nobody answered yet
  (that is the request being sent).

At a glance:

* Checking: :func:`check_invariants` -> list of :class:`Violation`.
* Repairs (each returns a :class:`HistoryEdit` and loses nothing unless stated):
  :func:`rename_duplicate_call_ids`, :func:`answer_dangling_calls` (``mode="remove"``
  deletes), :func:`remove_orphan_returns` (deletes answers nothing explains),
  :func:`remove_empty_responses`, :func:`merge_consecutive_requests`,
  :func:`merge_consecutive_responses`, :func:`merge_trailing_request`,
  :func:`sanitize_for_resume` (strips system prompts), :func:`prune_old_tool_outputs`
  (replaces old tool output with a placeholder), and :func:`run_cleanup_loop`, which
  runs the first six until the history is sendable.
* Cut points (keep ``messages[c:]``): :func:`tool_pairs`, :func:`is_safe_cutoff`,
  :func:`safe_cutoff`, :func:`safe_token_cutoff`.
* Small helpers: :func:`is_empty_response`, :func:`is_system_only_request`,
  :func:`leading_system_request`, :func:`first_user_request_index`,
  :func:`user_prompt_count`.

Every function is O(number of parts) except where noted.
"""

from __future__ import annotations

__all__ = [
    "CHANGE_KINDS",
    "VIOLATION_KINDS",
    "Change",
    "HistoryEdit",
    "PartCounter",
    "ToolPair",
    "Violation",
    "ViolationKind",
    "answer_dangling_calls",
    "changed_span",
    "check_invariants",
    "first_user_request_index",
    "is_empty_response",
    "is_safe_cutoff",
    "is_system_only_request",
    "leading_system_request",
    "merge_consecutive_requests",
    "merge_consecutive_responses",
    "merge_trailing_request",
    "prune_old_tool_outputs",
    "remove_empty_responses",
    "remove_orphan_returns",
    "rename_duplicate_call_ids",
    "run_cleanup_loop",
    "safe_cutoff",
    "safe_token_cutoff",
    "sanitize_for_resume",
    "tool_pairs",
    "user_prompt_count",
]

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol, TypeAlias

import attrs

from harness._sequences import common_prefix, common_suffix
from harness.errors import MessageError
from harness.messages import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    harness_mark,
    with_harness_mark,
)

ViolationKind: TypeAlias = Literal[
    "dangling_call",
    "orphan_return",
    "duplicate_call_id",
    "return_before_call",
    "consecutive_requests",
    "consecutive_responses",
    "empty_response",
    "persisted_system_prompt",
]

VIOLATION_KINDS: frozenset[str] = frozenset(
    {
        "dangling_call",
        "orphan_return",
        "duplicate_call_id",
        "return_before_call",
        "consecutive_requests",
        "consecutive_responses",
        "empty_response",
        "persisted_system_prompt",
    }
)
"""Every :attr:`Violation.kind`."""

CHANGE_KINDS: frozenset[str] = frozenset(
    {
        "renamed_duplicate_call_id",
        "answered_dangling_call",
        "removed_dangling_call",
        "removed_orphan_return",
        "removed_empty_response",
        "merged_requests",
        "merged_responses",
        "merged_trailing_request",
        "appended_request",
        "stripped_system_prompt",
        "cleared_run_id",
        "pruned_tool_output",
    }
)
"""Every :attr:`Change.kind` a function of this module reports."""


@attrs.frozen
class Violation:
    """One way a history breaks what providers accept.

    Attributes:
        kind: One of :data:`VIOLATION_KINDS`:

            * ``dangling_call``: a tool call with no answer anywhere after it.
            * ``orphan_return``: an answer whose id matches no tool call at all.
            * ``duplicate_call_id``: a tool call reusing the id of an earlier call
              (reported at the later call).
            * ``return_before_call``: an answer whose id is only called later.
            * ``consecutive_requests`` / ``consecutive_responses``: a message of the
              same kind as the one before it (reported at the later one).
            * ``empty_response``: see :func:`is_empty_response`.
            * ``persisted_system_prompt``: a system prompt part in a history that is
              about to be stored (only checked with ``persisted=True``).
        message_index: Index of the offending message.
        part_index: Index of the offending part in it, or ``None`` for message-level kinds.
        tool_call_id: The tool call id concerned, if any.
        detail: Human-readable description.
    """

    kind: ViolationKind
    message_index: int
    part_index: int | None
    tool_call_id: str | None
    detail: str


@attrs.frozen
class Change:
    """One thing a repair did.

    Attributes:
        kind: One of :data:`CHANGE_KINDS`.
        message_index: Index, in the list the repair *received*, of the message the change
            is about (for merges: the first merged message; for answered dangling calls:
            the response holding the calls). Inside :func:`run_cleanup_loop` each step's
            indices refer to the list that step received.
        tool_call_ids: Tool call ids concerned (for a rename: ``(old, new)``).
        detail: Human-readable description.
    """

    kind: str
    message_index: int
    tool_call_ids: tuple[str, ...] = ()
    detail: str = ""


_REMOVING_KINDS = frozenset({"removed_dangling_call", "removed_orphan_return"})


@attrs.frozen
class HistoryEdit:
    """The result of a repair: the new history and what was done.

    Attributes:
        messages: The new history (a new list; unchanged messages are the input objects).
        changes: Everything that was done, in order; empty when nothing changed.
        tokens_reclaimed: Tokens freed by :func:`prune_old_tool_outputs` (0 elsewhere).
    """

    messages: list[CanonicalMessage]
    changes: tuple[Change, ...] = ()
    tokens_reclaimed: int = 0

    @property
    def changed(self) -> bool:
        """True when the history differs from the input."""
        return bool(self.changes)

    @property
    def removed_tool_call_ids(self) -> tuple[str, ...]:
        """Ids of tool calls or answers that were removed (dangling calls, orphans), in order."""
        return _unique_ids(c for c in self.changes if c.kind in _REMOVING_KINDS)

    @property
    def cleared_tool_call_ids(self) -> tuple[str, ...]:
        """Ids of tool returns whose content was replaced by a placeholder, in order."""
        return _unique_ids(c for c in self.changes if c.kind == "pruned_tool_output")


def _unique_ids(changes: Iterable[Change]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for change in changes:
        for call_id in change.tool_call_ids:
            seen.setdefault(call_id, None)
    return tuple(seen)


@attrs.frozen
class ToolPair:
    """Where a tool call and its answers sit in a history.

    Attributes:
        call_index: Index of the message holding the (first) call with this id.
        answer_indices: Sorted indices of the messages holding answers with this id
            (returns and retry prompts naming a tool), without repeats.
    """

    call_index: int
    answer_indices: tuple[int, ...]


class PartCounter(Protocol):
    """Anything that counts the tokens of a part (e.g. :class:`harness.tokens.TokenCounter`)."""

    def count_part(self, part: Part) -> int:
        """Return the token count of ``part``."""
        ...


# --------------------------------------------------------------------------- basics


def _answer_id(part: Part) -> str | None:
    """The id ``part`` answers, ``""`` for a tool-naming retry without id, else ``None``."""
    if isinstance(part, ToolReturnPart):
        return part.tool_call_id
    if isinstance(part, RetryPromptPart) and part.tool_name is not None:
        return part.tool_call_id or ""
    return None


def _carried_id(part: Part) -> str | None:
    """The tool call id a call or an answer carries (``None`` for other parts and ``""``)."""
    if isinstance(part, ToolCallPart):
        return part.tool_call_id
    answer = _answer_id(part)
    return answer or None


def is_empty_response(message: CanonicalMessage) -> bool:
    """True for a response no provider accepts as an assistant turn.

    A response is empty when it has no parts, or when every part is a
    :class:`~harness.messages.TextPart` whose content is empty or whitespace only
    (Anthropic rejects blank text blocks). A response holding thinking, a tool call or
    an unknown part is not empty. Requests are never empty responses.
    """
    if message.kind != "response":
        return False
    return all(isinstance(p, TextPart) and not p.content.strip() for p in message.parts)


def is_system_only_request(message: CanonicalMessage) -> bool:
    """True for a request whose parts are all system prompts (at least one)."""
    return (
        message.kind == "request"
        and bool(message.parts)
        and all(isinstance(p, SystemPromptPart) for p in message.parts)
    )


def leading_system_request(messages: Sequence[CanonicalMessage]) -> bool:
    """True when ``messages[0]`` is a system-only request (instructions a cut must keep)."""
    return bool(messages) and is_system_only_request(messages[0])


def _has_user_prompt(message: CanonicalMessage) -> bool:
    return message.kind == "request" and any(isinstance(p, UserPromptPart) for p in message.parts)


def _has_user_turns(messages: Sequence[CanonicalMessage], wanted: int) -> bool:
    """True when at least ``wanted`` requests hold a user prompt (stops counting there)."""
    found = 0
    for message in messages:
        if _has_user_prompt(message):
            found += 1
            if found >= wanted:
                return True
    return False


def first_user_request_index(messages: Sequence[CanonicalMessage]) -> int | None:
    """Index of the first request holding a user prompt, or ``None``."""
    for index, message in enumerate(messages):
        if _has_user_prompt(message):
            return index
    return None


def user_prompt_count(messages: Sequence[CanonicalMessage]) -> int:
    """Number of user turns: requests holding at least one user prompt."""
    return sum(1 for message in messages if _has_user_prompt(message))


# --------------------------------------------------------------------------- invariants


def check_invariants(messages: Sequence[CanonicalMessage], *, persisted: bool = False) -> list[Violation]:
    """List every way ``messages`` breaks what providers accept; ``[]`` means sendable.

    One pass over the parts, then one over the tool calls and answers found.

    Args:
        messages: The history.
        persisted: Also report system prompt parts, which must never be stored.

    Returns:
        Violations ordered by message index, then part index (message-level kinds first).
    """
    violations: list[Violation] = []
    calls: list[tuple[int, int, ToolCallPart]] = []
    answers: list[tuple[int, int, str, Part]] = []
    first_call: dict[str, int] = {}
    last_answer: dict[str, int] = {}
    previous: str | None = None
    for index, message in enumerate(messages):
        kind = message.kind
        if kind == previous:
            violations.append(
                Violation(
                    "consecutive_requests" if kind == "request" else "consecutive_responses",
                    index,
                    None,
                    None,
                    f"message {index} follows another {kind}",
                )
            )
        previous = kind
        if kind == "response":
            empty = True
            for part_index, part in enumerate(message.parts):
                if isinstance(part, ToolCallPart):
                    calls.append((index, part_index, part))
                    first_call.setdefault(part.tool_call_id, index)
                    empty = False
                elif empty and not (isinstance(part, TextPart) and not part.content.strip()):
                    empty = False
            if empty:
                violations.append(
                    Violation("empty_response", index, None, None, f"response {index} has no content")
                )
            continue
        for part_index, part in enumerate(message.parts):
            if isinstance(part, ToolReturnPart):
                answer = part.tool_call_id
            elif isinstance(part, RetryPromptPart):
                if part.tool_name is None:
                    continue
                answer = part.tool_call_id or ""
            elif persisted and isinstance(part, SystemPromptPart):
                violations.append(
                    Violation(
                        "persisted_system_prompt",
                        index,
                        part_index,
                        None,
                        "system prompts must not be stored in a history",
                    )
                )
                continue
            else:
                continue
            answers.append((index, part_index, answer, part))
            last_answer[answer] = index

    seen_calls: set[str] = set()
    for index, part_index, part in calls:
        call_id = part.tool_call_id
        if call_id in seen_calls:
            violations.append(
                Violation(
                    "duplicate_call_id",
                    index,
                    part_index,
                    call_id,
                    f"tool call id {call_id!r} is used by an earlier call",
                )
            )
        seen_calls.add(call_id)
        if last_answer.get(call_id, -1) < index:
            violations.append(
                Violation(
                    "dangling_call",
                    index,
                    part_index,
                    call_id,
                    f"tool call {call_id!r} ({part.tool_name}) has no return or retry after it",
                )
            )
    for index, part_index, answer, part in answers:
        call_index = first_call.get(answer)
        if call_index is None:
            violations.append(
                Violation(
                    "orphan_return",
                    index,
                    part_index,
                    answer,
                    f"{part.part_kind} {answer!r} answers no tool call",
                )
            )
        elif call_index > index:
            violations.append(
                Violation(
                    "return_before_call",
                    index,
                    part_index,
                    answer,
                    f"{part.part_kind} {answer!r} comes before its call (message {call_index})",
                )
            )
    if violations:
        violations.sort(key=_violation_order)
    return violations


def _violation_order(violation: Violation) -> tuple[int, int]:
    part_index = violation.part_index
    return (violation.message_index, -1 if part_index is None else part_index)


# --------------------------------------------------------------------------- repairs


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
            carried = _carried_id(part)
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
                answer = _answer_id(part)
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
                answer = _answer_id(part)
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
    :class:`~harness.messages.ToolReturnPart` per dangling call (``tool_name`` from the
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
                ToolReturnPart(call.tool_call_id, call.tool_name, content), synthetic=True, reason="dangling"
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
        carried = _carried_id(part)
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
        answer = _answer_id(part)
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


def _merge_runs(messages: Sequence[CanonicalMessage], kind: str, change_kind: str) -> HistoryEdit:
    result: list[CanonicalMessage] = []
    changes: list[Change] = []
    index = 0
    total = len(messages)
    while index < total:
        message = messages[index]
        end = index + 1
        if message.kind == kind:
            while end < total and messages[end].kind == kind:
                end += 1
        if end - index == 1:
            result.append(message)
        else:
            parts = tuple(part for m in messages[index:end] for part in m.parts)
            result.append(message.replace(parts=parts))
            changes.append(
                Change(
                    change_kind, index, (), f"merged {end - index} consecutive {kind}s ({index}..{end - 1})"
                )
            )
        index = end
    return HistoryEdit(result, tuple(changes))


def merge_consecutive_requests(messages: Sequence[CanonicalMessage]) -> HistoryEdit:
    """Merge each run of adjacent requests into one request (parts in order).

    The merged request keeps the first request's fields (timestamp, run id, metadata...).
    Nothing is deleted, unlike the contract's "keep only the last" rule.

    Returns:
        The edit; one ``merged_requests`` change per run.
    """
    return _merge_runs(messages, "request", "merged_requests")


def merge_consecutive_responses(messages: Sequence[CanonicalMessage]) -> HistoryEdit:
    """Merge each run of adjacent responses into one response (parts in order).

    The merged response keeps the first response's fields (usage, model name...).

    Returns:
        The edit; one ``merged_responses`` change per run.
    """
    return _merge_runs(messages, "response", "merged_responses")


def merge_trailing_request(
    messages: Sequence[CanonicalMessage], new_request: CanonicalMessage
) -> HistoryEdit:
    """Add ``new_request`` to the history without ever dropping a trailing request.

    When the history ends with a request (for example an interrupted turn whose prompt
    was never answered), it and ``new_request`` become one request: the history's parts
    first, then the new ones. The merged request keeps the history request's fields,
    except ``timestamp``, ``instructions`` and ``run_id``, which come from
    ``new_request`` when it sets them. Otherwise ``new_request`` is appended.

    Returns:
        The edit, with a ``merged_trailing_request`` or ``appended_request`` change.

    Raises:
        MessageError: ``new_request`` is not a request.
    """
    if not new_request.is_request:
        raise MessageError(f"merge_trailing_request: new_request must be a request, got a {new_request.kind}")
    if messages and messages[-1].is_request:
        last = messages[-1]
        fields: dict[str, Any] = {
            name: getattr(new_request, name)
            for name in ("timestamp", "instructions", "run_id")
            if getattr(new_request, name) is not None
        }
        merged = last.replace(parts=last.parts + new_request.parts, **fields)
        change = Change(
            "merged_trailing_request",
            len(messages) - 1,
            (),
            f"merged the new request's {len(new_request.parts)} part(s) into the trailing request",
        )
        return HistoryEdit([*messages[:-1], merged], (change,))
    change = Change("appended_request", len(messages), (), "appended the new request")
    return HistoryEdit([*messages, new_request], (change,))


def sanitize_for_resume(messages: Sequence[CanonicalMessage]) -> HistoryEdit:
    """Make a history safe to store or resume: no system prompts, no run ids.

    Strips every :class:`~harness.messages.SystemPromptPart`, drops a message that had
    parts and has none left, and sets ``run_id`` to ``None``.

    Returns:
        The edit; ``stripped_system_prompt`` and ``cleared_run_id`` changes.
    """
    result: list[CanonicalMessage] = []
    changes: list[Change] = []
    for index, message in enumerate(messages):
        parts = [p for p in message.parts if not isinstance(p, SystemPromptPart)]
        stripped = len(parts) != len(message.parts)
        if stripped and not parts:
            changes.append(
                Change("stripped_system_prompt", index, (), "dropped a request holding only system prompts")
            )
            continue
        updates: dict[str, Any] = {}
        if stripped:
            updates["parts"] = tuple(parts)
            changes.append(
                Change(
                    "stripped_system_prompt",
                    index,
                    (),
                    f"removed {len(message.parts) - len(parts)} system prompt part(s)",
                )
            )
        if message.run_id is not None:
            updates["run_id"] = None
            changes.append(Change("cleared_run_id", index, (), f"cleared run_id {message.run_id!r}"))
        result.append(message.replace(**updates) if updates else message)
    return HistoryEdit(result, tuple(changes))


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
    counter: PartCounter | None = None,
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
        counter: Token counter; default :func:`harness.tokens.get_token_counter`.
        protect_tokens: Tokens of newest tool output always kept.
        minimum_savings: Smallest worthwhile saving.
        min_user_turns: User turns needed before anything is pruned.
        placeholder: Replacement content.

    Returns:
        The edit; one ``pruned_tool_output`` change per message touched, and
        :attr:`HistoryEdit.tokens_reclaimed` (old part tokens minus new part tokens).
    """
    if min_user_turns > 0 and not _has_user_turns(messages, min_user_turns):
        return HistoryEdit(list(messages))
    if counter is None:
        from harness.tokens import get_token_counter

        counter = get_token_counter()

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


def run_cleanup_loop(
    messages: Sequence[CanonicalMessage],
    *,
    max_passes: int = 10,
    dangling: Literal["answer", "remove"] = "answer",
) -> HistoryEdit:
    """Repair a history until it is sendable (or ``max_passes`` passes ran).

    Each pass runs :func:`rename_duplicate_call_ids`, :func:`answer_dangling_calls`
    (with ``mode=dangling``), :func:`remove_orphan_returns`, :func:`remove_empty_responses`,
    :func:`merge_consecutive_requests` and :func:`merge_consecutive_responses`, in that
    order. Each pass starts with :func:`check_invariants` and runs only the steps whose
    violation kinds it found; the loop stops as soon as the history is sendable. So a
    valid history costs one O(n) check and is returned as is, and a history with one
    dangling call costs two checks and one repair. Violations a step creates for a
    later step (e.g. a removed call leaving two requests adjacent) are fixed by the
    next pass. System prompts are left alone (see :func:`sanitize_for_resume`).

    Returns:
        The combined edit (all changes of all passes, in order).

    Raises:
        ValueError: ``max_passes`` is less than 1, or ``dangling`` is not a known mode.
    """
    if max_passes < 1:
        raise ValueError(f"run_cleanup_loop: max_passes must be >= 1, got {max_passes}")
    if dangling not in ("answer", "remove"):
        raise ValueError(f"run_cleanup_loop: dangling must be 'answer' or 'remove', got {dangling!r}")
    current = list(messages)
    changes: list[Change] = []
    steps: tuple[tuple[frozenset[str], Callable[[Sequence[CanonicalMessage]], HistoryEdit]], ...] = (
        (frozenset({"duplicate_call_id"}), rename_duplicate_call_ids),
        (frozenset({"dangling_call"}), lambda m: answer_dangling_calls(m, mode=dangling)),
        (frozenset({"orphan_return", "return_before_call"}), remove_orphan_returns),
        (frozenset({"empty_response"}), remove_empty_responses),
        (frozenset({"consecutive_requests"}), merge_consecutive_requests),
        (frozenset({"consecutive_responses"}), merge_consecutive_responses),
    )
    for _ in range(max_passes):
        found = {violation.kind for violation in check_invariants(current)}
        if not found:
            break  # sendable
        pass_changed = False
        for fixes, step in steps:
            if found.isdisjoint(fixes):
                continue  # nothing for this step when the pass started
            edit = step(current)
            if edit.changed:
                pass_changed = True
                changes.extend(edit.changes)
                current = edit.messages
        if not pass_changed:
            break  # defensive: violations no step can fix would otherwise spin
    return HistoryEdit(current, tuple(changes))


# --------------------------------------------------------------------------- cut points


def tool_pairs(messages: Sequence[CanonicalMessage]) -> dict[str, ToolPair]:
    """Map every tool call id to where its call and answers sit.

    Answers whose id matches no call are left out.
    """
    calls: dict[str, int] = {}
    answers: dict[str, list[int]] = {}
    for index, message in enumerate(messages):
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                calls.setdefault(part.tool_call_id, index)
            else:
                answer = _answer_id(part)
                if answer:
                    found = answers.setdefault(answer, [])
                    if not found or found[-1] != index:
                        found.append(index)
    return {call_id: ToolPair(index, tuple(answers.get(call_id, ()))) for call_id, index in calls.items()}


def _spans(messages: Sequence[CanonicalMessage]) -> dict[str, tuple[int, int]]:
    """For every id carried by a call or an answer: (first, last) message index carrying it."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for index, message in enumerate(messages):
        for part in message.parts:
            if isinstance(part, (ToolCallPart, ToolReturnPart)):
                carried = part.tool_call_id
            elif isinstance(part, RetryPromptPart) and part.tool_name is not None and part.tool_call_id:
                carried = part.tool_call_id
            else:
                continue
            first.setdefault(carried, index)
            last[carried] = index
    return {carried: (start, last[carried]) for carried, start in first.items()}


def _unsafe_cuts(messages: Sequence[CanonicalMessage]) -> list[bool]:
    """``unsafe[c]`` for every cut 0..len: true when some id sits on both sides of ``c``."""
    total = len(messages)
    delta = [0] * (total + 2)
    for first, last in _spans(messages).values():
        if first < last:  # cut c splits the span when first < c <= last
            delta[first + 1] += 1
            delta[last + 1] -= 1
    unsafe: list[bool] = []
    running = 0
    for cut in range(total + 1):
        running += delta[cut]
        unsafe.append(running > 0)
    return unsafe


def is_safe_cutoff(messages: Sequence[CanonicalMessage], cut: int) -> bool:
    """True when keeping ``messages[cut:]`` separates no tool call from any of its answers.

    Every message carrying a given tool call id (the call, returns, retry prompts naming
    it) must be on the same side of the cut, however far apart they are. ``0`` and
    ``len(messages)`` are always safe.

    Raises:
        ValueError: ``cut`` is outside ``0..len(messages)``.
    """
    if not 0 <= cut <= len(messages):
        raise ValueError(f"is_safe_cutoff: cut must be in 0..{len(messages)}, got {cut}")
    return all(not first < cut <= last for first, last in _spans(messages).values())


def safe_cutoff(messages: Sequence[CanonicalMessage], keep: int) -> int:
    """The cut ``c`` keeping ``messages[c:]``: the fewest messages, at least ``keep``, splitting no pair.

    Returns the largest safe ``c`` with ``len(messages) - c >= keep``. The last message
    (the request being sent) is always kept, so ``keep <= 0`` behaves like ``keep=1`` and
    a non-empty history never gets ``c == len(messages)``. ``keep >= len(messages)`` and
    the empty history give ``0``. Pairs at any distance are respected (unlike the
    reference's ±5-message window).
    """
    total = len(messages)
    if total == 0 or keep >= total:
        return 0
    unsafe = _unsafe_cuts(messages)
    cut = total - max(keep, 1)
    while cut > 0 and unsafe[cut]:
        cut -= 1
    return cut


def safe_token_cutoff(
    messages: Sequence[CanonicalMessage],
    keep_tokens: int,
    count_message: Callable[[CanonicalMessage], int],
) -> int:
    """The cut index ``c`` keeping as much of the newest history as fits ``keep_tokens``.

    Returns the smallest safe ``c`` whose suffix ``messages[c:]`` totals at most
    ``keep_tokens`` (so it keeps the most that fits). When no safe suffix fits (for
    example the last message alone is too big, or the only fitting suffixes would split
    a pair), returns the largest safe ``c`` below the fitting range — the smallest
    over-budget suffix that splits nothing. The last message is always kept.

    Messages are counted once each, newest first, and counting stops at the first one
    that does not fit.

    Args:
        messages: The history.
        keep_tokens: Token budget for the kept suffix.
        count_message: Token count of one message (e.g. ``TokenCounter.count_message``).
    """
    total = len(messages)
    if total == 0:
        return 0
    start = total  # smallest index whose suffix fits
    used = 0
    while start > 0:
        tokens = count_message(messages[start - 1])
        if used + tokens > keep_tokens:
            break
        used += tokens
        start -= 1
    if start == 0:
        return 0
    unsafe = _unsafe_cuts(messages)
    for cut in range(start, total):
        if not unsafe[cut]:
            return cut
    cut = min(start, total - 1)
    while cut > 0 and unsafe[cut]:
        cut -= 1
    return cut


def changed_span(before: Sequence[CanonicalMessage], after: Sequence[CanonicalMessage]) -> tuple[int, int]:
    """The window ``[start, stop)`` of ``after`` outside which it equals ``before``.

    ``after[:start] == before[:start]`` and ``after[stop:]`` equals the same number of
    last messages of ``before``; ``start == stop`` means nothing differs beyond a length
    change at ``start``. Found with list comparisons at C speed (identical messages compare
    by identity), so an edit of a few messages in a long history costs O(log n) slice
    comparisons instead of a Python loop over every message.
    """
    a = before if isinstance(before, list) else list(before)
    b = after if isinstance(after, list) else list(after)
    start = common_prefix(a, b)
    end = common_suffix(a, b, min(len(a), len(b)) - start)
    return start, len(b) - end
