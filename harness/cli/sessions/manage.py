"""``harness sessions fork``, ``rm`` and ``prune``: copying and removing stored sessions."""

from __future__ import annotations

__all__ = ["fork", "parse_when", "prune", "rm"]

import re
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click

from harness.cli._app import EXIT_PROBLEM, console, escaped
from harness.cli._json import echo_json
from harness.cli.sessions.group import sessions, wants_json
from harness.cli.sessions.options import (
    check_session_name,
    opened_store,
    store_options,
    store_url_for,
    with_note,
)
from harness.cli.sessions.render import head_json, plural, when
from harness.errors import SessionNotFoundError
from harness.session.records import PruneResult, SessionHead
from harness.session.store import SessionStore

_DURATION = re.compile(r"(?:\d+\s*[smhdw]\s*)+", re.IGNORECASE)
_DURATION_PART = re.compile(r"(\d+)\s*([smhdw])", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def parse_when(text: str, *, now: datetime | None = None) -> datetime:
    """A ``--newer-than`` value as an aware datetime.

    ``2026-11-01`` or ``2026-11-01T12:00`` (local time unless it names a zone), or a
    duration back from now: ``30d``, ``12h``, ``90m``, ``2w``, ``45s``, or a sum such as ``1d12h``.

    Raises:
        ValueError: Neither a date nor a duration.
    """
    value = text.strip()
    moment = now if now is not None else datetime.now(UTC)
    if _DURATION.fullmatch(value):
        seconds = sum(int(n) * _UNIT_SECONDS[unit.lower()] for n, unit in _DURATION_PART.findall(value))
        return moment - timedelta(seconds=seconds)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"{text!r} is neither a date (2026-11-01, 2026-11-01T12:00) nor a duration (30d, 12h, 2w, 90m)"
        ) from None
    return parsed if parsed.tzinfo is not None else parsed.astimezone()


def _confirm(question: str) -> bool:
    """Ask on stderr; end of input or Ctrl-C is no."""
    try:
        return click.confirm(question, default=False, err=True)
    except click.Abort:
        click.echo(err=True)
        return False


# ---------------------------------------------------------------------------------- fork


@sessions.command(
    epilog="""\b
Examples:
  harness sessions fork review
  harness sessions fork review --as review-b && harness run --resume review-b "Try the other way."
""",
)
@click.argument("session_id")
@click.option("--as", "new_id", default=None, metavar="NEW", help="The copy's id (default: a new random id).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: the copy's head.")
@store_options(dir_alias=True)
@click.pass_context
def fork(
    ctx: click.Context,
    session_id: str,
    new_id: str | None,
    as_json: bool,
    store: str | None,
    session_dir: Path | None,
) -> None:
    """Copy a session under a new id: log, view, edits, thoughts and tool ledger.

    The copy records where it came from (forked from, at which log length) and goes its
    own way: runs on either never touch the other.
    """
    target = check_session_name(new_id, "--as") if new_id is not None else uuid.uuid4().hex
    with opened_store(store_url_for(ctx), existing=True) as opened:
        head = opened.fork(session_id, target)
        url = opened.url
    if wants_json(ctx, as_json):
        echo_json({"store": url, "session": head_json(head)})
        return
    console().print(
        f"forked {escaped(session_id)} as {escaped(head.session_id)} ({head.view_length} messages in view, "
        f"log {head.log_length}); continue it with: harness run --resume {escaped(head.session_id)}"
    )


# ------------------------------------------------------------------------------------ rm


@sessions.command(
    epilog="""\b
Examples:
  harness sessions rm review
  harness sessions rm old-1 old-2 --yes
""",
)
@click.argument("session_ids", nargs=-1, required=True, metavar="ID...")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: the deleted ids.")
@store_options(dir_alias=True)
@click.pass_context
def rm(
    ctx: click.Context,
    session_ids: tuple[str, ...],
    yes: bool,
    as_json: bool,
    store: str | None,
    session_dir: Path | None,
) -> None:
    """Delete sessions with their raw logs (asks first unless --yes).

    Every ID must exist: one that does not is an error naming it, and nothing is deleted.
    """
    ids = list(dict.fromkeys(session_ids))
    with opened_store(store_url_for(ctx), existing=True) as opened:
        heads: list[SessionHead] = []
        for sid in ids:
            try:
                heads.append(opened.head(sid))
            except SessionNotFoundError as exc:
                raise with_note(exc, "nothing was deleted") from exc
        listed = ", ".join(f"{h.session_id} ({h.view_length} messages)" for h in heads)
        if not yes and not _confirm(f"delete {plural(len(heads), 'session')} from {opened.url}: {listed}?"):
            click.echo("nothing deleted", err=True)
            sys.exit(EXIT_PROBLEM)
        deleted = [sid for sid in ids if opened.delete(sid)]
        url = opened.url
    if wants_json(ctx, as_json):
        echo_json({"store": url, "deleted": deleted})
        return
    console().print(f"deleted {plural(len(deleted), 'session')}: {escaped(', '.join(deleted))}")


