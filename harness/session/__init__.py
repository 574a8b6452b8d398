"""Sessions: a conversation's history and accounting, saved atomically to a JSON file.

A session file holds exactly the contract's keys: ``version``, ``session_id``,
``project_id``, ``created_at``, ``last_modified``, ``working_directory``,
``current_model``, ``total_tokens``, ``session_total_usage``, ``thoughts`` and
``messages`` (the wire format of :mod:`harness.wire`).

Saving writes a temporary file in the target's folder, flushes and fsyncs it, keeps the
previous version as ``<name>.bak`` (hard link, or copy) and renames the new file over the
target, then fsyncs the folder: a crash at any moment leaves the old or the new file,
never a torn one. Loading checks the version (version 1, tunacode's format, is migrated)
and raises :class:`SessionLoadError` naming the file and the problem; a failed load never
touches the file, and a later :meth:`Session.save` refuses to overwrite a file that
failed to load unless ``force=True``.
"""

from __future__ import annotations

from harness.errors import SessionLoadError, SessionSaveError

__all__ = [
    "SESSION_DIR_ENV",
    "SESSION_KEYS",
    "SESSION_VERSION",
    "Session",
    "SessionInfo",
    "SessionListing",
    "SessionProblem",
    "atomic_write_bytes",
    "default_session_dir",
    "find_session",
    "list_sessions",
    "project_id_for",
]

import contextlib
import functools
import hashlib
import json
import os
import subprocess
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from harness.core.messages import CanonicalMessage, Usage, history_repr
from harness.errors import WireFormatError
from harness.session.files import atomic_write_bytes, backup_path

if TYPE_CHECKING:
    from harness.tokens import TokenCounter

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


def _now() -> datetime:
    return datetime.now(UTC)


def _load_error(file: Path, reason: str) -> SessionLoadError:
    """A :class:`SessionLoadError` for ``file`` that names its backup when one exists."""
    backup = backup_path(file)
    return SessionLoadError(file, reason, backup=backup if backup.exists() else None)


SESSION_DIR_ENV = "HARNESS_SESSION_DIR"
"""Environment variable naming the session folder; it wins over the XDG default."""


def default_session_dir() -> Path:
    """Where sessions live: ``$HARNESS_SESSION_DIR``, else ``$XDG_DATA_HOME/harness/sessions``.

    Without either variable: ``~/.local/share/harness/sessions``. Every reader and writer
    (``Session.save``, ``list_sessions``, the ``harness run`` and ``harness sessions``
    commands) uses this, so they always agree.
    """
    configured = os.environ.get(SESSION_DIR_ENV)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "harness" / "sessions"


def project_id_for(directory: str | os.PathLike[str] | None = None) -> str:
    """First 16 hex digits of the sha256 of the git top-level folder (or of ``directory``)."""
    start = Path(directory) if directory is not None else Path.cwd()
    try:
        root = str(start.resolve())
    except (OSError, ValueError, RuntimeError):  # not a path the OS can take (a NUL, a lone high surrogate)
        root = os.path.abspath(start)
    return _project_id(root)


@functools.lru_cache(maxsize=64)
def _project_id(root: str) -> str:
    with contextlib.suppress(OSError, ValueError, subprocess.SubprocessError):
        completed = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        if completed.returncode == 0 and completed.stdout.strip():
            root = completed.stdout.strip()
    try:
        raw = os.fsencode(root)  # a non-UTF-8 folder name hashes as its bytes on disk
    except UnicodeEncodeError:
        raw = root.encode("utf-8", "surrogatepass")
    return hashlib.sha256(raw).hexdigest()[:16]


def _optional_path(value: str | os.PathLike[str] | None) -> Path | None:
    """Accept ``str`` and any ``os.PathLike`` wherever a path is documented."""
    return None if value is None else Path(value)


# Files whose last load failed: never overwritten without ``force=True``.
_QUARANTINED: set[str] = set()


def _key(path: Path) -> str:
    return str(path.resolve())


