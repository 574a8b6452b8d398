"""``harness sessions export`` and ``import``: sessions between stores, and to and from session files.

Between stores the copy is lossless (log, view, edits, thoughts, ledger, revision) through
:func:`harness.session.transfer.copy_session`. A ``.json`` file is today's session-file
format (:meth:`harness.session.Session.to_bytes`): it holds the view only, so exporting to
one keeps what the model sees and not the raw log; importing one makes a session whose log
is the file's messages.

Nothing is overwritten: a target id that exists is an error naming it before anything is
copied, unless ``--replace`` (or ``--as NEW`` for one session).
"""

from __future__ import annotations

__all__ = ["export", "import_command", "parse_target"]

import re
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Literal

import attrs
import click

from harness.cli._app import console, escaped
from harness.cli._json import echo_json
from harness.cli.sessions.group import sessions, wants_json
from harness.cli.sessions.options import (
    check_session_name,
    opened_store,
    store_options,
    store_url_for,
    with_note,
)
from harness.cli.sessions.render import plural
from harness.errors import SessionConflictError, SessionNotFoundError, SessionSaveError
from harness.session import Session
from harness.session.records import Checkpoint, LogEntry, SessionHead, ViewEntry
from harness.session.store import SessionStore
from harness.session.transfer import copy_all, copy_session
from harness.stores import store_path, store_url

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")
_SQLITE_SUFFIXES = frozenset({".db", ".sqlite", ".sqlite3"})


def parse_target(text: str) -> tuple[Literal["file", "store"], str]:
    """What ``--to`` or an import source names: ``("file", path)`` or ``("store", url)``.

    A URL is taken as it is; a path ending in ``.json`` is a session file; in ``.db``,
    ``.sqlite`` or ``.sqlite3`` a SQLite store; any other path a folder store (``file:``).
    """
    value = text.strip()
    if _URL.match(value) and not Path(value).exists():
        return "store", value
    path = Path(value)
    suffix = path.suffix.lower()
    if suffix == ".json":
        return "file", str(path)
    if suffix in _SQLITE_SUFFIXES:
        return "store", store_url(path, "sqlite")
    return "store", store_url(path, "file")


def _existing(text: str, url: str, hint: str) -> str:
    """``url`` when it names a store that exists: reading must never create an empty SQLite file or folder."""
    scheme = url.split(":", 1)[0].lower()
    if scheme in ("sqlite", "file") and not url.rstrip("/").endswith(":memory:"):
        path = store_path(url)
        if not path.exists():
            raise click.BadParameter(f"{text!r}: there is no store at {path}", param_hint=hint)
    return url


@attrs.frozen
class _Item:
    """One session to copy: from a store (``source``) or a session file (``file``), to ``target_id``."""

    source_id: str
    target_id: str
    source: SessionStore | None = None
    file: Session | None = None


def _check_free(target: SessionStore, items: list[_Item], *, replace: bool, nothing: str) -> None:
    if replace:
        return
    for item in items:
        try:
            head = target.head(item.target_id)
        except SessionNotFoundError:
            continue
        error = SessionConflictError(target.url, item.target_id, 0, head.revision)
        raise with_note(error, f"{nothing} (pass --as NEW for one session, or --replace)")


def _copy(target: SessionStore, items: list[_Item], *, replace: bool) -> Iterator[tuple[_Item, SessionHead]]:
    for item in items:
        if replace:
            target.delete(item.target_id)
        if item.file is not None:
            yield item, _commit_file_session(target, item.file, item.target_id)
        else:
            assert item.source is not None
            new_id = None if item.target_id == item.source_id else item.target_id
            yield item, copy_session(item.source, target, item.source_id, new_session_id=new_id)


def _commit_file_session(target: SessionStore, session: Session, session_id: str) -> SessionHead:
    """Write a session file's session into ``target`` as revision 1: its messages are the log and the view."""
    from harness.session.tracking import encode_message

    appended: list[LogEntry] = []
    for seq, message in enumerate(session.messages):
        body, text = encode_message(message)
        appended.append(LogEntry(seq, body, text))
    count = len(appended)
    head = attrs.evolve(
        session.head_record(), session_id=session_id, revision=1, log_length=count, view_length=count
    )
    target.commit(
        Checkpoint(
            head=head,
            base_revision=0,
            appended=tuple(appended),
            view_start=0,
            view_tail=tuple(ViewEntry(seq) for seq in range(count)),
            thoughts=tuple(session.thoughts),
        )
    )
    return target.head(session_id)


