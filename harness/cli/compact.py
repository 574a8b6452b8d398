"""``harness compact``: apply a capability stack to a history or session file, or to a stored session.

``harness compact PATH`` reads a file and writes the result only when asked (``--out``,
``--in-place``). ``harness compact --session ID [--store URL]`` loads a session from a
store, compacts its view and saves it back through the store's optimistic concurrency:
the replaced messages stay in the session's log, the new ones become overlays recorded
with the compaction events (exactly as a run persists a compaction), and a concurrent
writer makes the save fail with :class:`~harness.errors.SessionConflictError`, writing
nothing (exit status :data:`EXIT_CONFLICT`).
"""

from __future__ import annotations

__all__ = ["EXIT_CONFLICT", "compact", "compact_report"]

import os
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import attrs
import click
from click.core import ParameterSource
from rich.table import Table

from harness.cli._app import (
    EXIT_OVER_WINDOW,
    EXIT_PROBLEM,
    HISTORY_PATH,
    HistoryFile,
    cli,
    console,
    escaped,
    history_format_option,
    read_history_file,
    resolve_cli_stack,
    stack_option,
)
from harness.cli._json import echo_json, edit_count, event_json
from harness.cli.compact_session import compact_stored_session, save_compacted
from harness.cli.sessions.options import opened_store, store_options, store_url_for
from harness.config import StackEntry, find_stack_file, format_stack
from harness.config.stacks import TIERED_NAMES, require_installed, tiered_stack_entries
from harness.errors import HistoryFileError, SessionConflictError, TargetNotRegularFileError
from harness.history import check_invariants
from harness.run.compaction import CompactionResult, compact_sync
from harness.session import Session, SessionStore
from harness.session.files import atomic_write_bytes, write_target
from harness.tokens import TokenCounter
from harness.wire import FormatChoice, dump_messages

EXIT_CONFLICT: Final = 4
"""``compact --session``: another writer changed the session while it was compacted; nothing was written."""


def compact_report(
    history: HistoryFile,
    result: CompactionResult,
    entries: Sequence[StackEntry],
    *,
    window: int,
    dry_run: bool,
    written: Path | None,
) -> dict[str, Any]:
    """The manifest ``harness compact`` prints, as a JSON-ready mapping.

    One item per :class:`~harness.capabilities.context.CompactionEvent`
    (:func:`~harness.cli._json.event_json`: ``capability`` is the event's ``strategy``; a
    ``rollup`` item sums up the edits before it and is not counted in ``edit_count``), with
    the ids of the tool calls cleared and dropped, plus the
    totals, the invariant report of the result, ``tokens_over_window`` (how far the
    result is over ``window``; 0 when it fits) and ``backup`` (the backup ``--in-place``
    kept, filled in by the command). ``session`` and ``store`` are ``None`` for a file;
    ``--session`` fills them in instead of ``file`` and adds ``revision_before`` and
    ``revision``.
    """
    return _report(
        result,
        entries,
        messages_before=len(history.messages),
        persisted=history.kind == "session",
        source={"file": str(history.path), "format": history.kind, "session": None, "store": None},
        window=window,
        dry_run=dry_run,
        written=None if written is None else str(written),
    )


def _report(
    result: CompactionResult,
    entries: Sequence[StackEntry],
    *,
    messages_before: int,
    persisted: bool,
    source: Mapping[str, Any],
    window: int,
    dry_run: bool,
    written: str | None,
) -> dict[str, Any]:
    violations = check_invariants(result.messages, persisted=persisted)
    return {
        **source,
        "stack": format_stack(entries),
        "window": window,
        "dry_run": dry_run,
        "written": written,
        "backup": None,
        "messages_before": messages_before,
        "messages_after": len(result.messages),
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "tokens_over_window": max(0, result.tokens_after - window),
        "edits": [event_json(event) for event in result.events],
        "edit_count": edit_count(result.events),
        "request_scoped_parts": len(result.request_scoped),
        "invariants": {
            "clean": not violations,
            "violations": [
                {"kind": v.kind, "message_index": v.message_index, "detail": v.detail} for v in violations
            ],
        },
    }