@attrs.define(eq=False)
class Session:
    """A conversation: its history, thoughts, usage and where it is saved.

    Attributes:
        session_id: uuid4 hex.
        project_id: See :func:`project_id_for` (computed on first use unless given).
        created_at: When the session was created (UTC).
        last_modified: When it was last saved (UTC).
        working_directory: The working directory it belongs to.
        current_model: Name of the model last used.
        total_tokens: Token count of ``messages``, updated after every change by the loop.
        usage: Usage of every run so far (``session_total_usage`` in the file).
        thoughts: Model thoughts captured by the loop, plus legacy ``{"thought"}`` entries.
        messages: The stored history. A run works on its own copy and hands the result
            back when it ends (see :meth:`record_run`).
        original_query: The first prompt of the task, kept across runs (not persisted).
        path: The session file (``str`` or any ``os.PathLike``, kept as a ``Path``);
            ``None`` for an in-memory session.
    """

    session_id: str = attrs.field(factory=lambda: uuid.uuid4().hex)
    _project_id: str | None = attrs.field(default=None, alias="project_id")
    created_at: datetime = attrs.field(factory=_now)
    last_modified: datetime = attrs.field(factory=_now)
    working_directory: str = attrs.field(factory=os.getcwd)
    current_model: str | None = None
    total_tokens: int = 0
    usage: Usage = attrs.field(factory=Usage)
    thoughts: list[str] = attrs.field(factory=list[str])
    messages: list[CanonicalMessage] = attrs.field(factory=list[CanonicalMessage], repr=history_repr)
    original_query: str | None = None
    path: Path | None = attrs.field(default=None, converter=_optional_path)

    @property
    def project_id(self) -> str:
        """See :func:`project_id_for`; computed from ``working_directory`` when first read.

        Computing it may run ``git rev-parse``, so a throw-away session (``Agent.run(prompt)``
        without one) never pays for it.
        """
        if self._project_id is None:
            self._project_id = project_id_for(self.working_directory)
        return self._project_id

    @project_id.setter
    def project_id(self, value: str) -> None:
        self._project_id = value

    @classmethod
    def new(cls, **fields: Any) -> Session:
        """Create an in-memory session (no file until :meth:`save` is given a path)."""
        return cls(**fields)

    @classmethod
    def create(cls, directory: str | os.PathLike[str] | None = None, **fields: Any) -> Session:
        """Create a session saved under ``directory`` (default :func:`default_session_dir`).

        The file is named ``<project_id>_<session_id>.json``; nothing is written yet.
        """
        session = cls(**fields)
        folder = Path(directory) if directory is not None else default_session_dir()
        session.path = folder / f"{session.project_id}_{session.session_id}.json"
        return session

    def record_run(
        self,
        *,
        messages: list[CanonicalMessage],
        usage: Usage,
        thoughts: Sequence[str],
        model_name: str | None,
        total_tokens: int,
        original_query: str | None,
    ) -> None:
        """Take the result of a run, finished or failed: the run's one write to the session.

        Args:
            messages: The run's history, which becomes the session's.
            usage: The run's usage, added to the session's total.
            thoughts: Thoughts the run captured, appended in order.
            model_name: The model the run used.
            total_tokens: Token count of ``messages``.
            original_query: The task's first prompt.
        """
        self.messages = messages
        self.usage = self.usage + usage
        self.thoughts.extend(thoughts)
        self.current_model = model_name
        self.total_tokens = total_tokens
        self.original_query = original_query

    def update_token_count(self, counter: TokenCounter) -> int:
        """Recount ``total_tokens`` with ``counter`` (cached, so cheap after a small change)."""
        self.total_tokens = counter.count_messages(self.messages)
        return self.total_tokens

    # ----------------------------------------------------------------- serialisation

    def to_dict(self) -> dict[str, Any]:
        """The file's JSON document (exactly the contract's keys)."""
        from harness.wire import messages_to_jsonable

        usage: dict[str, Any] = {
            "request_tokens": self.usage.request_tokens,
            "response_tokens": self.usage.response_tokens,
            "cached_tokens": self.usage.cached_tokens,
            "cache_write_tokens": self.usage.cache_write_tokens,
        }
        for key, value in self.usage.extra.items():
            usage.setdefault(key, value)
        return {
            "version": SESSION_VERSION,
            "session_id": self.session_id,
            "project_id": self.project_id,
            "created_at": self.created_at.isoformat(),
            "last_modified": self.last_modified.isoformat(),
            "working_directory": self.working_directory,
            "current_model": self.current_model,
            "total_tokens": self.total_tokens,
            "session_total_usage": usage,
            "thoughts": list(self.thoughts),
            "messages": messages_to_jsonable(self.messages),
        }

    def save(self, path: str | os.PathLike[str] | None = None, *, force: bool = False) -> Path:
        r"""Write the session atomically (see the module docstring) and return the path.

        A new session file is created with mode 0600 whatever the umask (conversations are
        private data); an existing one keeps its mode. A symlink is written through (its
        target is replaced, the link stays), and a target that is not a regular file
        (FIFO, device, directory, dangling link) is refused. The previous version is kept
        as the rolling ``<name>.bak`` (see :mod:`harness.session.files`).

        Any text is stored losslessly: a lone surrogate (a non-UTF-8 file name from
        ``os.listdir`` or ``os.fsdecode``) is written as a ``\u`` escape and the file stays
        valid UTF-8. A non-finite float (``NaN``, ``Infinity``) is written as ``null``, as
        :func:`~harness.wire.dump_messages` writes it (see :mod:`harness.wire.jsontext`).

        Args:
            path: Target file (default: :attr:`path`, or a new file in
                :func:`default_session_dir`). The session remembers it.
            force: Overwrite a file whose last load failed (it is kept as
                ``<name>.corrupt``, not as the backup).

        Raises:
            SessionSaveError: The target failed to load earlier and ``force`` is false,
                the file cannot be written, or a value cannot be written as JSON (an
                arbitrary object in a tool result; the reason names the message, part
                and field). Nothing is written then.
        """
        if path is not None:
            self.path = Path(path)
        elif self.path is None:
            self.path = default_session_dir() / f"{self.project_id}_{self.session_id}.json"
        target = self.path
        quarantined = _key(target) in _QUARANTINED
        if quarantined and not force:
            raise SessionSaveError(
                f"refusing to overwrite {target}: it failed to load earlier and may hold data worth "
                "recovering; save elsewhere or pass force=True"
            )
        self.last_modified = _now()
        try:
            data = self.to_bytes()
        except SessionSaveError as exc:
            raise SessionSaveError(f"cannot save session to {target}: {exc}") from exc.__cause__
        try:
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            if quarantined and target.exists():
                os.replace(target, target.with_name(target.name + ".corrupt"))
            atomic_write_bytes(
                target, data, backup="none" if quarantined else "rolling", new_file_mode="private"
            )
        except OSError as exc:
            raise SessionSaveError(f"cannot save session to {target}: {exc}") from exc
        _QUARANTINED.discard(_key(target))
        return target

    def to_bytes(self) -> bytes:
        r"""The session file's bytes, as :meth:`save` writes them (``harness compact`` too).

        UTF-8 JSON of :meth:`to_dict`, indented by one space. Lone surrogates are written as
        ``\u`` escapes (the bytes stay valid UTF-8) and non-finite floats as ``null``,
        the rules of :mod:`harness.wire.jsontext`.

        Raises:
            SessionSaveError: A value cannot be written as JSON (an arbitrary object in a
                tool result); the reason names the message, part and field.
        """
        from harness.wire import dump_messages, encode_json

        try:
            return encode_json(self.to_dict(), indent=1, ascii_only=False)
        except (TypeError, ValueError, RecursionError, WireFormatError) as exc:
            reason = str(exc)
            try:
                dump_messages(self.messages)  # names the message, part and field at fault
            except WireFormatError as located:
                reason = str(located)
            raise SessionSaveError(f"cannot write the session as JSON: {reason}") from exc

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Session:
        """Load a session file.

        Raises:
            SessionLoadError: The file is missing, unreadable, truncated, not JSON, has
                a wrong or unknown ``version``, a key of the wrong type, or messages the
                wire format rejects. The file is left untouched.
        """
        file = Path(path)
        try:
            raw = file.read_bytes()
        except FileNotFoundError:
            raise _load_error(file, "file not found") from None
        except OSError as exc:
            raise _load_error(file, f"cannot read: {exc}") from exc
        try:
            session = _session_from_bytes(file, raw)
        except SessionLoadError:
            _QUARANTINED.add(_key(file))
            raise
        _QUARANTINED.discard(_key(file))
        return session


