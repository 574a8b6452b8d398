"""``harness run``: the example coding agent, once or interactively, in a stored session.

The session lives in a :class:`~harness.session.SessionStore` (``--store`` /
``$HARNESS_STORE``, default ``sessions.db`` in the XDG data folder; ``--session-dir`` is a
folder of JSON files, the ``file:`` store). It is written by its first checkpoint and
after every step, so ``--resume ID`` continues it even after a crash.
"""

from __future__ import annotations

__all__ = ["run"]

import asyncio
import importlib
import json
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import click

from harness.capabilities.context import CompactionEvent, RequestContext
from harness.cli._app import cli, console, escaped, resolve_cli_stack, stack_option
from harness.cli._json import echo_json, edit_count, event_json
from harness.cli.approval import (
    EXIT_AWAITING_APPROVAL,
    ApprovalDriver,
    ApprovalSetup,
    approval_options,
    prepare_approval,
)
from harness.cli.sessions.files import session_file
from harness.cli.sessions.options import (
    check_session_name,
    legacy_session_files,
    opened_store,
    store_options,
    store_url_for,
)
from harness.cli.streaming import stream_run
from harness.core.markers import hookimpl
from harness.core.messages import harness_mark
from harness.errors import SessionNotFoundError
from harness.session import Session
from harness.session.store import SessionStore
from harness.tools.context import RunContext
from harness.tools.lifecycle import ToolEvent

_EXIT_WORDS = frozenset({"exit", "quit", ":q"})


class _Printer:
    """Observer plugin: prints tool calls and compaction events as they happen, and keeps the events."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.events: list[CompactionEvent] = []
        self._shown: set[str] = set()

    @hookimpl
    def on_tool(self, ctx: RunContext, event: ToolEvent) -> None:
        # When the call has run, not when the model asks for it: a call held for approval
        # (deferred), cancelled, or answered from the ledger on --resume has not run, so it is
        # not shown as if it had.
        record = event.record
        if (
            not self.enabled
            or event.kind not in ("completed", "failed")
            or record.tool_call_id in self._shown
        ):
            return
        self._shown.add(record.tool_call_id)
        failed = " [red](failed)[/red]" if event.kind == "failed" else ""
        console().print(
            f"  [dim]→ {escaped(record.tool_name)}({escaped(_arguments(record.args))})[/dim]{failed}"
        )

    @hookimpl
    def on_compaction(self, ctx: RequestContext, event: CompactionEvent) -> None:
        from harness.cli.demo.measure import describe_event

        self.events.append(event)
        if self.enabled:
            console().print(f"  [cyan]compaction:[/cyan] {escaped(describe_event(event))}")


def _arguments(args: Mapping[str, Any] | str | None) -> str:
    """A tool call's arguments as ``key='value', ...`` (JSON text decoded when it is an object)."""
    if isinstance(args, str):
        try:
            decoded: object = json.loads(args)
        except ValueError:
            return args
        if not isinstance(decoded, dict):
            return args
        args = cast("dict[str, Any]", decoded)
    return ", ".join(f"{key}={value!r}" for key, value in (args or {}).items())


def _has_work(session: Session) -> bool:
    """Whether a failed first turn got anything worth keeping: a model response."""
    return any(message.kind == "response" for message in session.messages)


def _after_failed_turn(session: Session, store: SessionStore, *, fresh: bool, options: str = "") -> None:
    """Keep what a failed turn did, or forget a new session that got nothing worth keeping.

    The run's recovery handed the repaired history to the session; this writes it and
    prints the command that continues it, for a new session and a resumed one alike
    (Ctrl-C in ``--resume ID "prompt"`` too). A new session whose first turn failed before
    the model answered is not kept, as before stores: a run that checkpointed it already is
    undone by deleting it (it is this command's own creation). Never masks the run's own
    error.
    """
    try:
        if fresh and not _has_work(session):
            if session.revision:
                store.delete(session.session_id)
            return
        session.checkpoint()
    except Exception as exc:
        click.echo(f"the session could not be saved either: {exc}", err=True)
        return
    click.echo(
        f"the session so far was saved in {store.url}; continue with: {_resume_hint(session, options)}",
        err=True,
    )


def _closed_by_interrupt(session: Session) -> bool:
    """Whether the last run was stopped (Ctrl-C, a timeout) and closed with an ``[INTERRUPTED]`` response."""
    if not session.messages or session.messages[-1].kind != "response":
        return False
    last = session.messages[-1]
    return any((harness_mark(part) or {}).get("interrupted") for part in last.parts) or bool(
        (harness_mark(last) or {}).get("interrupted")
    )