def _print(report: Mapping[str, Any]) -> None:
    out = console()
    out.print(f"stack: {escaped(report['stack'] or '(empty)')}")
    table = Table(
        "capability", "messages", "tokens", "saved", "calls cleared", "calls dropped", "reason", title="edits"
    )
    for edit in report["edits"]:
        table.add_row(
            escaped(edit["capability"] + (" (roll-up)" if edit["rollup"] else "")),
            f"{edit['messages_before']} → {edit['messages_after']}",
            f"{edit['tokens_before']:,} → {edit['tokens_after']:,}",
            f"{edit['tokens_before'] - edit['tokens_after']:,}",
            str(edit["tool_calls_cleared"]),
            str(edit["tool_calls_dropped"]),
            escaped(edit["reason"]),
        )
    if report["edits"]:
        out.print(table)
        if any(edit["rollup"] for edit in report["edits"]):
            count = report["edit_count"]
            out.print(f"{count} edit{'' if count == 1 else 's'}; a roll-up row sums up the edits above it")
    else:
        out.print("no capability edited the history")
    clean = report["invariants"]["clean"]
    out.print(
        f"{escaped(_source_label(report))}: "
        f"{report['messages_before']} → {report['messages_after']} messages, "
        f"{report['tokens_before']:,} → {report['tokens_after']:,} tokens (window {report['window']:,}); "
        f"invariants: {'[green]clean[/green]' if clean else '[red]BROKEN[/red]'}"
    )


def _source_label(report: Mapping[str, Any]) -> str:
    if report.get("session") is not None:
        return f"session {report['session']} ({report['store']})"
    return str(report["file"])


def _serialise(history: HistoryFile, result: CompactionResult) -> bytes:
    if history.session is None:
        return dump_messages(result.messages)
    session = attrs.evolve(
        history.session,
        messages=list(result.messages),
        total_tokens=result.tokens_after,
        last_modified=datetime.now(UTC),
    )
    return session.to_bytes()


def _writable(target: Path) -> Path:
    """The regular file writing ``target`` replaces or creates (through symlinks), checked up front.

    Raises:
        TargetNotRegularFileError: ``target`` is a FIFO, device, folder, dangling link...
        HistoryFileError: ``target`` cannot be examined.
    """
    try:
        return write_target(target)
    except TargetNotRegularFileError:
        raise
    except OSError as exc:
        raise HistoryFileError(target, f"cannot write the result here: {exc.strerror or exc}") from exc


def _same_file(first: Path, second: Path) -> bool:
    try:
        return os.path.samefile(first, second)  # hard links and symlinks too
    except OSError:
        return first.resolve() == second.resolve()


def _target(path: Path, out: Path | None, in_place: bool, force: bool) -> Path | None:
    stdin = str(path) == "-"
    if in_place:
        if out is not None:
            raise click.UsageError("--out and --in-place exclude each other")
        if not stdin:  # standard input is refused once the history is read
            _writable(path)
        return path
    if out is None:
        return None
    real = _writable(out)
    if not stdin and _same_file(real, path):
        raise click.UsageError(
            "--out names the input file; pass --in-place to overwrite it (a numbered .bak is kept)"
        )
    if real.exists() and not force:
        raise click.UsageError(f"--out {out} exists; pass --force to overwrite it")
    return out


def _given(ctx: click.Context, *names: str) -> list[str]:
    """The options among ``names`` given on the command line (not from the environment)."""
    spelled = {param.name: param.opts[0] for param in ctx.command.params}
    return [
        spelled.get(name) or name
        for name in names
        if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE
    ]