# --------------------------------------------------------------------- load helpers


def _require(file: Path, data: Mapping[str, Any], key: str, types: tuple[type, ...], what: str) -> Any:
    if key not in data:
        raise _load_error(file, f"missing key {key!r}")
    value = data[key]
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        raise _load_error(file, f"key {key!r} must be {what}, got {type(value).__name__}")
    return value


def _timestamp(file: Path, data: Mapping[str, Any], key: str) -> datetime:
    value = _require(file, data, key, (str,), "an ISO 8601 timestamp string")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise _load_error(file, f"key {key!r} is not an ISO 8601 timestamp: {value!r}") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _usage(file: Path, value: Any, version: int) -> Usage:
    if value is None:
        return Usage()
    if not isinstance(value, Mapping):
        raise _load_error(file, f"key 'session_total_usage' must be an object, got {type(value).__name__}")
    data: Mapping[str, Any] = value  # pyright: ignore[reportUnknownVariableType]
    for key, item in data.items():
        if key in (*_USAGE_KEYS, "prompt_tokens", "completion_tokens") and (
            not isinstance(item, int) or isinstance(item, bool)
        ):
            raise _load_error(file, f"session_total_usage.{key} must be an integer, got {item!r}")
    if version == 1 or "prompt_tokens" in data:
        # tunacode's UsageMetrics: prompt_tokens, completion_tokens, cached_tokens, cost.
        known = {"prompt_tokens", "completion_tokens", "cached_tokens"}
        return Usage(
            request_tokens=int(data.get("prompt_tokens", data.get("request_tokens", 0))),
            response_tokens=int(data.get("completion_tokens", data.get("response_tokens", 0))),
            cached_tokens=int(data.get("cached_tokens", 0)),
            extra={k: v for k, v in data.items() if k not in known and k not in _USAGE_KEYS},
        )
    return Usage(
        request_tokens=int(data.get("request_tokens", 0)),
        response_tokens=int(data.get("response_tokens", 0)),
        cached_tokens=int(data.get("cached_tokens", 0)),
        cache_write_tokens=int(data.get("cache_write_tokens", 0)),
        extra={k: v for k, v in data.items() if k not in _USAGE_KEYS},
    )


