"""The human decisions on a held-back tool call: :class:`Approve`, :class:`Reject`, :class:`Edit`."""

from __future__ import annotations

__all__ = ["DEFAULT_REASON", "Approve", "Decision", "DecisionError", "Edit", "Reject", "check_decision"]

from collections.abc import Mapping
from typing import Any, TypeAlias, cast

import attrs

from harness.errors import ApprovalError, RunStopped

DEFAULT_REASON = "no reason given"
"""The reason of a ``Reject()`` given none."""


def _reason(value: str) -> str:
    if not isinstance(cast(object, value), str):
        raise TypeError(f"Reject(reason) must be a str, got {type(value).__name__}")
    return value.strip() or DEFAULT_REASON


def _arguments(value: Mapping[str, Any]) -> dict[str, Any]:
    given = cast(object, value)
    if not isinstance(given, Mapping):
        raise TypeError(
            f"Edit(args) must be a mapping of argument names to values (the tool's new arguments), "
            f"got {type(given).__name__}"
        )
    mapping = cast(Mapping[object, Any], given)
    bad = [key for key in mapping if not isinstance(key, str)]
    if bad:
        raise TypeError(f"Edit(args) names its arguments with strings; got the key {bad[0]!r}")
    return {cast(str, key): item for key, item in mapping.items()}


@attrs.frozen
class Approve:
    """Run the call as the model made it."""


@attrs.frozen
class Reject:
    """Do not run the call; the model gets a tool result saying it was rejected, and why.

    Attributes:
        reason: Why, in words the model reads (``"no reason given"`` when empty).
    """

    reason: str = attrs.field(default=DEFAULT_REASON, converter=_reason)


@attrs.frozen
class Edit:
    """Run the call with other arguments (validated against the tool's schema like the model's).

    Attributes:
        args: The new arguments: all of them, not a patch (a copy is kept).
    """

    args: Mapping[str, Any] = attrs.field(converter=_arguments, hash=False)


Decision: TypeAlias = Approve | Reject | Edit
"""What a human decides for one held-back call."""


class DecisionError(RunStopped, ApprovalError):
    """A decision for a tool call is not an :class:`Approve`, :class:`Reject` or :class:`Edit`.

    Raised from the ``wrap_tool_call`` wrapper, so the run stops (after saving; a paused
    session stays paused) and the error reaches the caller unchanged. It is an
    :class:`~harness.errors.ApprovalError` (wrong ``approvals``) and a
    :class:`~harness.errors.RunStopped`.

    Attributes:
        tool_call_id: The call the decision was for.
        decision_type: The type name of the value given.
    """

    def __init__(self, tool_call_id: str, decision: object, *, source: str) -> None:
        self.tool_call_id = tool_call_id
        self.decision_type = type(decision).__name__
        super().__init__(
            f"{source} for tool call {tool_call_id!r} is a {self.decision_type} ({decision!r:.80}); "
            "give Approve(), Reject(reason) or Edit(args) from harness_tool_approval"
        )


def check_decision(tool_call_id: str, decision: object, *, source: str) -> Decision:
    """``decision`` when it is a decision, else :class:`DecisionError` naming the call and the type."""
    if isinstance(decision, Approve | Reject | Edit):
        return decision
    raise DecisionError(tool_call_id, decision, source=source)
