"""The :class:`ToolApproval` plugin: a ``wrap_tool_call`` wrapper that holds calls back for a human."""

from __future__ import annotations

__all__ = [
    "DEFAULT_REJECTION",
    "NOTES_KEY",
    "SOURCE",
    "Approver",
    "Rejection",
    "Requirement",
    "ToolApproval",
]

import json
from collections.abc import Callable, Generator, Iterable
from typing import Any, ClassVar, TypeAlias, cast

import attrs

from harness.capabilities import ToolCall
from harness.core import ToolOutcome, ToolReturnPart, harness_mark
from harness.hooks import hookimpl
from harness.tools import RunContext
from harness_tool_approval._decisions import Decision, Edit, Reject, check_decision

SOURCE = "tool_approval"
"""The plugin's name (its entry point, and its name in the plugin manager)."""

NOTES_KEY = "tool_approval"
"""The key of ``call.notes`` where the wrapper records what it decided (see :class:`ToolApproval`)."""

DEFAULT_REJECTION = "The user rejected this call: {reason}"
"""What the model reads for a rejected call (``{reason}``, ``{tool}`` and ``{call_id}`` are filled in)."""

_FIELDS = ("reason", "tool", "call_id")

Requirement: TypeAlias = Callable[[ToolCall], bool]
"""``require=``: whether a call needs approval, besides the tools' own marks."""

Approver: TypeAlias = Callable[[ToolCall], Decision | None]
"""``approver=``: decides a call in this process; ``None`` holds it back (the run pauses)."""

Rejection: TypeAlias = str | Callable[[ToolCall, Reject], object]
"""``rejection=``: a template, or a function returning the JSON-ready result the model reads."""


def _tool_names(value: Iterable[str]) -> frozenset[str]:
    given = cast(object, value)
    if isinstance(given, str):
        raise TypeError(f"tools must be a list of tool names, not a string; did you mean [{given!r}]?")
    if not isinstance(given, Iterable):
        raise TypeError(f"tools must be a list of tool names, got {type(given).__name__}")
    names = list(cast(Iterable[object], given))
    for name in names:
        if not isinstance(name, str) or not name:
            raise TypeError(f"tools must hold tool names (non-empty strings), got {name!r}")
    return frozenset(cast(list[str], names))


def _check_callable(name: str, value: object) -> None:
    if value is not None and not callable(value):
        raise TypeError(f"{name} must be a function or None, got {type(value).__name__}")


def _check_rejection(value: object) -> None:
    if callable(value):
        return
    if not isinstance(value, str):
        raise TypeError(
            f"rejection must be a template string or a function (call, decision) -> result, "
            f"got {type(value).__name__}"
        )
    try:
        value.format(**dict.fromkeys(_FIELDS, "x"))
    except (KeyError, IndexError, ValueError) as exc:
        fields = ", ".join("{" + field + "}" for field in _FIELDS)
        raise ValueError(f"rejection template {value!r} is invalid ({exc!r}); it may use {fields}") from None


_DEFERRED_PREFIX = "awaiting approval: "


def _held_reason(ctx: RunContext, call: ToolCall) -> str | None:
    """Why ``call`` was held by an earlier run, when it is one being resumed (else ``None``).

    A resumed call is answered by a placeholder in the history's last request; a call of
    the run's own response is not (the history then ends with that response), so this is
    one comparison outside a resume.
    """
    messages = ctx.messages
    if not messages or messages[-1].kind != "request":
        return None
    for part in messages[-1].parts:
        if isinstance(part, ToolReturnPart) and part.tool_call_id == call.tool_call_id:
            mark = harness_mark(part)
            if mark is not None and mark.get("awaiting_approval"):
                return (
                    str(mark.get("reason") or "").removeprefix(_DEFERRED_PREFIX) or "held by an earlier run"
                )
    return None


def _described(args: dict[str, Any] | str) -> str:
    text = args if isinstance(args, str) else json.dumps(args, default=str, sort_keys=True)
    return text if len(text) <= 200 else text[:197] + "..."


