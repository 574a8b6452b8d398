"""Crash-safe file writes: a crash leaves the old content or the new one, never a mix."""

from __future__ import annotations

__all__ = ["atomic_write_bytes", "backup_path"]

import contextlib
import os
import shutil
import uuid
from pathlib import Path


def backup_path(path: Path) -> Path:
    """The backup kept beside ``path``: ``<name>.bak``."""
    return path.with_name(path.name + ".bak")


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes, *, backup: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new content.

    Steps: write a temporary file in the same folder, flush and fsync it; if ``backup``
    and ``path`` exists, atomically refresh ``<name>.bak`` from it (hard link or copy,
    then rename); rename the temporary file over ``path``; fsync the folder.
    """
    directory = path.parent
    tmp = directory / f".{path.name}.{uuid.uuid4().hex[:12]}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        if backup and path.exists():
            bak = backup_path(path)
            bak_tmp = directory / f".{bak.name}.{uuid.uuid4().hex[:12]}.tmp"
            try:
                os.link(path, bak_tmp)
            except OSError:
                shutil.copy2(path, bak_tmp)
            os.replace(bak_tmp, bak)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(directory)
