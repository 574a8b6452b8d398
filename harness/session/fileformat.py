"""The session file format: reading a session file, and listing a folder of them.

Written by :meth:`harness.session.Session.save`; read by :meth:`harness.session.Session.load`
(through :func:`session_fields_from_bytes`), by :func:`list_sessions` and by the
``file:`` store (:mod:`harness.stores.jsonfile`).
"""

from __future__ import annotations

__all__ = [
    "SESSION_KEYS",
    "SESSION_VERSION",
    "SessionInfo",
    "SessionListing",
    "SessionProblem",
    "find_session",
    "list_sessions",
    "load_error",
    "session_bytes",
    "session_fields_from_bytes",
    "usage_from_mapping",
    "usage_to_mapping",
]

import json
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from harness.core.messages import CanonicalMessage, Usage
from harness.errors import SessionLoadError, SessionSaveError, WireFormatError
from harness.session.files import backup_path
from harness.session.paths import default_session_dir

SESSION_VERSION = 2
"""Version written by this release. Version 1 is tunacode's format (migrated on load)."""

SESSION_KEYS = (
    "version",
    "session_id",
    "project_id",
    "created_at",
    "last_modified",
    "working_directory",
    "current_model",
    "total_tokens",
    "session_total_usage",
    "thoughts",
    "messages",
)
"""The keys of a session file, in the order they are written."""
_USAGE_KEYS = ("request_tokens", "response_tokens", "cached_tokens", "cache_write_tokens")


def session_bytes(document: Mapping[str, Any], messages: Sequence[CanonicalMessage]) -> bytes:
    """A session file's bytes: ``document`` (its JSON object) as UTF-8 JSON, indented by one space.

    Raises:
        SessionSaveError: A value cannot be written as JSON; the reason names the message,
            part and field of ``messages`` at fault.
    """
    from harness.wire import dump_messages, encode_json

    try:
        return encode_json(document, indent=1, ascii_only=False)
    except (TypeError, ValueError, RecursionError, WireFormatError) as exc:
        reason = str(exc)
        try:
            dump_messages(messages)  # names the message, part and field at fault
        except WireFormatError as located:
            reason = str(located)
        raise SessionSaveError(f"cannot write the session as JSON: {reason}") from exc


def load_error(file: Path, reason: str) -> SessionLoadError:
    """A :class:`SessionLoadError` for ``file`` that names its backup when one exists."""
    backup = backup_path(file)
    return SessionLoadError(file, reason, backup=backup if backup.exists() else None)


# --------------------------------------------------------------------- load helpers


def _require(file: Path, data: Mapping[str, Any], key: str, types: tuple[type, ...], what: str) -> Any:
    if key not in data:
        raise load_error(file, f"missing key {key!r}")
    value = data[key]
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        raise load_error(file, f"key {key!r} must be {what}, got {type(value).__name__}")
    return value


def _timestamp(file: Path, data: Mapping[str, Any], key: str) -> datetime:
    value = _require(file, data, key, (str,), "an ISO 8601 timestamp string")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise load_error(file, f"key {key!r} is not an ISO 8601 timestamp: {value!r}") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _usage(file: Path, value: Any, version: int) -> Usage:
    if value is None:
        return Usage()
    if not isinstance(value, Mapping):
        raise load_error(file, f"key 'session_total_usage' must be an object, got {type(value).__name__}")
    data: Mapping[str, Any] = value  # pyright: ignore[reportUnknownVariableType]
    for key, item in data.items():
        if key in (*_USAGE_KEYS, "prompt_tokens", "completion_tokens") and (
            not isinstance(item, int) or isinstance(item, bool)
        ):
            raise load_error(file, f"session_total_usage.{key} must be an integer, got {item!r}")
    if version == 1 or "prompt_tokens" in data:
        # tunacode's UsageMetrics: prompt_tokens, completion_tokens, cached_tokens, cost.
        known = {"prompt_tokens", "completion_tokens", "cached_tokens"}
        return Usage(
            request_tokens=int(data.get("prompt_tokens", data.get("request_tokens", 0))),
            response_tokens=int(data.get("completion_tokens", data.get("response_tokens", 0))),
            cached_tokens=int(data.get("cached_tokens", 0)),
            extra={k: v for k, v in data.items() if k not in known and k not in _USAGE_KEYS},
        )
    return usage_from_mapping(data)


def usage_to_mapping(usage: Usage) -> dict[str, Any]:
    """``session_total_usage`` as a session file (and a store's head) writes it."""
    data: dict[str, Any] = {
        "request_tokens": usage.request_tokens,
        "response_tokens": usage.response_tokens,
        "cached_tokens": usage.cached_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
    }
    for key, value in usage.extra.items():
        data.setdefault(key, value)
    return data


def usage_from_mapping(data: Mapping[str, Any]) -> Usage:
    """The :class:`Usage` of a checked ``session_total_usage`` mapping (unknown keys kept as extra)."""
    return Usage(
        request_tokens=int(data.get("request_tokens", 0)),
        response_tokens=int(data.get("response_tokens", 0)),
        cached_tokens=int(data.get("cached_tokens", 0)),
        cache_write_tokens=int(data.get("cache_write_tokens", 0)),
        extra={k: v for k, v in data.items() if k not in _USAGE_KEYS},
    )