def _session_from_bytes(file: Path, raw: bytes) -> Session:
    if not raw.strip():
        raise _load_error(file, "file is empty")
    from harness.wire import decode_json

    try:
        data = decode_json(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _load_error(file, f"not valid JSON (truncated or corrupt?): {exc}") from exc
    except (ValueError, RecursionError) as exc:
        raise _load_error(file, f"not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise _load_error(file, f"top level must be a JSON object, got {type(data).__name__}")
    doc: dict[str, Any] = data  # pyright: ignore[reportUnknownVariableType]
    version = _require(file, doc, "version", (int,), "an integer")
    if version not in (1, SESSION_VERSION):
        raise _load_error(file, f"unknown version {version!r} (this release reads 1 and {SESSION_VERSION})")
    session_id = _require(file, doc, "session_id", (str,), "a string")
    if not session_id:
        raise _load_error(file, "key 'session_id' is empty")
    project_id = _require(file, doc, "project_id", (str,), "a string")
    created_at = _timestamp(file, doc, "created_at")
    last_modified = (
        _timestamp(file, doc, "last_modified") if "last_modified" in doc or version > 1 else created_at
    )
    working_directory = doc.get("working_directory", "")
    if not isinstance(working_directory, str):
        raise _load_error(file, "key 'working_directory' must be a string")
    current_model = doc.get("current_model")
    if current_model is not None and not isinstance(current_model, str):
        raise _load_error(file, "key 'current_model' must be a string or null")
    if version > 1 or "total_tokens" in doc:
        total_tokens = _require(file, doc, "total_tokens", (int,), "an integer")
    else:
        total_tokens = 0  # tunacode dropped the key in 2026-02
    usage = _usage(file, doc.get("session_total_usage"), version)
    thoughts_raw = doc.get("thoughts", [])
    if not isinstance(thoughts_raw, list):
        raise _load_error(file, "key 'thoughts' must be a list")
    thoughts: list[str] = []
    for index, item in enumerate(thoughts_raw):  # pyright: ignore[reportUnknownVariableType,reportUnknownArgumentType]
        if not isinstance(item, str):
            raise _load_error(file, f"thoughts[{index}] must be a string, got {type(item).__name__}")  # pyright: ignore[reportUnknownArgumentType]
        thoughts.append(item)
    raw_messages = _require(file, doc, "messages", (list,), "a list")
    from harness.wire import load_messages_and_thoughts

    try:
        messages, legacy_thoughts = load_messages_and_thoughts(raw_messages)
    except WireFormatError as exc:
        raise _load_error(file, f"messages: {exc}") from exc
    return Session(
        session_id=session_id,
        project_id=project_id,
        created_at=created_at,
        last_modified=last_modified,
        working_directory=working_directory,
        current_model=current_model,
        total_tokens=total_tokens,
        usage=usage,
        thoughts=[*thoughts, *legacy_thoughts],
        messages=list(messages),
        path=file,
    )


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
        raise _load_error(file, f"not readable JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise _load_error(file, "top level must be a JSON object")
    doc: dict[str, Any] = data  # pyright: ignore[reportUnknownVariableType]
    version = doc.get("version")
    if version not in (1, SESSION_VERSION):
        raise _load_error(file, f"unknown version {version!r}")
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
