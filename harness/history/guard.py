"""The invariant guard: did an edit of a history break what providers accept, or lose a pin?

The plugin manager runs every ``before_model_request`` implementation under this guard:
it snapshots the history, lets the implementation edit it, then asks :func:`guard_edit`
whether the edit introduced a violation (or dropped the request being sent). When it did,
the manager restores the snapshot and re-raises the :class:`~harness.errors.CapabilityError`
naming the capability.

The functions are pure: they read ``before`` and ``after`` and never change them.
:func:`check_edit` reports what an edit violated; :func:`guard_edit` raises for it.
"""

from __future__ import annotations

__all__ = [
    "EditCheck",
    "check_edit",
    "describe_violation",
    "guard_edit",
]

from collections import Counter
from collections.abc import Sequence
from typing import Final

import attrs

from harness.core.messages import CanonicalMessage, Part, RetryPromptPart
from harness.core.pins import lost_pins, pin_reason
from harness.errors import CapabilityError
from harness.history.changes import changed_span
from harness.history.invariants import Violation, check_invariants
from harness.history.queries import is_empty_response

_DROPPED_REQUEST: Final = "the request being sent was dropped (the history must end with it)"
_SHOWN: Final = 3
"""How many problems a :class:`~harness.errors.CapabilityError` message lists."""


@attrs.frozen
class EditCheck:
    """What the guard found in one edit of a history.

    Attributes:
        introduced: Violations ``after`` has that ``before`` did not. Indices shift when
            an edit removes messages, so violations are compared by kind and tool call
            id, counting repeats.
        dropped_request: ``before`` ended with a request and ``after`` no longer ends
            with it (nor with an edited copy of it).
        violations: Every violation of ``after``, to pass as the ``baseline`` of the next
            check; ``None`` when the full check was skipped because the edit changed
            nothing an invariant reads (``after`` then has the violations of ``before``).
    """

    introduced: tuple[Violation, ...] = ()
    dropped_request: bool = False
    violations: tuple[Violation, ...] | None = None
    lost_pins: tuple[Part, ...] = ()

    @property
    def ok(self) -> bool:
        """True when the edit introduced no violation, kept the request and every pinned part."""
        return not self.introduced and not self.dropped_request and not self.lost_pins

    @property
    def problems(self) -> tuple[str, ...]:
        """One sentence per problem, the dropped request first, lost pins last."""
        described = tuple(describe_violation(v) for v in self.introduced)
        pins = tuple(_describe_lost_pin(part) for part in self.lost_pins)
        return ((_DROPPED_REQUEST,) if self.dropped_request else ()) + described + pins


def check_edit(
    before: Sequence[CanonicalMessage],
    after: Sequence[CanonicalMessage],
    *,
    baseline: Sequence[Violation] | None = None,
) -> EditCheck:
    """Compare a history before and after an edit.

    An edit that keeps every message kind, part kind, tool call id, retry target and
    response emptiness cannot add a violation, so the O(n) invariant check is skipped
    for it (clearing a tool result, replacing a superseded read); only the changed
    messages are compared.

    Args:
        before: The history before the edit.
        after: The history after it.
        baseline: ``check_invariants(before)`` when already known (the ``violations`` of
            the previous check), so it is not computed again.
    """
    if _same_list(before, after):
        return EditCheck()
    lost = tuple(lost_pins(before, after))
    if _same_shape(before, after):
        return EditCheck(lost_pins=lost)
    known = check_invariants(before) if baseline is None else baseline
    found = check_invariants(after)
    return EditCheck(
        introduced=tuple(_new_violations(known, found)),
        dropped_request=_dropped_request(before, after),
        violations=tuple(found),
        lost_pins=lost,
    )


