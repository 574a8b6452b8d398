"""A ``file:`` store's folder on disk: its lock, atomic replaces, cut-and-append, committed reads.

:class:`StoreFolder` is what :class:`~harness.stores.jsonfile.JsonFileStore` writes
through. Writers hold an exclusive ``fcntl.flock`` of ``<folder>/.harness-store.lock`` and
readers a shared one, so a revision check and the write after it are one step for every
process on the machine. Every file is created with mode 0600, the folder with 0700.
With ``durable``, each write is fsynced, and the folder after a rename.
"""

from __future__ import annotations

__all__ = ["LOCK_NAME", "StoreFolder"]

import contextlib
import errno
import fcntl
import os
import threading
from collections.abc import Generator, Iterable
from pathlib import Path
from typing import Any

from harness.errors import SessionStoreError

LOCK_NAME = ".harness-store.lock"
"""The lock file in the folder (never deleted: a process may hold it)."""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class StoreFolder:
    """A store folder (created if missing) and the file operations a commit is made of.

    Args:
        path: The folder.
        url: The store's URL, for errors.
        durable: fsync every write.
        read_only: Use an existing folder for reading only: nothing is created in it (not
            even the lock file: an existing one is opened for shared locks), and a write
            raises.

    Raises:
        SessionStoreError: ``path`` is not a folder, or cannot be created or locked; with
            ``read_only``, also when it does not exist.
    """

    def __init__(self, path: Path, url: str, *, durable: bool, read_only: bool = False) -> None:
        self.path = path
        self.url = url
        self.durable = durable
        self.read_only = read_only
        self._thread = threading.RLock()
        self._depth = 0
        self.closed = False
        if path.exists() and not path.is_dir():
            raise SessionStoreError(url, "the store path exists and is not a folder")
        self._lock_fd: int | None
        if read_only:
            if not path.is_dir():
                raise SessionStoreError(url, "the store folder does not exist; nothing was created")
            try:
                self._lock_fd = os.open(path / LOCK_NAME, os.O_RDONLY)
            except OSError:
                self._lock_fd = None  # no writer ever used the folder: nothing to lock against
            return
        try:
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise SessionStoreError(url, f"cannot create the store folder: {exc}") from exc
        try:
            self._lock_fd = os.open(path / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            if exc.errno not in (errno.EACCES, errno.EROFS, errno.EPERM):
                raise SessionStoreError(url, f"cannot open the lock file: {exc}") from exc
            self._lock_fd = None  # a read-only folder: reads work, writes are refused

    @contextlib.contextmanager
    def locked(self, *, exclusive: bool) -> Generator[None]:
        """Hold the folder's lock (re-entrant in this handle; the outermost call decides the kind)."""
        with self._thread:
            if self.closed:
                raise SessionStoreError(self.url, "the store is closed")
            if exclusive and self.read_only:
                raise SessionStoreError(self.url, "the store was opened read-only")
            if exclusive and self._lock_fd is None:
                raise SessionStoreError(self.url, "the store folder is read-only")
            fd = self._lock_fd if self._depth == 0 else None
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if fd is not None:
                    fcntl.flock(fd, fcntl.LOCK_UN)

    def file(self, name: str) -> Path:
        """The path of ``name`` in the folder."""
        return self.path / name

    def read(self, name: str, size: int | None = None, *, session_id: str) -> bytes:
        """The first ``size`` bytes of ``name`` (all of it for ``None``; a missing file is empty for 0).

        Raises:
            SessionStoreError: The file is missing, unreadable, or shorter than ``size``.
        """
        try:
            with open(self.file(name), "rb") as handle:
                data = handle.read() if size is None else handle.read(size)
        except FileNotFoundError:
            if size == 0:
                return b""
            raise SessionStoreError(self.url, f"{name} is missing", session_id=session_id) from None
        except OSError as exc:
            raise SessionStoreError(self.url, f"cannot read {name}: {exc}", session_id=session_id) from exc
        if size is not None and len(data) < size:
            raise SessionStoreError(
                self.url,
                f"{name} has {len(data)} bytes, fewer than the {size} committed (truncated?)",
                session_id=session_id,
            )
        return data

    def replace(self, name: str, data: bytes) -> None:
        """Write ``name`` atomically: ``<name>.tmp`` is written, then renamed over it."""
        temporary = self.file(name + ".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            _write_all(fd, data)
            if self.durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, self.file(name))
        self.sync()

    def append(self, name: str, committed: int, data: bytes) -> int:
        """Cut ``name`` back to its ``committed`` bytes (a crashed write's tail), append ``data``.

        Returns:
            The new committed length.
        """
        fd = os.open(self.file(name), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.fstat(fd).st_size != committed:
                os.ftruncate(fd, committed)
            if data:
                os.lseek(fd, committed, os.SEEK_SET)
                _write_all(fd, data)
            if self.durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        return committed + len(data)

    def remove(self, names: Iterable[str]) -> None:
        """Delete these files (and their ``.tmp`` leftovers), in order; missing ones are fine."""
        for name in names:
            for path in (self.file(name), self.file(name + ".tmp")):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        self.sync()

    def stat(self, names: Iterable[str]) -> tuple[Any, ...]:
        """``(inode, size, mtime)`` of each file (``None`` if missing): what tells that a file changed."""
        out: list[Any] = []
        for name in names:
            try:
                info = os.stat(self.file(name))
            except FileNotFoundError:
                out.append(None)
            else:
                out.append((info.st_ino, info.st_size, info.st_mtime_ns))
        return tuple(out)

    def sync(self) -> None:
        """Flush the folder itself to disk (renames and deletes), when durable."""
        if self.durable:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def close(self) -> None:
        """Release the lock file."""
        with self._thread:
            if not self.closed:
                self.closed = True
                if self._lock_fd is not None:
                    os.close(self._lock_fd)