def _result_json(item: _Item, head: SessionHead) -> dict[str, Any]:
    return {
        "session_id": item.source_id,
        "as": head.session_id,
        "messages": head.view_length,
        "log_length": head.log_length,
        "revision": head.revision,
    }


def _report(
    ctx: click.Context,
    as_json: bool,
    source: str,
    target: str,
    done: list[tuple[_Item, SessionHead]],
    verb: str,
) -> None:
    if wants_json(ctx, as_json):
        echo_json(
            {"from": source, "to": target, "sessions": [_result_json(item, head) for item, head in done]}
        )
        return
    out = console()
    for item, head in done:
        renamed = f" as {escaped(head.session_id)}" if head.session_id != item.source_id else ""
        out.print(
            f"{verb} {escaped(item.source_id)}{renamed}: "
            f"{head.view_length} messages in view, log {head.log_length}"
        )
    out.print(f"[dim]{plural(len(done), 'session')} from {escaped(source)} to {escaped(target)}[/dim]")


# -------------------------------------------------------------------------------- export


@sessions.command(
    epilog="""\b
Examples:
  harness sessions export review --to review.json              # today's session-file format (the view)
  harness sessions export review old-1 --to ./backup           # a folder store: files plus raw logs
  harness sessions export review --to postgresql://me@db/harness
""",
)
@click.argument("session_ids", nargs=-1, required=True, metavar="ID...")
@click.option(
    "--to",
    "destination",
    required=True,
    metavar="URL|DIR|FILE.json",
    help="A store URL, a folder (a file: store; .db: SQLite) or one session file (.json).",
)
@click.option("--as", "new_id", default=None, metavar="NEW", help="The id in the target (one session only).")
@click.option("--replace", is_flag=True, help="Overwrite a session (or file) that exists in the target.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: what was copied.")
@store_options(dir_alias=True)
@click.pass_context
def export(
    ctx: click.Context,
    session_ids: tuple[str, ...],
    destination: str,
    new_id: str | None,
    replace: bool,
    as_json: bool,
    store: str | None,
    session_dir: Path | None,
) -> None:
    """Copy sessions from the store to another store, a folder, or a session file.

    Store to store is lossless: the raw log, the view, every compaction edit, the
    thoughts, the tool ledger and the revision. A .json file is the session-file format
    of earlier releases and holds the view only.
    """
    ids = list(dict.fromkeys(session_ids))
    if new_id is not None:
        check_session_name(new_id, "--as")
        if len(ids) != 1:
            raise click.UsageError("--as names the copy of one session; give one ID")
    kind, where = parse_target(destination)
    with ExitStack() as stack:
        source = stack.enter_context(opened_store(store_url_for(ctx), read_only=True))
        if kind == "file":
            if len(ids) != 1:
                raise click.UsageError(
                    f"{where} is one session file: export one ID to it, or several to a folder"
                )
            done = [_export_file(source, ids[0], Path(where), new_id, replace=replace)]
            _report(ctx, as_json, source.url, where, done, "exported")
            return
        target = stack.enter_context(opened_store(where))
        for sid in ids:
            source.head(sid)  # a missing id is an error before anything is copied
        items = [_Item(sid, new_id if new_id is not None else sid, source=source) for sid in ids]
        _check_free(target, items, replace=replace, nothing="nothing was exported")
        done = list(_copy(target, items, replace=replace))
        _report(ctx, as_json, source.url, target.url, done, "exported")