def _resume_hint(session: Session, options: str = "") -> str:
    """The command that continues ``session``: without a prompt only when a run is left unfinished.

    A SIGKILL leaves the view ending with a request or open calls, which ``--resume`` alone
    finishes; Ctrl-C closes the run with an ``[INTERRUPTED]`` response, after which only a
    new prompt continues the conversation.
    """
    command = f"harness run {options + ' ' if options else ''}--resume {session.session_id}"
    return command if _interrupted(session) else f'{command} "PROMPT"'


def _interrupted(session: Session) -> bool:
    """Whether the last run stopped before its answer: the view ends with a request or open calls."""
    if not session.messages:
        return False
    last = session.messages[-1]
    return last.kind == "request" or bool(last.tool_calls)


def _not_found(resume: str, url: str) -> click.BadParameter:
    hint = ""
    legacy = legacy_session_files(url)
    if legacy is not None:
        from harness.session import find_session

        old = find_session(resume, legacy[0])
        if old is not None:
            hint = (
                f"; it is a session file of an earlier release: import it with "
                f"`harness sessions import {old}`, "
                f"or use --session-dir {legacy[0]}"
            )
    return click.BadParameter(
        f"no session {resume!r} in {url}; `harness sessions list` lists them{hint}", param_hint="--resume"
    )


def _open_session(name: str | None, resume: str | None, store: SessionStore, root: Path) -> Session:
    if resume is not None:
        try:
            return Session.open(store, resume)
        except SessionNotFoundError:
            raise _not_found(resume, store.url) from None
    if name is not None:
        try:
            return Session.open(store, name)
        except SessionNotFoundError:
            return Session.create(store=store, session_id=name, working_directory=str(root))
    return Session.create(store=store, working_directory=str(root))


@cli.command()
@click.argument("prompt", required=False)
@click.option(
    "--model",
    "model_spec",
    envvar="HARNESS_MODEL",
    default="scripted",
    show_default=True,
    help=(
        "Model string: scripted (offline), openai:MODEL, anthropic:MODEL, ollama:MODEL, test, or any "
        "a plugin resolves. Default from $HARNESS_MODEL."
    ),
)
@stack_option
@click.option(
    "--root",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help=(
        "Folder the agent may read (its tools cannot leave it). Default: the session's own folder "
        "when it continues one (--resume, an existing --session), else the current folder."
    ),
)
@click.option(
    "--session", "session_name", default=None, metavar="NAME", help="Session id to create or continue."
)
@click.option(
    "--resume",
    default=None,
    metavar="ID",
    help="Continue the stored session ID (see `harness sessions list`).",
)
@store_options()
@click.option(
    "--budget",
    type=click.IntRange(min=100),
    default=None,
    metavar="TOKENS",
    help="Context window given to the stack (default: the model's).",
)
@click.option(
    "-i",
    "--interactive",
    is_flag=True,
    help="Keep asking for prompts (the default without PROMPT on a terminal).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (not with --interactive).")
