"""``harness run``'s side of human approval of tool calls (the ``harness-tool-approval`` plugin).

When the plugin is installed, ``harness run`` registers its ``ToolApproval`` wrapper (unless
the stack has one): calls of tools marked ``needs_approval``, and of the tools named by
``--require-approval``, pause the run. Then:

* on a terminal (or with ``--interactive``), each pending call is shown with its arguments
  and the command asks: approve, reject (with a reason the model reads), edit (new JSON
  arguments) or later; the run resumes with the decisions, and may pause again;
* otherwise (standard input not a terminal, ``--no-input``, ``--json``) the run stays
  paused, stored in the session, and the command prints how to resume it:
  ``harness run --resume ID --approve CALL_ID``, ``--reject CALL_ID=REASON`` or
  ``--edit 'CALL_ID={"arg": ...}'``.

A session that is paused is resumed first, with the decisions of those options (and the
answers asked for), before any new prompt runs.
"""

from __future__ import annotations

__all__ = [
    "APPROVAL_ENTRY_POINT",
    "EXIT_AWAITING_APPROVAL",
    "ApprovalDriver",
    "PendingCall",
    "approval_options",
    "prepare_approval",
]

import importlib
import json
import shlex
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any, Final, TypeVar, cast

import attrs
import click

from harness.cli._app import console, escaped
from harness.core.messages import CanonicalMessage, ToolCallPart, ToolReturnPart, harness_mark
from harness.errors import ApprovalError, ApprovalPendingError
from harness.hooks.bundled import install_command
from harness.run.agent import RunResult
from harness.run.approvals import held_calls, is_placeholder
from harness.session import Session

EXIT_AWAITING_APPROVAL: Final = 5
"""``harness run`` stopped with tool calls waiting for approval (the session is saved; resume it
with ``--approve`` / ``--reject`` / ``--edit``): not a success a script should treat as done."""

APPROVAL_ENTRY_POINT: Final = "tool_approval"
"""The entry point of the ``harness-tool-approval`` plugin (its ``ToolApproval`` class)."""

_INSTALL_HINT: Final = (
    f"install harness-tool-approval (from a clone of harness: {install_command(['harness-tool-approval'])})"
)
_CHOICES: Final = {
    "a": "approve",
    "approve": "approve",
    "y": "approve",
    "yes": "approve",
    "r": "reject",
    "reject": "reject",
    "n": "reject",
    "no": "reject",
    "e": "edit",
    "edit": "edit",
    "l": "later",
    "later": "later",
}
_F = TypeVar("_F", bound=Callable[..., Any])


def approval_options(function: _F) -> _F:
    """Add ``--require-approval``, ``--approve``, ``--reject``, ``--edit`` and ``--no-input``."""
    options = [
        click.option(
            "--no-input",
            is_flag=True,
            help="Never ask: a run that pauses for approval stays paused and the command says how to resume.",
        ),
        click.option(
            "--edit",
            "edit",
            multiple=True,
            metavar="CALL_ID=JSON",
            help="Resume a paused run: run this call with these arguments (a JSON object). Repeatable.",
        ),
        click.option(
            "--reject",
            "reject",
            multiple=True,
            metavar="CALL_ID[=REASON]",
            help="Resume a paused run: do not run this call; the model reads the reason. Repeatable.",
        ),
        click.option(
            "--approve",
            "approve",
            multiple=True,
            metavar="CALL_ID",
            help="Resume a paused run: run this call as the model made it. Repeatable.",
        ),
        click.option(
            "--require-approval",
            "require_approval",
            multiple=True,
            metavar="TOOL",
            help="Pause the run at each call of TOOL until a human decides (needs harness-tool-approval).",
        ),
    ]
    for option in options:
        function = option(function)
    return function


@attrs.frozen
class PendingCall:
    """A tool call a paused run holds back.

    Attributes:
        call: The model's call.
        reason: Why it waits (the plugin's ``"awaiting approval: ..."``).
    """

    call: ToolCallPart
    reason: str

    @property
    def arguments(self) -> str:
        """The arguments as compact JSON."""
        return json.dumps(self.call.args_as_dict(), ensure_ascii=False)


def pending_calls(messages: Sequence[CanonicalMessage]) -> list[PendingCall]:
    """The calls a paused history holds back, with their reasons, in call order."""
    calls = held_calls(messages)
    if not calls:
        return []
    reasons: dict[str, str] = {}
    for part in messages[-1].parts:
        if isinstance(part, ToolReturnPart) and is_placeholder(part):
            mark = harness_mark(part) or {}
            reasons[part.tool_call_id] = str(mark.get("reason") or "awaiting approval")
    return [PendingCall(call, reasons.get(call.tool_call_id, "awaiting approval")) for call in calls]