@cli.command(
    epilog="""\b
Examples:
  harness compact history.json --dry-run
  harness compact history.json --stack "dedupe_file_reads clear_tool_results:keep_pairs=3,max_fraction=0.8" \\
      --window 128000 --out compacted.json
  harness compact session.json --config harness.toml --stack-name small --in-place
  harness compact history.json --json --dry-run | jq '.edits[].tokens_after'
  harness compact --session review --store sqlite:///sessions.db --dry-run
  harness compact --session review --stack "clear_tool_results:keep_pairs=2 sliding_window:keep_messages=8"
"""
)
@click.argument("path", type=HISTORY_PATH, required=False)
@click.option(
    "--session",
    "session_id",
    default=None,
    metavar="ID",
    help="Compact the stored session ID (from --store) instead of a file, and save it back.",
)
@store_options()
@history_format_option
@stack_option
@click.option(
    "--window",
    type=click.IntRange(min=1),
    default=None,
    help="Context window in tokens (for fraction triggers and targets); default: the file's own size.",
)
@click.option("--model", default=None, help="Model name that picks the tokenizer (default cl100k_base).")
@click.option(
    "--if-needed",
    is_flag=True,
    help="Let each capability's trigger decide (default: compact now, as a /compact command does).",
)
@click.option("--dry-run", is_flag=True, help="Show the manifest; write nothing.")
@click.option(
    "--out",
    "--output",
    "out",
    type=click.Path(dir_okay=True, path_type=Path),
    default=None,
    help="Write the result to this new file (atomically).",
)
@click.option(
    "--in-place",
    is_flag=True,
    help="Overwrite the input atomically (keeping its mode), keeping the previous version as <name>.bak.N.",
)
@click.option("--force", is_flag=True, help="Let --out overwrite an existing regular file.")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest as JSON.")
def compact(
    path: Path | None,
    session_id: str | None,
    store: str | None,
    session_dir: Path | None,
    history_format: FormatChoice,
    stack: str | None,
    config: Path | None,
    stack_name: str | None,
    window: int | None,
    model: str | None,
    if_needed: bool,
    dry_run: bool,
    out: Path | None,
    in_place: bool,
    force: bool,
    as_json: bool,
) -> None:
    """Apply a capability stack to a history or session file, or a stored session, and show each edit.

    The stack comes from --stack, else --config, else a harness.toml (or pyproject.toml
    [tool.harness]) found from the current folder upwards, else the built-in tiered stack
    (dedupe, clear, summarize, slide down to half the window). The manifest lists each
    edit: capability, messages and tokens before and after, tool calls cleared or
    dropped.

    PATH: nothing is written unless --out FILE (a new file; --force to replace one) or
    --in-place (the input; the previous version is kept as the next free <name>.bak.N,
    never overwriting an older backup) is given; --dry-run writes nothing in any case.
    Symlinks are written through; a FIFO, device or folder is refused. A session file
    stays a session file; a history read in another format (see --format) or from JSON
    Lines, gzip or - (standard input) is written in harness's wire format, so it needs
    --out, not --in-place.

    --session ID (instead of PATH): the session is loaded from --store URL (default:
    $HARNESS_STORE, else the default store of `harness sessions`), compacted, and saved
    back unless --dry-run: the replaced messages stay in the session's log (`harness
    sessions show ID --transcript`), the new view is a new revision. If another writer
    changed the session meanwhile, nothing is written (exit 4): run the command again.
    The manifest names the session and the store.

    Exits with 1 if the result breaks an invariant (nothing is written then), 2 on a bad
    file, target, session, store or stack, 3 if the result is still over --window (it is
    written all the same, with a warning), 4 if another writer changed the session
    (--session; nothing is written).
    """
    ctx = click.get_current_context()
    if session_id is not None:
        if path is not None:
            raise click.UsageError(
                "PATH and --session exclude each other: compact a file or a stored session"
            )
        refused = _given(ctx, "out", "in_place", "force", "history_format")
        if refused:
            raise click.UsageError(
                f"{', '.join(refused)}: not with --session (the session is saved back to its store)"
            )
        _compact_session(
            ctx,
            session_id,
            stack=stack,
            config=config,
            stack_name=stack_name,
            window=window,
            model=model,
            if_needed=if_needed,
            dry_run=dry_run,
            as_json=as_json,
        )
        return
    if path is None:
        raise click.UsageError("give a history file PATH, or --session ID to compact a stored session")
    stored = _given(ctx, "store", "session_dir")
    if stored:
        raise click.UsageError(f"{', '.join(stored)} needs --session ID")
    _compact_file(
        path,
        history_format=history_format,
        stack=stack,
        config=config,
        stack_name=stack_name,
        window=window,
        model=model,
        if_needed=if_needed,
        dry_run=dry_run,
        out=out,
        in_place=in_place,
        force=force,
        as_json=as_json,
    )


def _default_stack(stack: str | None, config: Path | None) -> str:
    """The built-in tiered stack of the installed capabilities; an error when it would be empty."""
    spec = format_stack(tiered_stack_entries(target_fraction=0.5))
    if not spec and stack is None and config is None and find_stack_file() is None:
        # a core-only install: without this, compact would run an empty stack and report nothing edited
        require_installed(TIERED_NAMES, what="the default stack (tiered)", source="harness compact")
    return spec


def _finish(report: Mapping[str, Any], result: CompactionResult, window: int, window_given: bool) -> None:
    """The warnings and the exit status every mode shares."""
    over = report["tokens_over_window"]
    if over:
        given = "" if window_given else " (the input's own size: no --window given)"
        click.echo(
            f"warning: the result is {over:,} tokens over --window {window:,}{given}: "
            f"{result.tokens_after:,} tokens",
            err=True,
        )
    if not report["invariants"]["clean"]:
        click.echo(
            "error: the compacted history breaks an invariant (see the manifest); nothing was written",
            err=True,
        )
        sys.exit(EXIT_PROBLEM)
    if over:
        sys.exit(EXIT_OVER_WINDOW)


