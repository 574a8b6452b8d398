"""The files of a ``file:`` store session: the JSON Lines log, the journal, the sidecar, the snapshot.

For a session ``<stem>`` (``<project_id>_<session_id>``) in the store's folder:

* ``<stem>.json``, the **snapshot**: today's session file, exactly the contract's keys,
  holding the view (what ``Session.load`` and ``list_sessions`` read, the export format);
* ``<stem>.log.jsonl``, the **raw log**: one line per message, ``{"seq":N,"body":{...}}``
  with the message's wire-format JSON spliced in verbatim (a body that cannot be spliced,
  e.g. one holding a line break, is written as ``{"seq":N,"raw":"<body as a string>"}``);
* ``<stem>.meta.jsonl``, the **journal**: ``{"thought": ...}``, ``{"ledger": {...}}`` and
  ``{"edit": {...}}`` lines, in commit order (the last ledger line of a call wins);
* ``<stem>.state``, the **sidecar**: the head without its metadata, the view's entries (a
  log seq, or an overlay with its body and source), how many bytes of the log and the
  journal are committed, and the name of the metadata file;
* ``<stem>.metadata.<id>``, the head's **metadata** (:mod:`harness.stores.filemeta`),
  written to a new name only when a checkpoint changes it. Sidecars of format 1 hold the
  metadata inline and are read as they are.

Both ``.jsonl`` files are only appended to, and only their committed prefix (the lengths
the sidecar names) is ever read: a torn last line or lines a crashed commit wrote past
it are ignored, and cut off by the next commit. The sidecar is replaced atomically, and
that replacement is the commit (a metadata file it does not name yet is a leftover).
"""

from __future__ import annotations

__all__ = [
    "STATE_FORMAT",
    "NONCE_PREFIX",
    "FileState",
    "Journal",
    "decode_state",
    "encode_state",
    "journal_lines",
    "log_line",
    "parse_journal",
    "parse_log",
    "read_plain",
    "snapshot_bytes",
    "state_nonce",
]

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, cast

import attrs

from harness.errors import SessionLoadError, SessionStoreError
from harness.session.fileformat import SESSION_VERSION, session_fields_from_bytes, usage_to_mapping
from harness.session.records import EditRecord, LedgerEntry, LogEntry, SessionHead, ViewEntry
from harness.stores.rows import HEAD_COLUMNS as ROW_HEAD_COLUMNS
from harness.stores.rows import (
    edit_from_row,
    edit_to_row,
    head_from_row,
    head_to_row,
    ledger_from_row,
    ledger_to_row,
)

STATE_FORMAT = 2
"""The sidecar format this release writes (it reads format 1 too: the metadata inline)."""

_HEAD_FIELDS = ROW_HEAD_COLUMNS


def _dump(value: Any) -> bytes:
    from harness.wire import encode_json

    return encode_json(value, ascii_only=False)


def _load(data: bytes | str) -> Any:
    from harness.wire import decode_json

    return decode_json(data)


def _utf8(body: str) -> bytes:
    """A body as UTF-8 (a lone surrogate in it is rewritten as an escape: same JSON value)."""
    try:
        return body.encode("utf-8")
    except UnicodeEncodeError:
        return _dump(_load(body))


# --------------------------------------------------------------------- the log


def log_line(seq: int, body: str) -> bytes:
    """One line of the raw log for message ``seq`` (``body`` kept verbatim)."""
    if "\n" not in body and "\r" not in body:
        try:
            encoded = body.encode("utf-8")
            if isinstance(json.loads(encoded), dict):
                return b'{"seq":%d,"body":%s}\n' % (seq, encoded)
        except (UnicodeEncodeError, ValueError):
            pass
    return _dump({"seq": seq, "raw": body}) + b"\n"


def parse_log(data: bytes, *, store: str, session_id: str, file: str) -> list[LogEntry]:
    """The entries of a log's committed bytes, in order.

    Raises:
        SessionStoreError: A line is not a log line (names the file and the line).
    """
    entries: list[LogEntry] = []
    for number, line in enumerate(data.split(b"\n")[:-1], 1):
        try:
            obj = _load(line)
            seq = obj["seq"]
            if not isinstance(seq, int) or isinstance(seq, bool):
                raise TypeError("seq is not an integer")
            if "raw" in obj:
                body = obj["raw"]
                if not isinstance(body, str):
                    raise TypeError("raw is not a string")
            else:
                prefix = b'{"seq":%d,"body":' % seq
                if line.startswith(prefix) and line.endswith(b"}"):
                    body = line[len(prefix) : -1].decode("utf-8")
                else:  # written by hand: same value, another spelling
                    body = _dump(obj["body"]).decode("utf-8")
        except (ValueError, TypeError, KeyError, UnicodeDecodeError, RecursionError) as exc:
            raise SessionStoreError(
                store, f"{file} line {number} is not a log line: {exc}", session_id=session_id
            ) from None
        if entries and seq <= entries[-1].seq:
            raise SessionStoreError(
                store,
                f"{file} line {number}: seq {seq} does not follow {entries[-1].seq}",
                session_id=session_id,
            )
        entries.append(LogEntry(seq, body))
    return entries


