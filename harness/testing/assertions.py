"""Assertions about histories, for tests of capabilities and other history transformations.

Plain functions: they raise :class:`AssertionError` with a message naming the message
index, the part index and the tool call id at fault, and work with or without pytest::

    from harness.testing import assert_invariants, assert_no_split_tool_pairs

    after = my_transformation(before)
    assert_invariants(after)
    assert_no_split_tool_pairs(before, after)
    assert_request_kept(before, after)
    assert_user_prompts_kept(before, after)

``before`` is the history a transformation received and ``after`` what it produced.
"""

from __future__ import annotations

__all__ = [
    "assert_pins_kept",
    "assert_history_unchanged",
    "assert_invariants",
    "assert_no_split_tool_pairs",
    "assert_request_kept",
    "assert_transformation_safe",
    "assert_user_prompts_kept",
]

from collections import Counter
from collections.abc import Sequence

import attrs

from harness.core.messages import (
    CanonicalMessage,
    RetryPromptPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from harness.core.pins import lost_pins
from harness.history import check_invariants

_MAX_LISTED = 5


def _listing(problems: Sequence[str]) -> str:
    shown = [f"  - {problem}" for problem in problems[:_MAX_LISTED]]
    if len(problems) > _MAX_LISTED:
        shown.append(f"  ... and {len(problems) - _MAX_LISTED} more")
    return "\n".join(shown)


def _snippet(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def assert_invariants(messages: Sequence[CanonicalMessage], *, persisted: bool = False) -> None:
    """Assert that ``messages`` is a history providers accept (no invariant violation).

    Args:
        messages: The history to check.
        persisted: Also forbid system prompt parts (a history about to be stored).

    Raises:
        AssertionError: :func:`harness.history.check_invariants` reported violations;
            the message lists each with its kind, message index, part index and tool
            call id.
    """
    violations = check_invariants(messages, persisted=persisted)
    if not violations:
        return
    lines: list[str] = []
    for violation in violations:
        where = f"message {violation.message_index}"
        if violation.part_index is not None:
            where += f", part {violation.part_index}"
        call = f", tool_call_id {violation.tool_call_id!r}" if violation.tool_call_id else ""
        lines.append(f"{violation.kind} at {where}{call}: {violation.detail}")
    raise AssertionError(
        f"the history of {len(messages)} messages breaks {len(violations)} invariant(s):\n{_listing(lines)}"
    )


@attrs.frozen
class _Pair:
    call_indices: tuple[int, ...]
    answer_indices: tuple[int, ...]

    @property
    def present(self) -> bool:
        return bool(self.call_indices or self.answer_indices)


def _pairs(messages: Sequence[CanonicalMessage]) -> dict[str, _Pair]:
    calls: dict[str, list[int]] = {}
    answers: dict[str, list[int]] = {}
    for index, message in enumerate(messages):
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                calls.setdefault(part.tool_call_id, []).append(index)
            elif isinstance(part, ToolReturnPart) or (
                isinstance(part, RetryPromptPart) and part.answers_tool_call and part.tool_call_id
            ):
                call_id = part.tool_call_id
                if call_id is not None:
                    answers.setdefault(call_id, []).append(index)
    return {
        call_id: _Pair(tuple(calls.get(call_id, ())), tuple(answers.get(call_id, ())))
        for call_id in {**calls, **answers}
    }


def assert_no_split_tool_pairs(before: Sequence[CanonicalMessage], after: Sequence[CanonicalMessage]) -> None:
    """Assert that every tool call of ``before`` kept its answers in ``after``, or left with them.

    For each tool call id of ``before``, ``after`` must hold either the call and every one
    of its answers (tool returns and retry prompts naming the call; their content may
    have changed), or none of them. In ``after`` each answer must also come after its call.

    Raises:
        AssertionError: A call or an answer was removed without the rest of its pair, or
            an answer now precedes its call. The message names the tool_call_id and the
            message indices before and after.
    """
    old = _pairs(before)
    new = _pairs(after)
    problems: list[str] = []
    for call_id, was in old.items():
        now = new.get(call_id, _Pair((), ()))
        if not now.present:
            continue
        if len(now.call_indices) < len(was.call_indices):
            problems.append(
                f"tool_call_id {call_id!r}: the call (message {was.call_indices[0]} before) was removed, "
                f"but its answer remains at message {now.answer_indices[0]} after"
                if now.answer_indices
                else f"tool_call_id {call_id!r}: a call was removed (message {was.call_indices[0]} before)"
            )
        elif len(now.answer_indices) < len(was.answer_indices):
            lost = len(was.answer_indices) - len(now.answer_indices)
            where = f"message {now.call_indices[0]} after" if now.call_indices else "no call left"
            problems.append(
                f"tool_call_id {call_id!r}: {lost} of its {len(was.answer_indices)} answer(s) "
                f"(messages {list(was.answer_indices)} before) were removed, but the call remains ({where})"
            )
        elif now.call_indices and now.answer_indices and now.answer_indices[0] < now.call_indices[0]:
            problems.append(
                f"tool_call_id {call_id!r}: its answer at message {now.answer_indices[0]} now precedes "
                f"its call at message {now.call_indices[0]}"
            )
    if problems:
        raise AssertionError(f"tool calls were split from their answers:\n{_listing(problems)}")


def _user_prompts(message: CanonicalMessage) -> list[UserPromptPart]:
    return [part for part in message.parts if isinstance(part, UserPromptPart)]


def assert_request_kept(before: Sequence[CanonicalMessage], after: Sequence[CanonicalMessage]) -> None:
    """Assert that the request being sent (the last message of ``before``) is still last.

    It may be an edited copy (for example with a tool return shortened), but ``after``
    must end with a request that is not an older message of ``before`` and that still
    holds every user prompt and answers every tool call the original answered. Passes
    trivially when ``before`` does not end with a request (nothing is being sent).

    Raises:
        AssertionError: ``after`` is empty, ends with a response, ends with an older
            message, or its last request lost a user prompt or a tool answer.
    """
    if not before or not before[-1].is_request:
        return
    sent = before[-1]
    where = f"the request being sent (message {len(before) - 1} of {len(before)} before)"
    if not after:
        raise AssertionError(f"{where} was dropped: the history after is empty")
    last = after[-1]
    if not last.is_request:
        raise AssertionError(
            f"{where} was dropped: the history after ends with a response at message {len(after) - 1}"
        )
    if last is not sent:
        for index, message in enumerate(before[:-1]):
            if message is last:
                raise AssertionError(
                    f"{where} was dropped: the history after ends with message {index} of before"
                )
        missing_prompts = Counter(p.content for p in _user_prompts(sent) if isinstance(p.content, str))
        missing_prompts.subtract(p.content for p in _user_prompts(last) if isinstance(p.content, str))
        lost = [text for text, count in missing_prompts.items() if count > 0]
        if lost:
            raise AssertionError(
                f"{where} lost user prompt {_snippet(lost[0])} (message {len(after) - 1} after)"
            )
        answered_before = set(_pairs([sent]))
        answered_after = set(_pairs([last]))
        gone = sorted(answered_before - answered_after)
        if gone:
            raise AssertionError(
                f"{where} no longer answers tool_call_id {gone[0]!r} (message {len(after) - 1} after)"
            )


def assert_user_prompts_kept(before: Sequence[CanonicalMessage], after: Sequence[CanonicalMessage]) -> None:
    """Assert that every user prompt of ``before`` is still in ``after``, in the same order.

    Prompts compare by content (an edited message still counts when it holds the same
    prompt). Capabilities that replace old turns with a summary drop prompts on purpose;
    do not use this assertion for them, or only on the prompts they promise to keep.

    Raises:
        AssertionError: A prompt is missing; the message names its message and part
            index in ``before`` and a snippet of its text.
    """
    remaining = [
        (index, part_index, part.content)
        for index, message in enumerate(after)
        for part_index, part in enumerate(message.parts)
        if isinstance(part, UserPromptPart)
    ]
    position = 0
    for index, message in enumerate(before):
        for part_index, part in enumerate(message.parts):
            if not isinstance(part, UserPromptPart):
                continue
            while position < len(remaining) and remaining[position][2] != part.content:
                position += 1
            if position == len(remaining):
                text = part.content if isinstance(part.content, str) else repr(part.content)
                raise AssertionError(
                    f"user prompt {_snippet(text)} (message {index}, part {part_index} before) is missing "
                    "from the history after, or out of order"
                )
            position += 1


def assert_transformation_safe(
    before: Sequence[CanonicalMessage],
    after: Sequence[CanonicalMessage],
    *,
    user_prompts: bool = True,
    pins: bool = True,
) -> None:
    """Run every history assertion at once: the checks a property test of a capability makes.

    :func:`assert_invariants` on ``after`` (only when ``before`` was valid: a transformation
    is not blamed for damage it received), :func:`assert_no_split_tool_pairs`,
    :func:`assert_request_kept`, with ``user_prompts`` :func:`assert_user_prompts_kept`, and
    with ``pins`` :func:`assert_pins_kept`.

    Raises:
        AssertionError: The first assertion that fails.
    """
    if not check_invariants(before):
        assert_invariants(after)
    assert_no_split_tool_pairs(before, after)
    assert_request_kept(before, after)
    if user_prompts:
        assert_user_prompts_kept(before, after)
    if pins:
        assert_pins_kept(before, after)


def assert_pins_kept(before: Sequence[CanonicalMessage], after: Sequence[CanonicalMessage]) -> None:
    """Assert that every pinned part of ``before`` is in ``after``, unchanged (it may have moved).

    Raises:
        AssertionError: Naming each lost or changed pinned part.
    """
    lost = lost_pins(before, after)
    if lost:
        shown = [f"{part.part_kind} {_snippet(str(getattr(part, 'content', '')))}" for part in lost]
        raise AssertionError(f"{len(lost)} pinned part(s) lost or changed:\n{_listing(shown)}")


def assert_history_unchanged(before: Sequence[CanonicalMessage], after: Sequence[CanonicalMessage]) -> None:
    """Assert that ``after`` holds the same messages as ``before`` (a no-op, e.g. an idle capability).

    Raises:
        AssertionError: The lengths differ, or names the first message that differs.
    """
    if len(before) != len(after):
        raise AssertionError(f"the history changed: {len(before)} messages before, {len(after)} after")
    for index, (old, new) in enumerate(zip(before, after, strict=True)):
        if old != new:
            raise AssertionError(f"the history changed at message {index}: {old!r} became {new!r}")