def _compact_session(
    ctx: click.Context,
    session_id: str,
    *,
    stack: str | None,
    config: Path | None,
    stack_name: str | None,
    window: int | None,
    model: str | None,
    if_needed: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    url = store_url_for(ctx)
    with opened_store(url) as opened:
        _compact_in_store(
            opened,
            session_id,
            stack=stack,
            config=config,
            stack_name=stack_name,
            window=window,
            model=model,
            if_needed=if_needed,
            dry_run=dry_run,
            as_json=as_json,
        )


def _compact_in_store(
    opened: SessionStore,
    session_id: str,
    *,
    stack: str | None,
    config: Path | None,
    stack_name: str | None,
    window: int | None,
    model: str | None,
    if_needed: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    session = Session.open(opened, session_id)
    window_given = window is not None
    size = max(TokenCounter(model).count_messages(session.messages), 1)
    window = window or size
    capabilities, entries = resolve_cli_stack(
        stack, config, stack_name, default=_default_stack(stack, config), context_window=window
    )
    result = compact_stored_session(session, capabilities, model=model, window=window, force=not if_needed)
    report = _report(
        result,
        entries,
        messages_before=len(session.messages),
        persisted=True,
        source={"file": None, "format": "session", "session": session_id, "store": opened.url},
        window=window,
        dry_run=dry_run,
        written=None,
    )
    report["revision_before"] = session.revision
    report["revision"] = session.revision
    if not dry_run and report["invariants"]["clean"] and result.events:
        try:
            report["revision"] = save_compacted(session, result)
        except SessionConflictError as exc:
            click.echo(
                f"error: {type(exc).__name__}: {exc}; nothing was written: run the command again",
                err=True,
            )
            sys.exit(EXIT_CONFLICT)
        report["written"] = f"{opened.url} session {session_id} revision {report['revision']}"
    if as_json:
        echo_json(report)
    else:
        _print(report)
        if report["written"]:
            console().print(
                f"saved session {escaped(session_id)} at revision {report['revision']}; "
                "the replaced messages stay in its log "
                f"(harness sessions show {escaped(session_id)} --transcript)"
            )
        elif dry_run:
            console().print("dry run: nothing written")
        elif not result.events:
            console().print("nothing to save: the stack changed nothing")
    _finish(report, result, window, window_given)


def _compact_file(
    path: Path,
    *,
    history_format: FormatChoice,
    stack: str | None,
    config: Path | None,
    stack_name: str | None,
    window: int | None,
    model: str | None,
    if_needed: bool,
    dry_run: bool,
    out: Path | None,
    in_place: bool,
    force: bool,
    as_json: bool,
) -> None:
    target = _target(path, out, in_place, force)
    window_given = window is not None
    history = read_history_file(path, format=history_format)
    if in_place and history.from_stdin:
        raise click.UsageError("--in-place cannot replace standard input; write the result with --out FILE")
    if in_place and history.kind == "history" and not history.rewritable:
        raise click.UsageError(
            f"--in-place would replace {path} ({history.described}) with harness's wire format; "
            "write the result with --out FILE instead"
        )
    counter = TokenCounter(model)
    size = counter.count_messages(history.messages)
    window = window or max(size, 1)
    capabilities, entries = resolve_cli_stack(
        stack, config, stack_name, default=_default_stack(stack, config), context_window=window
    )
    result = compact_sync(
        history.messages, capabilities, model_name=model, context_window=window, force=not if_needed
    )
    report = compact_report(history, result, entries, window=window, dry_run=dry_run, written=None)
    clean = report["invariants"]["clean"]
    through: Path | None = None
    if target is not None and not dry_run and clean:
        try:
            written = atomic_write_bytes(
                target,
                _serialise(history, result),
                backup="numbered" if in_place else "none",
                new_file_mode="umask",
            )
        except TargetNotRegularFileError:
            raise
        except OSError as exc:
            raise HistoryFileError(target, f"cannot write the result: {exc.strerror or exc}") from exc
        report["written"] = str(target)
        report["backup"] = None if written.backup is None else str(written.backup)
        through = written.path if written.path != target else None
    if as_json:
        echo_json(report)
    else:
        _print(report)
        if report["written"]:
            line = f"wrote {escaped(report['written'])}"
            if through is not None:
                line += f" (through the symlink, to {escaped(through)})"
            if report["backup"]:
                line += f"; previous version kept as {escaped(report['backup'])}"
            console().print(line)
        elif dry_run:
            console().print("dry run: nothing written")
        elif target is None:
            console().print("nothing written: pass --out FILE or --in-place to save the result")
    _finish(report, result, window, window_given)