def _plugin_module() -> ModuleType | None:
    """The installed, enabled approval plugin's package, or ``None``."""
    from harness.config import installed_capability_classes

    cls = installed_capability_classes().get(APPROVAL_ENTRY_POINT)
    if cls is None:
        return None
    module = importlib.import_module(cls.__module__.split(".")[0])
    if not all(hasattr(module, name) for name in ("Approve", "Reject", "Edit", "ToolApproval")):
        return None
    return module


def _split(value: str, option: str, *, required: bool) -> tuple[str, str | None]:
    call_id, sep, rest = value.partition("=")
    call_id = call_id.strip()
    if not call_id:
        raise click.BadParameter(f"{value!r} names no tool call", param_hint=option)
    if required and not sep:
        raise click.BadParameter(f"{value!r}: give CALL_ID=JSON, the call's new arguments", param_hint=option)
    return call_id, (rest if sep else None)


def _json_arguments(text: str) -> dict[str, Any]:
    """``text`` as a JSON object, or ``ValueError`` saying what it is instead."""
    parsed: object = json.loads(text)
    if not isinstance(parsed, dict):
        raise ValueError(f"a JSON object is needed, got {type(parsed).__name__}")
    return cast(dict[str, Any], parsed)


def _flag_decisions(
    module: ModuleType, approve: Sequence[str], reject: Sequence[str], edit: Sequence[str]
) -> dict[str, object]:
    decisions: dict[str, object] = {}

    def put(call_id: str, decision: object, option: str) -> None:
        if call_id in decisions:
            raise click.BadParameter(f"tool call {call_id!r} is given two decisions", param_hint=option)
        decisions[call_id] = decision

    for value in approve:
        put(_split(value, "--approve", required=False)[0], module.Approve(), "--approve")
    for value in reject:
        call_id, reason = _split(value, "--reject", required=False)
        put(call_id, module.Reject(reason or ""), "--reject")
    for value in edit:
        call_id, text = _split(value, "--edit", required=True)
        try:
            arguments = _json_arguments(text or "")
        except ValueError as exc:
            raise click.BadParameter(
                f"the arguments of {call_id!r} are not a JSON object: {exc}", param_hint="--edit"
            ) from None
        put(call_id, module.Edit(arguments), "--edit")
    return decisions


@attrs.frozen
class ApprovalSetup:
    """What ``harness run`` was told about approvals.

    Attributes:
        module: The ``harness_tool_approval`` package, or ``None`` when it is not installed.
        decisions: The decisions of ``--approve`` / ``--reject`` / ``--edit``, by call id.
        ask: Whether to ask at the terminal when a run pauses.
    """

    module: ModuleType | None
    decisions: Mapping[str, object]
    ask: bool


def prepare_approval(
    manager: Any,
    capabilities: Sequence[object],
    *,
    require: Sequence[str],
    approve: Sequence[str],
    reject: Sequence[str],
    edit: Sequence[str],
    ask: bool,
) -> ApprovalSetup:
    """Find the plugin, register its wrapper on ``manager`` and read the decisions of the options.

    Raises:
        click.UsageError: An approval option was given and the plugin is not installed, or
            ``--require-approval`` was combined with a ``tool_approval`` stack entry.
        click.BadParameter: A decision option is malformed or names a call twice.
    """
    from harness.hooks import capability_name

    module = _plugin_module()
    if module is None:
        if require or approve or reject or edit:
            used = "--require-approval" if require else "--approve/--reject/--edit"
            raise click.UsageError(f"{used} needs the approval plugin: {_INSTALL_HINT}")
        return ApprovalSetup(None, {}, ask)
    in_stack = any(capability_name(c) == APPROVAL_ENTRY_POINT for c in capabilities)
    if in_stack and require:
        raise click.UsageError(
            "--require-approval and a tool_approval stack entry both configure approval; "
            "use one (e.g. --stack 'tool_approval:tools=run_shell|read_file')"
        )
    if not in_stack:
        manager.register(module.ToolApproval(tools=list(require)), name=APPROVAL_ENTRY_POINT)
    return ApprovalSetup(module, _flag_decisions(module, approve, reject, edit), ask)


def _choice(text: str) -> str:
    value = text.strip().lower()
    if value not in _CHOICES:
        raise click.BadParameter("answer a (approve), r (reject), e (edit) or l (later)")
    return _CHOICES[value]


