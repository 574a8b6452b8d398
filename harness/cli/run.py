"""``harness run``: the example coding agent, once or interactively, in a saved session."""

from __future__ import annotations

__all__ = ["run"]

import asyncio
import importlib
import re
import sys
from pathlib import Path
from typing import Any

import click

from harness.capabilities.context import CompactionEvent, RequestContext
from harness.cli._app import cli, console, escaped, resolve_cli_stack, stack_option
from harness.cli._json import echo_json, edit_count, event_json
from harness.core.markers import hookimpl
from harness.core.nodes import CallToolsNode, Node
from harness.session import Session
from harness.tools.context import RunContext

_SESSION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_EXIT_WORDS = frozenset({"exit", "quit", ":q"})


class _Printer:
    """Observer plugin: prints tool calls and compaction events as they happen, and keeps the events."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.events: list[CompactionEvent] = []

    @hookimpl
    def after_node(self, ctx: RunContext, node: Node) -> None:
        if self.enabled and isinstance(node, CallToolsNode):
            for call in node.tool_calls:
                args = ", ".join(f"{k}={v!r}" for k, v in call.args_as_dict().items())
                console().print(f"  [dim]→ {escaped(call.tool_name)}({escaped(args)})[/dim]")

    @hookimpl
    def on_compaction(self, ctx: RequestContext, event: CompactionEvent) -> None:
        from harness.cli.demo.measure import describe_event

        self.events.append(event)
        if self.enabled:
            console().print(f"  [cyan]compaction:[/cyan] {escaped(describe_event(event))}")


def _has_work(session: Session) -> bool:
    """Whether a failed first turn got anything worth keeping: a model response."""
    return any(message.kind == "response" for message in session.messages)


def _keep_failed_first_turn(session: Session, target: Path) -> None:
    """Save a new session whose first turn failed after the model answered, and say so on stderr."""
    try:
        session.save(target)
    except Exception as exc:  # never mask the run's own error
        click.echo(f"the session could not be saved either: {exc}", err=True)
        return
    click.echo(
        f"the session so far was saved to {target}; continue with: harness run --resume {session.session_id}",
        err=True,
    )


def _open_session(name: str | None, resume: str | None, directory: Path | None, root: Path) -> Session:
    from harness.session import find_session

    if name is not None and resume is not None:
        raise click.UsageError(
            "--session and --resume are exclusive (--resume continues an existing session)"
        )
    if resume is not None:
        path = find_session(resume, directory)
        if path is None:
            where = directory if directory is not None else "the default session folder"
            raise click.BadParameter(
                f"no session {resume!r} in {where}; `harness sessions` lists them", param_hint="--resume"
            )
        return Session.load(path)
    if name is not None:
        if not _SESSION_NAME.fullmatch(name):
            raise click.BadParameter(
                f"{name!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
                param_hint="--session",
            )
        path = find_session(name, directory)
        if path is not None:
            return Session.load(path)
        return Session.create(directory, session_id=name, working_directory=str(root))
    return Session.create(directory, working_directory=str(root))


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
    default=Path(),
    show_default=True,
    help="Folder the agent may read (its tools cannot leave it).",
)
@click.option(
    "--session", "session_name", default=None, metavar="NAME", help="Session id to create or continue."
)
@click.option(
    "--resume", default=None, metavar="ID", help="Continue the saved session ID (see `harness sessions`)."
)
@click.option(
    "--session-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    envvar="HARNESS_SESSION_DIR",
    help="Session folder (default: $XDG_DATA_HOME/harness/sessions; env HARNESS_SESSION_DIR).",
)
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
def run(
    prompt: str | None,
    model_spec: str,
    stack: str | None,
    config: Path | None,
    stack_name: str | None,
    root: Path,
    session_name: str | None,
    resume: str | None,
    session_dir: Path | None,
    budget: int | None,
    interactive: bool,
    as_json: bool,
) -> None:
    """Run the example coding agent on PROMPT, or interactively, in a saved session.

    The agent (from the harness-coding-agent package) reads files, lists folders,
    searches text and runs read-only commands inside --root. Without an API key the
    scripted model drives it offline; with one, pass --model openai:gpt-4o-mini (needs
    OPENAI_API_KEY) or anthropic:claude-sonnet-4-6 (ANTHROPIC_API_KEY); a local
    OpenAI-compatible server works with ollama:MODEL (OLLAMA_BASE_URL). Every turn is
    saved; continue later with --resume ID. Type exit or press Ctrl-D to leave the
    interactive mode.

    \b
    Examples:
      harness run "What does this project do?"
      harness run --model openai:gpt-4o-mini --root src "Where is the config parsed?"
      harness run --session review            # interactive on a terminal
      harness run --resume review "And the tests?"
      echo "Summarise README.md" | harness run --json
    """  # noqa: D301 - click needs the \b marker
    from harness.cli.demo.runner import load_coding_agent, use_structural_digest
    from harness.config.stacks import default_stack_spec
    from harness.hooks.manager import PluginManager
    from harness.models.check import check_model
    from harness.models.resolve import resolve_model

    agent_module = load_coding_agent()
    if as_json and interactive:
        raise click.UsageError("--json prints one result; it cannot be combined with --interactive")
    if prompt is None and not interactive:
        if sys.stdin.isatty() and not as_json:
            interactive = True
        else:
            prompt = sys.stdin.read().strip() or None
            if prompt is None:
                raise click.UsageError("give a PROMPT (argument or standard input), or use --interactive")

    manager = PluginManager()
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
    # Before any session exists: a missing key or an unreachable server fails here, writing nothing.
    asyncio.run(check_model(model))
    session = _open_session(session_name, resume, session_dir, root)
    target = session.path
    if session.path is not None and not session.path.exists():
        session.path = None  # a new session's file is written once a turn has something to keep
    if model.model_name == agent_module.SCRIPTED_MODEL_NAME:
        use_structural_digest(capabilities)
    printer = _Printer(enabled=not as_json)
    manager.register(printer, name="run_printer")
    agent = agent_module.build_agent(model, root=root, stack=capabilities, plugin_manager=manager)
    out = console()

    turns: list[dict[str, Any]] = []

    def turn(text: str) -> None:
        try:
            result = asyncio.run(agent.run(text, session=session))
        except BaseException:
            if session.path is None and target is not None and _has_work(session):
                _keep_failed_first_turn(session, target)
            raise
        if session.path is None and target is not None:
            session.save(target)
        turns.append(
            {
                "prompt": text,
                "output": result.output,
                "requests": result.iterations,
                "input_tokens": result.usage.request_tokens,
                "output_tokens": result.usage.response_tokens,
            }
        )
        if not as_json:
            out.print(f"[bold]{escaped(model.model_name)}:[/bold] {escaped(result.output or '(no text)')}")

    if not as_json:
        action = "continuing" if session.messages else "new"
        out.print(
            f"[dim]{action} session {escaped(session.session_id)} · model {escaped(model.model_name)} · "
            f"root {escaped(root.resolve())}[/dim]"
        )
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
            if text:
                turn(text)
    path = session.path  # every turn saved the session (the first one created its file)
    if as_json:
        echo_json(
            {
                "session_id": session.session_id,
                "session_path": None if path is None else str(path),
                "model": model.model_name,
                "messages": len(session.messages),
                "compaction_edits": edit_count(printer.events),
                "compaction_events": [event_json(event) for event in printer.events],
                "turns": turns,
                "output": turns[-1]["output"] if turns else None,
            }
        )
    elif path is None:
        out.print(f"[dim]nothing to save: session {escaped(session.session_id)} was not created[/dim]")
    else:
        out.print(
            f"[dim]session {escaped(session.session_id)} saved to {escaped(path)}; continue with: "
            f"harness run --resume {escaped(session.session_id)}[/dim]"
        )