@approval_options
@click.pass_context
def run(
    ctx: click.Context,
    prompt: str | None,
    model_spec: str,
    stack: str | None,
    config: Path | None,
    stack_name: str | None,
    root: Path | None,
    session_name: str | None,
    resume: str | None,
    store: str | None,
    session_dir: Path | None,
    budget: int | None,
    interactive: bool,
    as_json: bool,
    require_approval: tuple[str, ...],
    approve: tuple[str, ...],
    reject: tuple[str, ...],
    edit: tuple[str, ...],
    no_input: bool,
) -> None:
    """Run the example coding agent on PROMPT, or interactively, in a saved session.

    The agent (from the harness-coding-agent package) reads files, lists folders,
    searches text and runs read-only commands inside --root. Without an API key the
    scripted model drives it offline; with one, pass --model openai:gpt-4o-mini (needs
    OPENAI_API_KEY) or anthropic:claude-sonnet-4-6 (ANTHROPIC_API_KEY); a local
    OpenAI-compatible server works with ollama:MODEL (OLLAMA_BASE_URL). The session is
    stored (--store, default sessions.db in the XDG data folder) and checkpointed as it
    runs; continue later with --resume ID, also after a crash. Type exit or press Ctrl-D
    to leave the interactive mode.

    With harness-tool-approval installed, calls of the tools named by --require-approval
    (and of tools marked needs_approval) pause the run: on a terminal the command asks to
    approve, reject or edit each one, then resumes; otherwise (or with --no-input) the
    run stays paused in the session and the command prints how to resume it with
    --approve, --reject or --edit.

    \b
    Examples:
      harness run "What does this project do?"
      harness run --model openai:gpt-4o-mini --root src "Where is the config parsed?"
      harness run --session review            # interactive on a terminal
      harness run --resume review "And the tests?"
      harness run --store sqlite:///team.db --session review "Where is the config parsed?"
      echo "Summarise README.md" | harness run --json
      harness run --require-approval run_shell "Count the lines of app.py"
      harness run --resume review --approve scripted_3 --reject scripted_4="not now"
    """  # noqa: D301 - click needs the \b marker
    from harness.cli.demo.runner import load_coding_agent
    from harness.config.stacks import default_stack_spec
    from harness.hooks.defaults import default_plugin_manager
    from harness.models.check import check_model
    from harness.models.resolve import resolve_model

    agent_module = load_coding_agent()
    if session_name is not None and resume is not None:
        raise click.UsageError(
            "--session and --resume are exclusive (--resume continues an existing session)"
        )
    if session_name is not None:
        check_session_name(session_name, "--session")
    url = store_url_for(ctx)
    if as_json and interactive:
        raise click.UsageError("--json prints one result; it cannot be combined with --interactive")
    continue_only = False  # --resume with no prompt at all: finish the interrupted run, then stop
    if prompt is None and not interactive:
        if sys.stdin.isatty() and not as_json:
            interactive = True
        else:
            prompt = sys.stdin.read().strip() or None
            deciding = bool(approve or reject or edit)
            if prompt is None:
                if resume is None and not (deciding and session_name is not None):
                    raise click.UsageError("give a PROMPT (argument or standard input), or use --interactive")
                continue_only = True

    manager = default_plugin_manager()
    manager.register(importlib.import_module("harness_coding_agent.provider"), name="coding_agent_models")
    model = resolve_model(model_spec, plugin_manager=manager)
    window = budget if budget is not None else model.context_window
    capabilities, _ = resolve_cli_stack(
        stack, config, stack_name, default=default_stack_spec(), context_window=window
    )
    if capabilities and window is None:
        raise click.UsageError(
            f"the context window of {model.model_name!r} is unknown; pass --budget TOKENS for the stack"
        )
    approval = prepare_approval(
        manager,
        capabilities,
        require=require_approval,
        approve=approve,
        reject=reject,
        edit=edit,
        ask=not (no_input or as_json) and (interactive or sys.stdin.isatty()),
    )
    # Before any session exists: a missing key or an unreachable server fails here, writing nothing.
    asyncio.run(check_model(model))
    with opened_store(url) as opened:
        session = _open_session(session_name, resume, opened, (root or Path()).resolve())
        if root is None:  # a continued session keeps the folder it was started on
            root = _session_root(session)
        _run_turns(
            opened,
            session,
            agent_module=agent_module,
            model=model,
            capabilities=capabilities,
            manager=manager,
            root=root,
            prompt=prompt,
            interactive=interactive,
            as_json=as_json,
            resumed=resume is not None,
            continue_only=continue_only,
            approval=approval,
            repeat=_repeated_options(ctx, store, session_dir),
        )


def _session_root(session: Session) -> Path:
    """The folder a session was started on, when it still exists; else the current folder."""
    folder = Path(session.working_directory) if session.working_directory else Path()
    return folder if folder.is_dir() else Path()


def _repeated_options(ctx: click.Context, store: str | None, session_dir: Path | None) -> str:
    """The options a printed resume command must repeat: ``--store`` or ``--session-dir``.

    Only when given on the command line (``HARNESS_STORE`` and ``HARNESS_SESSION_DIR`` still
    hold for the next command). ``--root`` is not among them: ``--resume`` runs on the folder
    the session remembers.
    """
    from click.core import ParameterSource

    if ctx.get_parameter_source("store") is not ParameterSource.COMMANDLINE:
        store = None
    if ctx.get_parameter_source("session_dir") is not ParameterSource.COMMANDLINE:
        session_dir = None
    options: list[str] = []
    if store:
        options.append(f"--store {shlex.quote(store)}")
    if session_dir is not None:
        options.append(f"--session-dir {shlex.quote(str(session_dir))}")
    return " ".join(options)