class ApprovalDriver:
    """Asks for, or explains how to give, the decisions a paused run of one session waits for.

    Args:
        setup: What the command was told (:func:`prepare_approval`).
        session: The command's session.
        store_url: Where the session is stored (for the resume hint).
        quiet: ``--json``: print nothing.
        options: Options the printed resume commands repeat (``--root``, ``--store``,
            ``--session-dir`` as the command was given them).
    """

    def __init__(
        self, setup: ApprovalSetup, session: Session, store_url: str, *, quiet: bool, options: str = ""
    ) -> None:
        self.setup = setup
        self.session = session
        self.store_url = store_url
        self.quiet = quiet
        self.command = " ".join(filter(None, ["harness run", options, f"--resume {session.session_id}"]))
        """The command that resumes the session, without the decisions."""

    def pending(self) -> list[PendingCall]:
        """The session's calls waiting for approval."""
        return pending_calls(self.session.messages)

    def check_decisions(self) -> None:
        """Refuse decision options naming calls the session does not hold back.

        Raises:
            ApprovalError: The session holds no call back, or an option names another call.
        """
        decisions = self.setup.decisions
        if not decisions:
            return
        waiting = [p.call.tool_call_id for p in self.pending()]
        sid = self.session.session_id
        if not waiting:
            raise ApprovalError(
                f"--approve/--reject/--edit: session {sid!r} has no tool calls waiting for approval"
            )
        unknown = sorted(set(decisions) - set(waiting))
        if unknown:
            raise ApprovalError(
                f"tool call {unknown[0]!r} is not waiting for approval in session {sid!r} "
                f"(waiting: {', '.join(waiting)})"
            )

    def settle(
        self, result: RunResult, resume: Callable[[Mapping[str, object]], RunResult]
    ) -> list[RunResult]:
        """Ask for the decisions of a paused run and resume it, until it completes or is left paused.

        Returns:
            ``result`` and the results of the resumed runs, in order; when the last one is
            still paused, how to resume it was printed.
        """
        results = [result]
        while results[-1].status == "awaiting_approval":
            pending = self.pending()
            if not self.setup.ask or self.setup.module is None or not pending:
                self.explain()
                break
            decisions, later = self._ask(pending)
            if decisions:
                results.append(resume(decisions))
            if later:
                if results[-1].status == "awaiting_approval":
                    self.explain()
                break
        return results

    def blocked(self) -> ApprovalPendingError:
        """The error for a new prompt in a paused session: which calls wait, how to resume."""
        ids = [p.call.tool_call_id for p in self.pending()]
        return ApprovalPendingError(
            f"session {self.session.session_id!r} has tool calls waiting for approval ({', '.join(ids)}); "
            f"the prompt was not run. Decide them first: {self.command} "
            "--approve CALL_ID | --reject CALL_ID=REASON | --edit CALL_ID=JSON",
            tool_call_ids=ids,
        )

    # ------------------------------------------------------------------ output

    def _show(self, item: PendingCall) -> None:
        out = console()
        out.print(
            f"[yellow]approval needed[/yellow] {escaped(item.call.tool_call_id)}: "
            f"[bold]{escaped(item.call.tool_name)}[/bold] {escaped(item.arguments)}"
        )
        out.print(f"  [dim]{escaped(item.reason)}[/dim]")

    def explain(self) -> None:
        """Print the calls waiting for approval and the commands that resume the run (not with ``--json``)."""
        pending = self.pending()
        if self.quiet or not pending:
            return
        sid = self.session.session_id
        out = console()
        count = len(pending)
        calls = f"{count} tool call{'s' if count > 1 else ''} wait{'' if count > 1 else 's'}"
        out.print(
            f"[yellow]paused:[/yellow] {calls} for approval in session {escaped(sid)} "
            f"({escaped(self.store_url)})"
        )
        for item in pending:
            self._show(item)
        approve = " ".join(f"--approve {p.call.tool_call_id}" for p in pending)
        first = pending[0].call.tool_call_id
        command = self.command
        edit = shlex.quote(f"{first}={pending[0].arguments}")
        out.print(f"approve: {escaped(command)} {escaped(approve)}", soft_wrap=True)
        out.print(
            f"reject:  {escaped(command)} --reject {escaped(shlex.quote(first + '=REASON'))}", soft_wrap=True
        )
        out.print(f"edit:    {escaped(command)} --edit {escaped(edit)}", soft_wrap=True)

    # ------------------------------------------------------------------ asking

    def _ask(self, pending: Sequence[PendingCall]) -> tuple[dict[str, object], bool]:
        """Ask for each call in turn; ``(decisions, whether some were left for later)``."""
        module = self.setup.module
        assert module is not None
        decisions: dict[str, object] = {}
        later = False
        for item in pending:
            self._show(item)
            answer = click.prompt("  approve, reject, edit or later? [a/r/e/l]", value_proc=_choice)
            call_id = item.call.tool_call_id
            if answer == "approve":
                decisions[call_id] = module.Approve()
            elif answer == "reject":
                reason: str = click.prompt("  reason (the model reads it)", default="", show_default=False)
                decisions[call_id] = module.Reject(reason)
            elif answer == "edit":
                decisions[call_id] = module.Edit(self._ask_arguments(item))
            else:
                later = True
        return decisions, later

    @staticmethod
    def _ask_arguments(item: PendingCall) -> dict[str, Any]:
        while True:
            text: str = click.prompt("  new arguments (a JSON object)", default=item.arguments)
            try:
                return _json_arguments(text)
            except ValueError as exc:
                click.echo(f"  not a JSON object: {exc}")