# --------------------------------------------------------------------- the journal


@attrs.define
class Journal:
    """What a session's journal holds: thoughts, the ledger (by call, in start order) and edits."""

    thoughts: list[str] = attrs.field(factory=list[str])
    ledger: dict[str, LedgerEntry] = attrs.field(factory=dict[str, LedgerEntry])
    edits: list[EditRecord] = attrs.field(factory=list[EditRecord])


def journal_lines(
    thoughts: Iterable[str], ledger: Iterable[LedgerEntry], edits: Iterable[EditRecord]
) -> bytes:
    """The journal lines of one commit: its thoughts, then its ledger entries, then its edits."""
    out: list[bytes] = [_dump({"thought": t}) for t in thoughts]
    keys = ("tool_call_id", "tool_name", "status", "started_at", "ended_at", "result", "error")
    out.extend(_dump({"ledger": dict(zip(keys, ledger_to_row(e), strict=True))}) for e in ledger)
    for edit in edits:
        idx, revision, created_at, view_start, _, _, _ = edit_to_row(edit)
        out.append(
            _dump(
                {
                    "edit": {
                        "index": idx,
                        "revision": revision,
                        "created_at": created_at,
                        "view_start": view_start,
                        "replaced": list(edit.replaced),
                        "overlays": [list(o) for o in edit.overlays],
                        "events": [dict(e) for e in edit.events],
                    }
                }
            )
        )
    return b"".join(line + b"\n" for line in out)


def parse_journal(data: bytes, *, store: str, session_id: str, file: str) -> Journal:
    """A journal's committed bytes, read.

    Raises:
        SessionStoreError: A line is not a journal line (names the file and the line).
    """
    journal = Journal()
    for number, line in enumerate(data.split(b"\n")[:-1], 1):
        try:
            obj = _load(line)
            if not isinstance(obj, dict) or len(cast(dict[str, Any], obj)) != 1:
                raise TypeError("not an object with one key")
            (kind, value), *_ = cast(dict[str, Any], obj).items()
            if kind == "thought":
                if not isinstance(value, str):
                    raise TypeError("a thought must be a string")
                journal.thoughts.append(value)
            elif kind == "ledger":
                row = [value[k] for k in ("tool_call_id", "tool_name", "status", "started_at")]
                row += [value.get(k) for k in ("ended_at", "result", "error")]
                entry = ledger_from_row(store, session_id, row)
                journal.ledger[entry.tool_call_id] = entry
            elif kind == "edit":
                keys = ("index", "revision", "created_at", "view_start", "replaced", "overlays", "events")
                journal.edits.append(edit_from_row(store, session_id, [value[k] for k in keys]))
            else:
                raise TypeError(f"unknown kind {kind!r}")
        except SessionStoreError:
            raise
        except (ValueError, TypeError, KeyError, IndexError, RecursionError) as exc:
            raise SessionStoreError(
                store, f"{file} line {number} is not a journal line: {exc}", session_id=session_id
            ) from None
    return journal


# --------------------------------------------------------------------- the sidecar


@attrs.frozen
class FileState:
    """A session's sidecar: the committed state the log and the journal are read through.

    Attributes:
        head: The head record.
        stem: The file names' stem (``<project_id>_<session_id>`` when it was created).
        log_file: The log's file name (a prune with ``drop_log`` writes a new one).
        log_bytes: Committed bytes of the log.
        meta_bytes: Committed bytes of the journal.
        view: The view's entries.
        nonce: A random id of the commit that wrote it: a handle that wrote (or read) this
            nonce knows the sidecar is unchanged from its first bytes alone.
        metadata_file: The file holding ``head.metadata`` (``None``: none, the metadata is
            empty or, in a format 1 sidecar, inline). :func:`decode_state` leaves the head's
            metadata empty when it names one; the store reads it.
    """

    head: SessionHead
    stem: str
    log_file: str
    log_bytes: int = 0
    meta_bytes: int = 0
    view: tuple[ViewEntry, ...] = ()
    nonce: str = ""
    metadata_file: str | None = None


_NONCE = re.compile(rb'^\{"format":\d+,"nonce":"([0-9a-f]{1,64})"')
NONCE_PREFIX = 64
"""Bytes at the start of a sidecar that hold its nonce."""


def state_nonce(prefix: bytes) -> str | None:
    """The nonce in a sidecar's first :data:`NONCE_PREFIX` bytes (``None``: none found)."""
    match = _NONCE.match(prefix)
    return match.group(1).decode("ascii") if match else None


def encode_state(state: FileState) -> bytes:
    """The sidecar's bytes (the head's metadata is in ``state.metadata_file``, not here)."""
    row = head_to_row(state.head)
    head = dict(zip(_HEAD_FIELDS, row, strict=True))
    head["usage"] = dict(state.head.usage)
    del head["metadata"]
    head["log_pruned"] = state.head.log_pruned
    view = [e.seq if e.seq is not None else {"body": e.body, "source": e.source} for e in state.view]
    return _dump(
        {
            "format": STATE_FORMAT,
            "nonce": state.nonce,
            "stem": state.stem,
            "log_file": state.log_file,
            "log_bytes": state.log_bytes,
            "meta_bytes": state.meta_bytes,
            "metadata_file": state.metadata_file,
            "head": head,
            "view": view,
        }
    )


