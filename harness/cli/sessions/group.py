"""``harness sessions``: the group, and ``list`` (what ``harness sessions`` alone runs)."""

from __future__ import annotations

__all__ = ["list_command", "sessions", "wants_json"]

from pathlib import Path

import click
from rich.table import Table

from harness.cli._app import cli, console, error_console, escaped
from harness.cli._json import echo_json
from harness.cli.sessions.files import session_file, store_problems
from harness.cli.sessions.options import (
    default_store_missing,
    legacy_session_files,
    opened_store,
    store_options,
    store_url_for,
)
from harness.cli.sessions.render import first_prompt, head_json, plural, when
from harness.session import SessionHead


def wants_json(ctx: click.Context, as_json: bool) -> bool:
    """``--json`` on the command, or on ``harness sessions`` before it."""
    parent = ctx.parent
    return as_json or bool(parent is not None and parent.params.get("as_json"))


@cli.group(
    invoke_without_command=True,
    epilog="""\b
Examples:
  harness sessions                                   # list (the default store)
  harness sessions list --json | jq -r '.sessions[0].session_id'
  harness sessions show review --transcript          # the raw log, with what compaction replaced
  harness sessions fork review --as review-b
  harness sessions search "config parser"
  harness sessions prune --keep 20 --drop-log --dry-run
  harness sessions export review --to review.json    # today's session-file format
  harness sessions import ~/.local/share/harness/sessions
  harness sessions --store postgresql://me@db/harness list
""",
)
@store_options(dir_alias=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (without a command: the list).")
@click.pass_context
def sessions(ctx: click.Context, store: str | None, session_dir: Path | None, as_json: bool) -> None:
    """Stored sessions: list, show, search, fork, rm, prune, export and import them.

    Without a command, list them (as earlier releases did). Every command takes --store
    (or --session-dir for a folder of JSON session files) before or after its name.
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_command, as_json=as_json)


@sessions.command(
    "list",
    epilog="""\b
Examples:
  harness sessions list
  harness sessions list --store sqlite:///team.db --json
""",
)
@store_options(dir_alias=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON: the sessions (and unreadable files).")
@click.pass_context
def list_command(
    ctx: click.Context, store: str | None = None, session_dir: Path | None = None, as_json: bool = False
) -> None:
    """List the sessions of the store, most recently modified first.

    Each row: the id, the task's first prompt (clipped), when it was last written, the
    messages the model sees next (the view), the raw log's length, the revision, the model,
    and the session it was forked from. A folder store also lists the files it cannot read.

    The store is opened read-only: a store given with --store that does not exist is an
    error, and nothing is created (the default store not created yet lists no sessions).
    """
    url = store_url_for(ctx)
    rows: list[tuple[SessionHead, Path | None]] = []
    problems: list[tuple[Path, str]] = []
    shown_url = url
    if not default_store_missing(url):  # a new user's first command: nothing stored yet, nothing created
        with opened_store(url, read_only=True) as opened:
            rows = [(head, session_file(opened, head.session_id)) for head in opened.list_sessions()]
            problems = store_problems(opened)
            shown_url = opened.url
    legacy = legacy_session_files(url)
    if wants_json(ctx, as_json):
        echo_json(
            {
                "store": shown_url,
                "sessions": [
                    head_json(head, path=None if path is None else str(path)) for head, path in rows
                ],
                "problems": [{"path": str(path), "reason": reason} for path, reason in problems],
            }
        )
    else:
        out = console()
        if not rows:
            out.print(f"[dim]no sessions in {escaped(shown_url)}[/dim]")
        else:
            table = Table(
                "session",
                "first prompt",
                "last modified",
                "messages",
                "log",
                "revision",
                "model",
                "forked from",
            )
            for head, _ in rows:
                table.add_row(
                    escaped(head.session_id),
                    escaped(first_prompt(head) or "-"),
                    when(head.last_modified),
                    str(head.view_length),
                    f"{head.log_length}{' (pruned)' if head.log_pruned else ''}",
                    str(head.revision),
                    escaped(head.current_model or "-"),
                    escaped(head.forked_from or "-"),
                )
            out.print(table)
        for path, reason in problems:
            out.print(f"[yellow]unreadable:[/yellow] {escaped(path)}: {escaped(reason)}")
    if legacy is not None:
        folder, count = legacy
        error_console().print(
            f"note: {plural(count, 'session file')} of an earlier release in {escaped(folder)}; "
            f"import them with: harness sessions import {escaped(folder)}"
        )