def _run_turns(
    store: SessionStore,
    session: Session,
    *,
    agent_module: Any,
    model: Any,
    capabilities: list[Any],
    manager: Any,
    root: Path,
    prompt: str | None,
    interactive: bool,
    as_json: bool,
    resumed: bool = False,
    continue_only: bool = False,
    approval: ApprovalSetup | None = None,
    repeat: str = "",
) -> None:
    """Run the prompt and the interactive turns in ``session``, then print the result.

    A resumed session whose last run stopped before its answer (a crash, a failed
    request: the view ends with a request, or with tool calls not yet answered) is
    continued first when no prompt was given: completed tool calls are reused from the
    ledger, never run again. A session paused for approval is resumed first, with the
    decisions given (see :mod:`harness.cli.approval`), before the prompt runs.
    """
    from harness.cli.demo.runner import use_structural_digest

    if model.model_name == agent_module.SCRIPTED_MODEL_NAME:
        use_structural_digest(capabilities)
    printer = _Printer(enabled=not as_json)
    manager.register(printer, name="run_printer")
    agent = agent_module.build_agent(model, root=root, stack=capabilities, plugin_manager=manager)
    out = console()

    turns: list[dict[str, Any]] = []
    approvals = ApprovalDriver(
        approval or ApprovalSetup(None, {}, False),
        session,
        store.url,
        quiet=as_json,
        options=repeat,
    )

    streamed = {"printed": False}

    def one_run(text: str | None, decisions: Any) -> Any:
        if as_json:
            return asyncio.run(agent.run(text, session=session, approvals=decisions))
        run = asyncio.run(stream_run(agent, text, session, decisions, label=escaped(model.model_name)))
        streamed["printed"] = streamed["printed"] or run.printed
        return run.result

    def resume(decisions: Any) -> Any:
        return one_run(None, decisions)

    def turn(text: str | None, decisions: Any = None) -> None:
        fresh = session.revision == 0
        streamed["printed"] = False
        try:
            runs = approvals.settle(one_run(text, decisions), resume)
        except BaseException:
            _after_failed_turn(session, store, fresh=fresh, options=repeat)
            raise
        result = runs[-1]
        # The run checkpoints a stored session after every step; this writes what is left
        # (everything, for a loop that only hands its history back when the run ends) and
        # is a no-op when nothing changed since the run's last checkpoint.
        session.checkpoint()
        turns.append(
            {
                "prompt": text,
                "output": result.output,
                "requests": sum(r.iterations for r in runs),
                "input_tokens": sum(r.usage.request_tokens for r in runs),
                "output_tokens": sum(r.usage.response_tokens for r in runs),
                "status": result.status,
            }
        )
        if not as_json and result.status == "completed" and not streamed["printed"]:
            out.print(f"[bold]{escaped(model.model_name)}:[/bold] {escaped(result.output or '(no text)')}")

    approvals.check_decisions()
    unfinished = _interrupted(session)
    if continue_only and not unfinished:
        if _closed_by_interrupt(session):
            raise click.UsageError(
                f"the last run of session {session.session_id!r} was interrupted and closed with "
                f"[INTERRUPTED]; continue it with a new prompt: {_resume_hint(session, repeat)}"
            )
        raise click.UsageError(
            f"session {session.session_id!r} has no interrupted run to continue; give a PROMPT"
        )
    if not as_json:
        action = (
            "continuing the interrupted run of"
            if unfinished and resumed and prompt is None
            else ("continuing" if session.messages else "new")
        )
        out.print(
            f"[dim]{action} session {escaped(session.session_id)} · model {escaped(model.model_name)} · "
            f"root {escaped(root.resolve())} · {escaped(store.url)}[/dim]"
        )
    if approvals.pending():  # paused for approval: resume with the decisions first
        if approvals.setup.decisions or approvals.setup.ask:
            turn(None, approvals.setup.decisions)
        else:
            approvals.explain()
        if approvals.pending() and prompt is not None:
            raise approvals.blocked()
    elif prompt is None and resumed and unfinished:
        turn(None)
    if prompt is not None:
        turn(prompt)
    if interactive:
        stdin = sys.stdin
        while True:
            click.echo("you> ", nl=False)
            line = stdin.readline()
            if not line:
                click.echo()
                break
            text = line.strip()
            if text.lower() in _EXIT_WORDS:
                break
            if text and approvals.pending():
                turn(None)  # asks again for the calls left for later
            if text and approvals.pending():
                out.print(f"[yellow]{escaped(approvals.blocked())}[/yellow]")
            elif text:
                turn(text)
    written = session.revision > 0  # the first checkpoint created the session
    path = session_file(store, session.session_id) if written else None
    if as_json:
        echo_json(
            {
                "session_id": session.session_id,
                "store": store.url,
                "revision": session.revision,
                "session_path": None if path is None else str(path),
                "model": model.model_name,
                "messages": len(session.messages),
                "compaction_edits": edit_count(printer.events),
                "compaction_events": [event_json(event) for event in printer.events],
                "turns": turns,
                "output": turns[-1]["output"] if turns else None,
                "status": "awaiting_approval" if approvals.pending() else "completed",
                "pending_approvals": [
                    {
                        "tool_call_id": p.call.tool_call_id,
                        "tool_name": p.call.tool_name,
                        "args": p.call.args_as_dict(),
                        "reason": p.reason,
                    }
                    for p in approvals.pending()
                ],
            }
        )
    elif not written:
        out.print(f"[dim]nothing to save: session {escaped(session.session_id)} was not created[/dim]")
    else:
        out.print(
            f"[dim]session {escaped(session.session_id)} saved in {escaped(store.url)} (revision "
            f"{session.revision}); continue with: {escaped(_resume_hint(session, repeat))}[/dim]"
        )
    if approvals.pending():  # paused: the session is saved, but the task is not done
        sys.exit(EXIT_AWAITING_APPROVAL)