def _int(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TypeError(f"{what} must be a non-negative integer, got {value!r}")
    return value


def decode_state(raw: bytes, *, store: str, session_id: str, file: str) -> FileState:
    """A sidecar, read and checked.

    Raises:
        SessionStoreError: It is not JSON, of a newer format, or a value has the wrong type.
    """
    try:
        doc = _load(raw)
        if not isinstance(doc, dict):
            raise TypeError("not a JSON object")
        data = cast(dict[str, Any], doc)
        version = data.get("format")
        if isinstance(version, int) and version > STATE_FORMAT:
            raise SessionStoreError(
                store,
                f"{file} has format {version}, newer than this release reads ({STATE_FORMAT}): upgrade",
                session_id=session_id,
            )
        if version not in (1, STATE_FORMAT):
            raise TypeError(f"unknown format {version!r}")
        head_data = cast(dict[str, Any], data["head"])
        inline = version == 1  # format 1: the metadata in the head
        head = head_from_row(store, [head_data[k] if inline or k != "metadata" else {} for k in _HEAD_FIELDS])
        metadata_file = None if inline else data["metadata_file"]
        if metadata_file is not None and (not isinstance(metadata_file, str) or "/" in metadata_file):
            raise TypeError("metadata_file must be a file name")
        view: list[ViewEntry] = []
        for item in cast(list[Any], data["view"]):
            if isinstance(item, dict):
                overlay = cast(dict[str, Any], item)
                body, source = overlay["body"], overlay.get("source")
                if not isinstance(body, str) or (source is not None and not isinstance(source, int)):
                    raise TypeError(f"view entry {len(view)} is malformed")
                view.append(ViewEntry(None, body, source))
            else:
                view.append(ViewEntry(_int(item, f"view entry {len(view)}")))
        stem, log_file, nonce = data["stem"], data["log_file"], data.get("nonce", "")
        if not isinstance(nonce, str):
            raise TypeError("nonce must be a string")
        if not isinstance(stem, str) or not isinstance(log_file, str) or "/" in stem + log_file:
            raise TypeError("stem and log_file must be file names")
        return FileState(
            head=head,
            stem=stem,
            log_file=log_file,
            log_bytes=_int(data["log_bytes"], "log_bytes"),
            meta_bytes=_int(data["meta_bytes"], "meta_bytes"),
            view=tuple(view),
            nonce=nonce,
            metadata_file=metadata_file,
        )
    except SessionStoreError:
        raise
    except (ValueError, TypeError, KeyError, UnicodeDecodeError, RecursionError) as exc:
        raise SessionStoreError(
            store, f"{file} is not a valid session sidecar: {exc}", session_id=session_id
        ) from None


# --------------------------------------------------------------------- the snapshot


def snapshot_bytes(head: SessionHead, thoughts: Sequence[str], bodies: Sequence[str]) -> bytes:
    """Today's session file for ``head`` with the view's message bodies (spliced verbatim)."""
    header = _dump(
        {
            "version": SESSION_VERSION,
            "session_id": head.session_id,
            "project_id": head.project_id,
            "created_at": head.created_at.isoformat(),
            "last_modified": head.last_modified.isoformat(),
            "working_directory": head.working_directory,
            "current_model": head.current_model,
            "total_tokens": head.total_tokens,
            "session_total_usage": dict(head.usage),
            "thoughts": list(thoughts),
        }
    )
    if not bodies:
        return header[:-1] + b',"messages":[]}\n'
    return header[:-1] + b',"messages":[\n' + b",\n".join(_utf8(b) for b in bodies) + b"\n]}\n"


def read_plain(file: Path, *, store: str, session_id: str) -> tuple[SessionHead, list[str], list[str]]:
    """A plain session file (no sidecar): its head at revision 1, its messages' bodies and its thoughts.

    Raises:
        SessionStoreError: The file cannot be read or is not a session file (names the file).
    """
    from harness.session.tracking import encode_message

    try:
        fields = session_fields_from_bytes(file, file.read_bytes())
    except SessionLoadError as exc:
        raise SessionStoreError(store, f"{file.name}: {exc.reason}", session_id=session_id) from exc
    except OSError as exc:
        raise SessionStoreError(store, f"cannot read {file.name}: {exc}", session_id=session_id) from exc
    bodies = [encode_message(m)[0] for m in fields["messages"]]
    mapping = usage_to_mapping(fields["usage"])
    head = SessionHead(
        session_id=fields["session_id"],
        project_id=fields["project_id"],
        created_at=fields["created_at"],
        last_modified=fields["last_modified"],
        working_directory=fields["working_directory"],
        current_model=fields["current_model"],
        total_tokens=fields["total_tokens"],
        usage=mapping,
        revision=1,
        log_length=len(bodies),
        view_length=len(bodies),
    )
    return head, bodies, list(fields["thoughts"])