def guard_edit(
    before: Sequence[CanonicalMessage],
    after: Sequence[CanonicalMessage],
    capability: str,
    *,
    hook_name: str = "before_model_request",
    baseline: Sequence[Violation] | None = None,
) -> Sequence[Violation] | None:
    """Raise when an edit by ``capability`` left a history the provider would reject.

    The error message says the history was restored: the caller restores ``before``
    before letting it propagate.

    Args:
        before: The history before the edit.
        after: The history after it.
        capability: The capability (or plugin) that made the edit, named in the error.
        hook_name: What it ran as (``"before_model_request"`` or ``"compact"``).
        baseline: ``check_invariants(before)`` when already known.

    Returns:
        The baseline for the next edit: the violations of ``after`` when they were
        computed, else ``baseline`` unchanged.

    Raises:
        CapabilityError: The edit introduced a violation or dropped the request being
            sent; :attr:`~harness.errors.CapabilityError.capability` is ``capability``,
            and the message lists the first three problems.
    """
    check = check_edit(before, after, baseline=baseline)
    if not check.ok:
        problems = check.problems
        details = "; ".join(problems[:_SHOWN])
        more = f" (and {len(problems) - _SHOWN} more)" if len(problems) > _SHOWN else ""
        raise CapabilityError(
            capability,
            f"{hook_name} left a history the provider would reject: {details}{more}; "
            "the history was restored to what it was before this capability ran",
        )
    return baseline if check.violations is None else check.violations


def describe_violation(violation: Violation) -> str:
    """One sentence naming a violation's kind, location, tool call and detail."""
    where = f"message {violation.message_index}"
    if violation.part_index is not None:
        where += f", part {violation.part_index}"
    call = f", tool call {violation.tool_call_id!r}" if violation.tool_call_id else ""
    return f"{violation.kind} at {where}{call}: {violation.detail}"


def _describe_lost_pin(part: Part) -> str:
    text = str(getattr(part, "content", getattr(part, "args", "")))
    shown = text if len(text) <= 60 else text[:57] + "..."
    call = getattr(part, "tool_call_id", None)
    where = f" (tool call {call!r})" if call else ""
    who = pin_reason(part)
    kind = part.part_kind
    return f"lost_pinned_part: a {kind} part pinned by {who!r}{where} was changed or dropped: {shown!r}"


def _same_list(before: Sequence[CanonicalMessage], after: Sequence[CanonicalMessage]) -> bool:
    # List comparison checks identity first, so an untouched history compares at C speed.
    a = before if isinstance(before, list) else list(before)
    b = after if isinstance(after, list) else list(after)
    return a == b


def _part_shape(part: Part) -> tuple[str, str | None, bool]:
    if isinstance(part, RetryPromptPart):
        return (part.part_kind, part.tool_call_id, part.answers_tool_call)
    return (part.part_kind, getattr(part, "tool_call_id", None), False)


def _message_shape(message: CanonicalMessage) -> tuple[object, ...]:
    return (message.kind, is_empty_response(message), *map(_part_shape, message.parts))


def _same_shape(before: Sequence[CanonicalMessage], after: Sequence[CanonicalMessage]) -> bool:
    """True when ``after`` differs from ``before`` only in content that no invariant reads.

    Every invariant depends only on message kinds, part kinds, tool-call ids, whether a
    retry answers a call and whether a response is empty.
    """
    if len(before) != len(after):
        return False
    start, stop = changed_span(before, after)
    return all(
        a is b or _message_shape(a) == _message_shape(b)
        for a, b in zip(before[start:stop], after[start:stop], strict=True)
    )


def _dropped_request(before: Sequence[CanonicalMessage], after: Sequence[CanonicalMessage]) -> bool:
    """True when ``before`` ended with a request and ``after`` no longer ends with it.

    The request may be replaced by an edited copy, but the history may not end with a
    response, be empty, or end with an *older* message of ``before``.
    """
    if not before or not before[-1].is_request:
        return False
    if not after or not after[-1].is_request:
        return True
    last = after[-1]
    return last is not before[-1] and any(message is last for message in before[:-1])


def _violation_key(violation: Violation) -> tuple[str, str | None]:
    return (violation.kind, violation.tool_call_id)


def _new_violations(before: Sequence[Violation], after: Sequence[Violation]) -> list[Violation]:
    budget = Counter(_violation_key(v) for v in before)
    introduced: list[Violation] = []
    for violation in after:
        key = _violation_key(violation)
        if budget[key] > 0:
            budget[key] -= 1
        else:
            introduced.append(violation)
    return introduced
