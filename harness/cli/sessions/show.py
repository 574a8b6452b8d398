"""``harness sessions show`` (the view, or with ``--transcript`` the raw log) and ``search``."""

from __future__ import annotations

__all__ = ["search", "show"]

import json
from collections import Counter
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from harness.cli._app import console, escaped
from harness.cli._json import echo_json
from harness.cli.sessions.files import session_file
from harness.cli.sessions.group import sessions, wants_json
from harness.cli.sessions.options import opened_store, store_options, store_url_for
from harness.cli.sessions.render import decode_bodies, head_json, log_marks, message_lines, plural, when
from harness.errors import SessionStoreError
from harness.session.records import EditRecord, LedgerEntry, LogEntry, SessionHead, StoredSession
from harness.session.store import SessionStore
from harness.session.tracking import message_ids


def _wire(store: SessionStore, session_id: str, body: str) -> Any:
    try:
        return json.loads(body)
    except ValueError as exc:
        raise SessionStoreError(
            store.url, f"a stored message is not JSON: {exc}", session_id=session_id
        ) from exc


def _edit_json(edit: EditRecord) -> dict[str, Any]:
    return {
        "index": edit.index,
        "revision": edit.revision,
        "created_at": edit.created_at.isoformat(),
        "view_start": edit.view_start,
        "replaced": list(edit.replaced),
        "overlays": [{"position": position, "source": source} for position, source in edit.overlays],
        "events": [dict(event) for event in edit.events],
    }


def _ledger_json(entry: LedgerEntry) -> dict[str, Any]:
    return {
        "tool_call_id": entry.tool_call_id,
        "tool_name": entry.tool_name,
        "status": entry.status,
        "started_at": entry.started_at.isoformat(),
        "ended_at": None if entry.ended_at is None else entry.ended_at.isoformat(),
        "error": entry.error,
    }