def session_fields_from_bytes(file: Path, raw: bytes) -> dict[str, Any]:
    """The :class:`~harness.session.Session` fields of a session file's bytes.

    Raises:
        SessionLoadError: The bytes are not a valid session file (the reason says why).
    """
    if not raw.strip():
        raise load_error(file, "file is empty")
    from harness.wire import decode_json

    try:
        data = decode_json(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise load_error(file, f"not valid JSON (truncated or corrupt?): {exc}") from exc
    except (ValueError, RecursionError) as exc:
        raise load_error(file, f"not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise load_error(file, f"top level must be a JSON object, got {type(data).__name__}")
    doc: dict[str, Any] = data  # pyright: ignore[reportUnknownVariableType]
    version = _require(file, doc, "version", (int,), "an integer")
    if version not in (1, SESSION_VERSION):
        raise load_error(file, f"unknown version {version!r} (this release reads 1 and {SESSION_VERSION})")
    session_id = _require(file, doc, "session_id", (str,), "a string")
    if not session_id:
        raise load_error(file, "key 'session_id' is empty")
    project_id = _require(file, doc, "project_id", (str,), "a string")
    created_at = _timestamp(file, doc, "created_at")
    last_modified = (
        _timestamp(file, doc, "last_modified") if "last_modified" in doc or version > 1 else created_at
    )
    working_directory = doc.get("working_directory", "")
    if not isinstance(working_directory, str):
        raise load_error(file, "key 'working_directory' must be a string")
    current_model = doc.get("current_model")
    if current_model is not None and not isinstance(current_model, str):
        raise load_error(file, "key 'current_model' must be a string or null")
    if version > 1 or "total_tokens" in doc:
        total_tokens = _require(file, doc, "total_tokens", (int,), "an integer")
    else:
        total_tokens = 0  # tunacode dropped the key in 2026-02
    usage = _usage(file, doc.get("session_total_usage"), version)
    thoughts_raw = doc.get("thoughts", [])
    if not isinstance(thoughts_raw, list):
        raise load_error(file, "key 'thoughts' must be a list")
    thoughts: list[str] = []
    for index, item in enumerate(thoughts_raw):  # pyright: ignore[reportUnknownVariableType,reportUnknownArgumentType]
        if not isinstance(item, str):
            raise load_error(file, f"thoughts[{index}] must be a string, got {type(item).__name__}")  # pyright: ignore[reportUnknownArgumentType]
        thoughts.append(item)
    raw_messages = _require(file, doc, "messages", (list,), "a list")
    from harness.wire import load_messages_and_thoughts

    try:
        messages, legacy_thoughts = load_messages_and_thoughts(raw_messages)
    except WireFormatError as exc:
        raise load_error(file, f"messages: {exc}") from exc
    return {
        "session_id": session_id,
        "project_id": project_id,
        "created_at": created_at,
        "last_modified": last_modified,
        "working_directory": working_directory,
        "current_model": current_model,
        "total_tokens": total_tokens,
        "usage": usage,
        "thoughts": [*thoughts, *legacy_thoughts],
        "messages": list(messages),
        "path": file,
    }


# --------------------------------------------------------------------- listing


@attrs.frozen
class SessionInfo:
    """Metadata of a saved session (see :func:`list_sessions`)."""

    session_id: str
    created_at: str
    last_modified: str
    message_count: int
    current_model: str | None
    path: Path


@attrs.frozen
class SessionProblem:
    """A file :func:`list_sessions` could not read, and why."""

    path: Path
    reason: str


@attrs.frozen
class SessionListing:
    """Result of :func:`list_sessions`: readable sessions (newest first) and problems."""

    sessions: tuple[SessionInfo, ...]
    problems: tuple[SessionProblem, ...]


def _info(file: Path) -> SessionInfo:
    try:
        data = json.loads(file.read_bytes())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise load_error(file, f"not readable JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise load_error(file, "top level must be a JSON object")
    doc: dict[str, Any] = data  # pyright: ignore[reportUnknownVariableType]
    version = doc.get("version")
    if version not in (1, SESSION_VERSION):
        raise load_error(file, f"unknown version {version!r}")
    session_id = _require(file, doc, "session_id", (str,), "a string")
    created = _timestamp(file, doc, "created_at")
    modified = _timestamp(file, doc, "last_modified") if "last_modified" in doc else created
    messages = _require(file, doc, "messages", (list,), "a list")
    model = doc.get("current_model")
    return SessionInfo(
        session_id=session_id,
        created_at=created.isoformat(),
        last_modified=modified.isoformat(),
        message_count=len(messages),  # pyright: ignore[reportUnknownArgumentType]
        current_model=model if isinstance(model, str) else None,
        path=file,
    )


def list_sessions(directory: str | os.PathLike[str] | None = None) -> SessionListing:
    """List the sessions saved in ``directory`` (default :func:`default_session_dir`).

    Sessions are sorted newest first by ``last_modified``. Files that cannot be read are
    not skipped silently: each one is reported in ``problems`` with the reason.
    """
    folder = Path(directory) if directory is not None else default_session_dir()
    if not folder.is_dir():
        return SessionListing((), ())
    infos: list[tuple[datetime, SessionInfo]] = []
    problems: list[SessionProblem] = []
    for file in sorted(folder.glob("*.json")):
        try:
            info = _info(file)
        except SessionLoadError as exc:
            problems.append(SessionProblem(file, exc.reason))
            continue
        infos.append((datetime.fromisoformat(info.last_modified), info))
    infos.sort(key=lambda item: item[0], reverse=True)
    return SessionListing(tuple(info for _, info in infos), tuple(problems))


def find_session(session_id: str, directory: str | os.PathLike[str] | None = None) -> Path | None:
    """Return the file of ``session_id`` in ``directory`` (``*_<id>.json``), if any."""
    folder = Path(directory) if directory is not None else default_session_dir()
    matches = sorted(folder.glob(f"*_{session_id}.json"))
    return matches[0] if matches else None