def _export_file(
    source: SessionStore, session_id: str, path: Path, new_id: str | None, *, replace: bool
) -> tuple[_Item, SessionHead]:
    from harness.session.files import atomic_write_bytes

    if path.exists() and not replace:
        raise SessionSaveError(
            f"refusing to overwrite {path}: it exists; nothing was written (pass --replace)"
        )
    session = Session.open(source, session_id)
    head = source.head(session_id)
    if new_id is not None:
        session.session_id = new_id
    data = session.to_bytes()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, data, backup="rolling", new_file_mode="private")
    except OSError as exc:
        raise SessionSaveError(f"cannot write {path}: {exc}") from exc
    return _Item(session_id, session.session_id), attrs.evolve(head, session_id=session.session_id)


# -------------------------------------------------------------------------------- import


@sessions.command(
    "import",
    epilog="""\b
Examples:
  harness sessions import review.json                     # a session file of any release
  harness sessions import ~/.local/share/harness/sessions # every session file of a folder
  harness sessions import --from sqlite:///old.db review --as review-old
  harness sessions import --from postgresql://me@db/harness
""",
)
@click.argument("sources", nargs=-1, metavar="SOURCE...")
@click.option(
    "--from",
    "from_url",
    default=None,
    metavar="URL",
    help="Import from this store: SOURCEs are its session ids (none: all of them).",
)
@click.option("--as", "new_id", default=None, metavar="NEW", help="The id in this store (one session only).")
@click.option("--replace", is_flag=True, help="Overwrite a session of this store that has the same id.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: what was copied.")
@store_options(dir_alias=True)
@click.pass_context
def import_command(
    ctx: click.Context,
    sources: tuple[str, ...],
    from_url: str | None,
    new_id: str | None,
    replace: bool,
    as_json: bool,
    store: str | None,
    session_dir: Path | None,
) -> None:
    """Copy sessions into the store: session files, folders of them, or another store's sessions.

    Each SOURCE is a session file (.json, any release's format), a folder store or a
    store URL (all of its sessions); with --from URL, SOURCEs are session ids in that
    store. An id this store already has is an error before anything is copied, unless
    --as NEW or --replace.
    """
    if not sources and from_url is None:
        raise click.UsageError("give SOURCE... (session files, folders, store URLs) or --from URL")
    if new_id is not None:
        check_session_name(new_id, "--as")
    with ExitStack() as stack:
        target = stack.enter_context(opened_store(store_url_for(ctx)))
        items: list[_Item] = []
        described: list[str] = []
        wholes: list[SessionStore] = []  # stores imported with all their sessions
        if from_url is not None:
            origin = stack.enter_context(
                opened_store(_existing(from_url, parse_target(from_url)[1], "--from"))
            )
            described.append(origin.url)
            ids = list(dict.fromkeys(sources))
            if not ids:
                wholes.append(origin)
                ids = [head.session_id for head in origin.list_sessions()]
            for sid in ids:
                origin.head(sid)
                items.append(_Item(sid, sid, source=origin))
        else:
            for text in sources:
                kind, where = parse_target(text)
                if kind == "file":
                    session = Session.load(where)
                    items.append(_Item(session.session_id, session.session_id, file=session))
                    described.append(where)
                    continue
                origin = stack.enter_context(opened_store(_existing(text, where, "SOURCE")))
                described.append(origin.url)
                wholes.append(origin)
                items.extend(_Item(h.session_id, h.session_id, source=origin) for h in origin.list_sessions())
        if new_id is not None:
            if len(items) != 1:
                raise click.UsageError(f"--as names one imported session, but the sources hold {len(items)}")
            items = [attrs.evolve(items[0], target_id=new_id)]
        seen: set[str] = set()
        for item in items:
            if item.target_id in seen:
                raise click.UsageError(
                    f"two sources hold session {item.target_id!r}; import one of them with --as NEW"
                )
            seen.add(item.target_id)
        _check_free(target, items, replace=replace, nothing="nothing was imported")
        if (
            len(wholes) == 1
            and all(item.source is wholes[0] for item in items)
            and not replace
            and new_id is None
        ):
            # One whole store: copy_all (oldest first, conflicts checked before anything is copied).
            done = [(_Item(head.session_id, head.session_id), head) for head in copy_all(wholes[0], target)]
        else:
            done = list(_copy(target, items, replace=replace))
        _report(ctx, as_json, ", ".join(described), target.url, done, "imported")
