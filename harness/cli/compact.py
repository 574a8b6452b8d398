"""``harness compact``: apply a capability stack to a history or session file."""

from __future__ import annotations

__all__ = ["compact", "compact_report"]

import os
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import click
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
from harness.config import StackEntry, format_stack
from harness.config.stacks import tiered_stack_entries
from harness.errors import HistoryFileError, TargetNotRegularFileError
from harness.history import check_invariants
from harness.run.compaction import CompactionResult, compact_sync
from harness.session.files import atomic_write_bytes, write_target
from harness.tokens import TokenCounter
from harness.wire import FormatChoice, dump_messages


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
    kept, filled in by the command).
    """
    violations = check_invariants(result.messages, persisted=history.kind == "session")
    return {
        "file": str(history.path),
        "format": history.kind,
        "stack": format_stack(entries),
        "window": window,
        "dry_run": dry_run,
        "written": None if written is None else str(written),
        "backup": None,
        "messages_before": len(history.messages),
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
        f"{escaped(report['file'])}: {report['messages_before']} → {report['messages_after']} messages, "
        f"{report['tokens_before']:,} → {report['tokens_after']:,} tokens (window {report['window']:,}); "
        f"invariants: {'[green]clean[/green]' if clean else '[red]BROKEN[/red]'}"
    )


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


@cli.command(
    epilog="""\b
Examples:
  harness compact history.json --dry-run
  harness compact history.json --stack "dedupe_file_reads clear_tool_results:keep_pairs=3,max_fraction=0.8" \\
      --window 128000 --out compacted.json
  harness compact session.json --config harness.toml --stack-name small --in-place
  harness compact history.json --json --dry-run | jq '.edits[].tokens_after'
"""
)
@click.argument("path", type=HISTORY_PATH)
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
    path: Path,
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
    """Apply a capability stack to a history or session file and show each edit.

    The stack comes from --stack, else --config, else a harness.toml (or pyproject.toml
    [tool.harness]) found from the current folder upwards, else the built-in tiered stack
    (dedupe, clear, summarize, slide down to half the window). The manifest lists each
    edit: capability, messages and tokens before and after, tool calls cleared or
    dropped.

    Nothing is written unless --out FILE (a new file; --force to replace one) or
    --in-place (the input; the previous version is kept as the next free <name>.bak.N,
    never overwriting an older backup) is given; --dry-run writes nothing in any case.
    Symlinks are written through; a FIFO, device or folder is refused. A session file
    stays a session file; a history read in another format (see --format) or from JSON
    Lines, gzip or - (standard input) is written in harness's wire format, so it needs
    --out, not --in-place. Exits with 1 if the result breaks an invariant (nothing is
    written then), 2 on a bad file, target or stack, 3 if the result is still over
    --window (it is written all the same, with a warning).
    """
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
    default = format_stack(tiered_stack_entries(target_fraction=0.5))
    capabilities, entries = resolve_cli_stack(
        stack, config, stack_name, default=default, context_window=window
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
    over = report["tokens_over_window"]
    if over:
        given = "" if window_given else " (the input's own size: no --window given)"
        click.echo(
            f"warning: the result is {over:,} tokens over --window {window:,}{given}: "
            f"{result.tokens_after:,} tokens",
            err=True,
        )
    if not clean:
        click.echo(
            "error: the compacted history breaks an invariant (see the manifest); nothing was written",
            err=True,
        )
        sys.exit(EXIT_PROBLEM)
    if over:
        sys.exit(EXIT_OVER_WINDOW)