def _header(out: Console, url: str, head: SessionHead, ledger: tuple[LedgerEntry, ...]) -> None:
    out.print(
        f"[bold]session {escaped(head.session_id)}[/bold] · {escaped(url)} · revision {head.revision} · "
        f"{head.view_length} messages in view, log {head.log_length}"
        f"{' (pruned)' if head.log_pruned else ''} · model {escaped(head.current_model or '-')} · "
        f"last modified {when(head.last_modified)}"
    )
    if head.forked_from is not None:
        out.print(f"forked from {escaped(head.forked_from)} at log length {head.forked_at}")
    if ledger:
        counts = Counter(entry.status for entry in ledger)
        out.print("tool calls: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())))


def _print_message(out: Console, label: str, lines: list[str], note: str = "") -> None:
    pad = " " * len(label)
    for index, line in enumerate(lines):
        prefix = label if index == 0 else pad
        out.print(f"{prefix}{note if index == 0 else ''}{escaped(line)}", highlight=False)


@sessions.command(
    epilog="""\b
Examples:
  harness sessions show review
  harness sessions show review --transcript
  harness sessions show review --json | jq '.view | length'
""",
)
@click.argument("session_id")
@click.option(
    "--transcript",
    is_flag=True,
    help="Print the raw log (every message as first written), marking what each compaction replaced.",
)
@click.option("--full", is_flag=True, help="Print whole messages (default: each part clipped to one line).")
@click.option(
    "--json", "as_json", is_flag=True, help="Print JSON: the head, and the view or the log with the edits."
)
@store_options(dir_alias=True)
@click.pass_context
def show(
    ctx: click.Context,
    session_id: str,
    transcript: bool,
    full: bool,
    as_json: bool,
    store: str | None,
    session_dir: Path | None,
) -> None:
    """Print a session: the view (what the model sees next), or with --transcript the raw log.

    In the view, an overlay (a placeholder or a summary a capability wrote) says which log
    message it was made from. In the transcript, a message a compaction took out of the
    view is followed by a dim line naming the capability and the revision, e.g.
    "replaced by clear_tool_results at revision 42".
    """
    width = None if full else 160
    with opened_store(store_url_for(ctx), read_only=True) as opened:
        stored = opened.load(session_id)
        path = session_file(opened, session_id)
        if transcript:
            log = opened.read_log(session_id)
            edits = opened.edits(session_id)
            _show_transcript(opened, stored, log, edits, path, wants_json(ctx, as_json), width)
        else:
            _show_view(opened, stored, path, wants_json(ctx, as_json), width)


def _show_view(
    store: SessionStore, stored: StoredSession, path: Path | None, as_json: bool, width: int | None
) -> None:
    head = stored.head
    sid = head.session_id
    if as_json:
        echo_json(
            {
                "store": store.url,
                "session": head_json(head, path=None if path is None else str(path)),
                "view": [
                    {
                        "position": position,
                        "seq": entry.seq,
                        "overlay": entry.seq is None,
                        "source": entry.source,
                        "message": _wire(store, sid, body),
                    }
                    for position, (entry, body) in enumerate(stored.view)
                ],
                "thoughts": list(stored.thoughts),
                "ledger": [_ledger_json(entry) for entry in stored.ledger],
            }
        )
        return
    messages = decode_bodies(store.url, sid, [body for _, body in stored.view])
    out = console()
    _header(out, store.url, head, stored.ledger)
    digits = len(str(max(len(messages) - 1, 0)))
    for position, ((entry, _), message) in enumerate(zip(stored.view, messages, strict=True)):
        note = ""
        if entry.seq is None:
            origin = f" of log #{entry.source}" if entry.source is not None else ""
            note = f"[cyan]\\[overlay{origin}][/cyan] "
        _print_message(
            out, f"{position:>{digits}}  {message.kind:<8}  ", message_lines(message, width=width), note
        )


def _show_transcript(
    store: SessionStore,
    stored: StoredSession,
    log: list[LogEntry],
    edits: list[EditRecord],
    path: Path | None,
    as_json: bool,
    width: int | None,
) -> None:
    head = stored.head
    sid = head.session_id
    messages = decode_bodies(store.url, sid, [entry.body for entry in log])
    marks = log_marks(edits, {entry.seq: message_ids(m) for entry, m in zip(log, messages, strict=True)})
    in_view = {entry.seq for entry, _ in stored.view if entry.seq is not None}
    if as_json:
        echo_json(
            {
                "store": store.url,
                "session": head_json(head, path=None if path is None else str(path)),
                "log": [
                    {
                        "seq": entry.seq,
                        "in_view": entry.seq in in_view,
                        "marks": [mark.as_json() for mark in marks.get(entry.seq, [])],
                        "message": _wire(store, sid, entry.body),
                    }
                    for entry in log
                ],
                "edits": [_edit_json(edit) for edit in edits],
            }
        )
        return
    out = console()
    _header(out, store.url, head, stored.ledger)
    out.print(f"raw log: {len(log)} messages, {plural(len(edits), 'edit')} over it")
    digits = len(str(max(head.log_length - 1, 0)))
    expected = 0
    for entry, message in zip(log, messages, strict=True):
        if entry.seq > expected:
            gap = f"#{expected}" if entry.seq - expected == 1 else f"#{expected}-#{entry.seq - 1}"
            out.print(f"[dim]{gap}: dropped by prune --drop-log[/dim]")
        expected = entry.seq + 1
        label = f"#{entry.seq:<{digits}}  {message.kind:<8}  "
        _print_message(out, label, message_lines(message, width=width))
        for mark in marks.get(entry.seq, []):
            out.print(f"[dim]{' ' * len(label)}{escaped(mark.describe())}[/dim]", highlight=False)
    if head.log_length > expected:
        gap = f"#{expected}" if head.log_length - expected == 1 else f"#{expected}-#{head.log_length - 1}"
        out.print(f"[dim]{gap}: dropped by prune --drop-log[/dim]")


@sessions.command(
    epilog="""\b
Examples:
  harness sessions search "config parser"
  harness sessions search read_file --session review --limit 5 --json
""",
)
@click.argument("query")
@click.option("--session", "session_id", default=None, metavar="ID", help="Search this session only.")
@click.option(
    "--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Most hits to print."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON: the hits, best first.")
@store_options(dir_alias=True)
@click.pass_context
def search(
    ctx: click.Context,
    query: str,
    session_id: str | None,
    limit: int,
    as_json: bool,
    store: str | None,
    session_dir: Path | None,
) -> None:
    """Search the raw logs (every message as first written, compacted or not) for QUERY.

    SQLite uses its full-text index (every word must appear; a trailing * matches a
    prefix), PostgreSQL its full-text search, a folder store a plain scan.
    """
    with opened_store(store_url_for(ctx), read_only=True) as opened:
        if session_id is not None:
            opened.head(session_id)  # a missing session is an error, not "no hits"
        hits = opened.search(query, session_id=session_id, limit=limit)
        url = opened.url
    if wants_json(ctx, as_json):
        echo_json(
            {
                "store": url,
                "query": query,
                "hits": [
                    {"session_id": hit.session_id, "seq": hit.seq, "snippet": hit.snippet, "score": hit.score}
                    for hit in hits
                ],
            }
        )
        return
    out = console()
    if not hits:
        out.print(f"[dim]nothing matches {escaped(query)!s} in {escaped(url)}[/dim]")
        return
    table = Table("session", "log #", "text")
    for hit in hits:
        table.add_row(escaped(hit.session_id), str(hit.seq), escaped(hit.snippet))
    out.print(table)