@attrs.frozen(kw_only=True, eq=False)
class ToolApproval:
    """Hold tool calls back for a human decision: the run pauses, and resumes with the decisions.

    A call needs approval when its tool is marked (``Tool.from_function(fn,
    needs_approval=True)``, or a predicate on the arguments: ``call.tool.requires_approval``),
    when ``tools`` names it, or when ``require(call)`` is true. A call to a tool the agent
    does not have never needs approval (it gets the usual retry prompt).

    Such a call, with no decision yet, is held back: the wrapper returns
    ``ToolOutcome("deferred", error="awaiting approval: <why>")`` and the tool does not run.
    When the batch of calls is done the run ends with ``status="awaiting_approval"``; resume
    it with ``agent.run(None, session=..., approvals={call_id: decision})``. With a decision
    (``call.decision``, or the ``approver``'s answer):

    * :class:`~harness_tool_approval.Approve`: the call runs;
    * :class:`~harness_tool_approval.Edit`: the call runs with ``args`` (the core validates
      them against the tool's schema, as it does the model's);
    * :class:`~harness_tool_approval.Reject`: the call does not run; the model reads the
      ``rejection`` message as the tool's result.

    A decision is honoured whenever one is given, even if the call would not need approval
    now; and a call an earlier run held back stays held until it gets one, even if this
    agent's configuration would let it run (its reason is kept). What was decided is
    recorded in ``call.notes["tool_approval"]``: ``{"decision": "approve" | "edit" |
    "reject", "by": "approvals" | "approver"}``, plus ``"reason"`` for a rejection and
    ``"original_args"`` / ``"args"`` for an edit.

    Args:
        tools: Names of tools whose every call needs approval (as if marked); kept as
            :attr:`tool_names` (a capability's ``tools`` attribute means tools it provides).
        require: See the attributes.
        approver: See the attributes.
        rejection: See the attributes.

    Attributes:
        tool_names: The ``tools`` given, as a frozen set.
        require: ``require(call) -> bool``: a call for which it is true needs approval. If it
            raises, the call needs approval (when in doubt, ask) and the exception is the
            reason.
        approver: ``approver(call) -> Approve() | Reject(reason) | Edit(args) | None``:
            decides, synchronously and in this process, each call that needs approval and
            has no decision yet; ``None`` holds the call back as without an approver.
        rejection: What the model reads for a rejected call: a template using ``{reason}``,
            ``{tool}`` and ``{call_id}`` (default :data:`DEFAULT_REJECTION`), or a function
            ``(call, decision) -> result`` returning any JSON-ready value.

    Raises:
        TypeError: ``tools`` is a string or holds something other than names; ``require``
            or ``approver`` is not callable; ``rejection`` is neither a string nor callable.
        ValueError: The ``rejection`` template uses a field other than the three.
    """

    name: ClassVar[str] = SOURCE
    runs_before: ClassVar[tuple[str, ...]] = ()
    runs_after: ClassVar[tuple[str, ...]] = ()

    tool_names: frozenset[str] = attrs.field(default=frozenset[str](), converter=_tool_names, alias="tools")
    require: Requirement | None = None
    approver: Approver | None = None
    rejection: Rejection = DEFAULT_REJECTION

    def __attrs_post_init__(self) -> None:
        _check_callable("require", self.require)
        _check_callable("approver", self.approver)
        _check_rejection(self.rejection)

    def reason_for(self, call: ToolCall) -> str | None:
        """Why ``call`` needs approval, or ``None`` when it does not."""
        tool = call.tool
        if tool is None:
            return None
        name = call.tool_name
        if tool.needs_approval is True:
            return f"{name} is marked needs_approval"
        if not isinstance(tool.needs_approval, bool) and tool.requires_approval(call.args):
            return f"{name} needs approval for these arguments ({_described(call.args)})"
        if name in self.tool_names:
            return f"ToolApproval(tools=...) lists {name}"
        if self.require is None:
            return None
        try:
            required = bool(self.require(call))
        except Exception as exc:
            return f"ToolApproval(require=...) raised {type(exc).__name__}: {exc}; held to be safe"
        return f"ToolApproval(require=...) holds this call of {name}" if required else None

    def rejection_content(self, call: ToolCall, decision: Reject) -> object:
        """What the model reads for ``call`` rejected by ``decision``."""
        if isinstance(self.rejection, str):
            return self.rejection.format(
                reason=decision.reason, tool=call.tool_name, call_id=call.tool_call_id
            )
        return self.rejection(call, decision)

    @hookimpl(wrapper=True)
    def wrap_tool_call(self, ctx: RunContext, call: ToolCall) -> Generator[None, ToolOutcome, object]:
        """Hold the call back, or act on its decision (see the class)."""
        given: object = call.decision
        by = "approvals"
        if given is None:
            why = _held_reason(ctx, call) or self.reason_for(call)
            if why is None:
                return (yield)
            if self.approver is not None:
                given, by = self.approver(call), "approver"
            if given is None:
                return ToolOutcome("deferred", error=_DEFERRED_PREFIX + why)
        source = "the approver's decision" if by == "approver" else "the decision in approvals"
        decision = check_decision(call.tool_call_id, given, source=source)
        if isinstance(decision, Reject):
            call.notes[NOTES_KEY] = {"decision": "reject", "by": by, "reason": decision.reason}
            return self.rejection_content(call, decision)  # the core makes it the call's result
        if isinstance(decision, Edit):
            edited = dict(decision.args)
            call.notes[NOTES_KEY] = {"decision": "edit", "by": by, "original_args": call.args, "args": edited}
            call.args = edited
        else:
            call.notes[NOTES_KEY] = {"decision": "approve", "by": by}
        return (yield)