# --------------------------------------------------------------------------------- prune


def _when_option(ctx: click.Context, param: click.Parameter, value: str | None) -> datetime | None:
    """The ``--newer-than`` callback: the value as an aware datetime."""
    if value is None:
        return None
    try:
        return parse_when(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


def _plan_words(result: PruneResult, heads: dict[str, SessionHead]) -> list[str]:
    lines: list[str] = []
    for sid in result.deleted:
        head = heads.get(sid)
        extra = f" (last modified {when(head.last_modified)}, {head.view_length} messages)" if head else ""
        lines.append(f"  delete {sid}{extra}")
    for sid in result.trimmed:
        head = heads.get(sid)
        extra = f" (log {head.log_length}, view {head.view_length})" if head else ""
        lines.append(f"  drop the raw log of {sid} beyond its view{extra}")
    return lines


def _execute(
    store: SessionStore, plan: PruneResult, *, keep: int | None, newer: datetime | None, drop_log: bool
) -> PruneResult:
    """Do what the confirmed ``plan`` listed: delete exactly those sessions, or trim their logs."""
    if drop_log:
        return store.prune(keep_last=keep, newer_than=newer, drop_log=True)
    return PruneResult(deleted=tuple(sid for sid in plan.deleted if store.delete(sid)))


@sessions.command(
    epilog="""\b
Examples:
  harness sessions prune --keep 20 --dry-run
  harness sessions prune --newer-than 30d --yes
  harness sessions prune --keep 5 --newer-than 2026-11-01 --drop-log
""",
)
@click.option(
    "--keep",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="Keep the N most recently modified sessions.",
)
@click.option(
    "--newer-than",
    "newer_than",
    default=None,
    metavar="DATE|DURATION",
    callback=_when_option,
    help=(
        "Keep the sessions modified after this date (2026-11-01, local time) or within this "
        "duration (30d, 12h, 2w)."
    ),
)
@click.option(
    "--drop-log",
    is_flag=True,
    help="Keep the other sessions too, but drop their raw-log messages the view no longer shows.",
)
@click.option("--dry-run", is_flag=True, help="Print what would be pruned; change nothing.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: what was (or would be) pruned.")
@store_options(dir_alias=True)
@click.pass_context
def prune(
    ctx: click.Context,
    keep: int | None,
    newer_than: datetime | None,
    drop_log: bool,
    dry_run: bool,
    yes: bool,
    as_json: bool,
    store: str | None,
    session_dir: Path | None,
) -> None:
    """Delete old sessions: all but the --keep N newest and those --newer-than a date.

    With both limits, a session either one keeps is kept. With --drop-log the old sessions
    stay listed and resumable, but their raw log loses the messages their view no longer
    shows (what compaction replaced). Refuses to run with neither limit.
    """
    if keep is None and newer_than is None:
        raise click.UsageError(
            "give --keep N, --newer-than DATE|DURATION or both: prune never guesses what to remove"
        )
    structured = wants_json(ctx, as_json)
    with opened_store(store_url_for(ctx), existing=True) as opened:
        url = opened.url
        heads = {head.session_id: head for head in opened.list_sessions()}
        plan = opened.prune(keep_last=keep, newer_than=newer_than, drop_log=drop_log, dry_run=True)
        acted = bool(plan.deleted or plan.trimmed)
        result = plan
        if acted and not dry_run:
            if not yes:
                if structured:
                    raise click.UsageError("--json prints no question: pass --yes (or --dry-run)")
                click.echo(f"prune {url}:", err=True)
                for line in _plan_words(plan, heads):
                    click.echo(line, err=True)
                if not _confirm("go ahead?"):
                    click.echo("nothing pruned", err=True)
                    sys.exit(EXIT_PROBLEM)
                result = _execute(opened, plan, keep=keep, newer=newer_than, drop_log=drop_log)
            else:
                result = opened.prune(keep_last=keep, newer_than=newer_than, drop_log=drop_log)
    if structured:
        echo_json(
            {
                "store": url,
                "dry_run": dry_run,
                "deleted": list(result.deleted),
                "trimmed": list(result.trimmed),
                "log_messages_dropped": result.log_messages_dropped,
            }
        )
        return
    out = console()
    if not acted:
        out.print(f"nothing to prune in {escaped(url)}")
    elif dry_run:
        out.print(f"would prune in {escaped(url)}:")
        for line in _plan_words(plan, heads):
            out.print(escaped(line), highlight=False)
    else:
        if result.deleted:
            out.print(
                f"deleted {plural(len(result.deleted), 'session')}: {escaped(', '.join(result.deleted))}"
            )
        if result.trimmed:
            out.print(
                f"dropped {plural(result.log_messages_dropped, 'raw-log message')} "
                f"of {plural(len(result.trimmed), 'session')}: {escaped(', '.join(result.trimmed))}"
            )
