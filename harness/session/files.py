"""Crash-safe file writes: a crash leaves the old content or the new one, never a mix.

:func:`atomic_write_bytes` is the one way harness replaces a file (``Session.save``,
``harness compact --out`` and ``--in-place``). Its rules:

* **What is replaced.** A symlink is written through: the file it finally points to is
  replaced in *its* folder and the link stays a link (``follow_symlinks=False`` refuses
  links instead). Anything that is not a regular file (a directory, a FIFO, a character
  or block device, a socket), a dangling symlink and a symlink loop are refused with
  :class:`~harness.errors.TargetNotRegularFileError` before anything is written.
* **Modes.** An existing file keeps its permission bits, and its owner and group when the
  process may set them. A new file follows ``new_file_mode``: ``"private"`` is exactly
  0600 (session files: conversations are private data), ``"umask"`` is 0666 minus the
  process umask, as for any program's new file.
* **Backups** of the replaced version, beside the file that is replaced: ``"none"``;
  ``"rolling"``: ``<name>.bak`` holds the previous version and is refreshed by every
  write (``Session.save``: the copy a failed load points to); ``"numbered"``: the previous
  version becomes the next free ``<name>.bak.N`` (1, 2, ... one more than the highest
  present) and no backup is ever overwritten, so the first one is the original
  (``harness compact --in-place``). The two kinds never share a name, so a rolling save
  after ``--in-place`` cannot overwrite the original. A backup is a hard link to the
  replaced file (it is never written to again), or a fsynced copy where links are not
  supported.
"""

from __future__ import annotations

__all__ = [
    "BackupPolicy",
    "ModePolicy",
    "WriteResult",
    "atomic_write_bytes",
    "backup_path",
    "numbered_backups",
    "write_target",
]

import contextlib
import errno
import os
import re
import shutil
import stat
import uuid
from pathlib import Path
from typing import Literal

import attrs

from harness.errors import TargetNotRegularFileError

BackupPolicy = Literal["none", "rolling", "numbered"]
"""How :func:`atomic_write_bytes` keeps the version it replaces (see the module docstring)."""

ModePolicy = Literal["private", "umask"]
"""The permission bits of a *new* file: exactly 0600, or 0666 minus the umask."""

_PRIVATE_MODE = 0o600
_DEFAULT_MODE = 0o666


@attrs.frozen
class WriteResult:
    """What :func:`atomic_write_bytes` wrote.

    Attributes:
        path: The file replaced or created: the path given, or the final target of its
            symlinks.
        backup: The backup of the replaced version, or ``None`` (no policy, or a new file).
    """

    path: Path
    backup: Path | None = None


def backup_path(path: Path, number: int | None = None) -> Path:
    """A backup beside ``path``: ``<name>.bak`` (rolling), or ``<name>.bak.<number>`` (numbered)."""
    suffix = ".bak" if number is None else f".bak.{number}"
    return path.with_name(path.name + suffix)


def numbered_backups(path: Path) -> list[Path]:
    """The numbered backups beside ``path`` (``<name>.bak.N``), oldest (lowest N) first."""
    pattern = re.compile(re.escape(path.name) + r"\.bak\.([1-9][0-9]*)")
    found: list[tuple[int, Path]] = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(path.parent):
            match = pattern.fullmatch(entry.name)
            if match:
                found.append((int(match.group(1)), path.with_name(entry.name)))
    return [backup for _, backup in sorted(found)]


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISBLK(mode):
        return "block device"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "special file"


def write_target(path: Path, *, follow_symlinks: bool = True) -> Path:
    """The regular file a write to ``path`` replaces or creates, checked before any write.

    Returns:
        ``path`` itself when it is a regular file or does not exist yet, else the final
        target of its symlinks (an existing regular file).

    Raises:
        TargetNotRegularFileError: ``path`` (or what its links point to) is a directory,
            FIFO, device, socket or other special file; or ``path`` is a dangling
            symlink, a symlink loop, or a symlink while ``follow_symlinks`` is false.
        OSError: ``path`` cannot be examined (e.g. permission denied on its folder).
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return path
    target = path
    if stat.S_ISLNK(info.st_mode):
        link = Path(os.readlink(path))
        if not follow_symlinks:
            raise TargetNotRegularFileError(path, "symlink", target=link)
        try:
            target = Path(os.path.realpath(path, strict=True))
            info = os.stat(target)
        except (FileNotFoundError, NotADirectoryError):
            raise TargetNotRegularFileError(path, "dangling symlink", target=link) from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise TargetNotRegularFileError(path, "symlink loop", target=link) from None
            raise
    if not stat.S_ISREG(info.st_mode):
        raise TargetNotRegularFileError(path, _kind(info.st_mode), target=None if target == path else target)
    return target


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


def _temp_name(directory: Path, name: str) -> Path:
    return directory / f".{name}.{uuid.uuid4().hex[:12]}.tmp"


def _copy_durably(source: Path, destination: Path) -> None:
    """Copy ``source`` (content, mode, times) to a new ``destination`` and fsync it."""
    shutil.copy2(source, destination)
    fd = os.open(destination, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _link_or_copy_over(source: Path, destination: Path) -> None:
    """Atomically make ``destination`` hold ``source``'s content (hard link, else copy), replacing it."""
    tmp = _temp_name(destination.parent, destination.name)
    try:
        try:
            os.link(source, tmp)
        except OSError:
            _copy_durably(source, tmp)
        os.replace(tmp, destination)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _keep_numbered(path: Path) -> Path:
    """Keep ``path`` as the next free ``<name>.bak.N``; never replaces an existing file."""
    existing = numbered_backups(path)
    number = int(existing[-1].name.rsplit(".", 1)[1]) + 1 if existing else 1
    while True:
        backup = backup_path(path, number)
        try:
            os.link(path, backup)  # fails if the name is taken: no backup is ever overwritten
            return backup
        except FileExistsError:
            number += 1
            continue
        except OSError:
            pass  # no hard links here: claim the name, then move a durable copy onto the claim
        try:
            os.close(os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _PRIVATE_MODE))
        except FileExistsError:
            number += 1
            continue
        _link_or_copy_over(path, backup)
        return backup


def _set_mode(fd: int, existing: os.stat_result | None, policy: ModePolicy) -> None:
    if existing is None:
        if policy == "private":
            os.fchmod(fd, _PRIVATE_MODE)  # exactly 0600, whatever the umask
        return  # "umask": os.open applied it to 0666
    current = os.fstat(fd)
    fchown = getattr(os, "fchown", None)
    if fchown is not None and (current.st_uid, current.st_gid) != (existing.st_uid, existing.st_gid):
        try:
            fchown(fd, existing.st_uid, existing.st_gid)
        except OSError:
            with contextlib.suppress(OSError):
                fchown(fd, -1, existing.st_gid)  # a member of the group may still keep it
    os.fchmod(fd, stat.S_IMODE(existing.st_mode))  # after chown, which may clear set-id bits


def atomic_write_bytes(
    path: Path,
    data: bytes,
    *,
    backup: BackupPolicy | bool = "rolling",
    new_file_mode: ModePolicy = "private",
    follow_symlinks: bool = True,
) -> WriteResult:
    """Replace or create ``path`` with ``data`` so that a crash leaves the old or the new content.

    Steps: check the target (:func:`write_target`); write a temporary file in the target's
    folder with the final mode, flush and fsync it; keep the replaced version as the
    ``backup`` policy says; rename the temporary file over the target; fsync the folder.

    Args:
        path: The file to write; a symlink is written through unless ``follow_symlinks``
            is false.
        data: The new content.
        backup: ``"none"``, ``"rolling"`` (``<name>.bak``) or ``"numbered"``
            (``<name>.bak.N``, never overwritten); ``True`` and ``False`` mean
            ``"rolling"`` and ``"none"``.
        new_file_mode: The mode of a new file, ``"private"`` (0600) or ``"umask"``; an
            existing file always keeps its mode (and owner and group when possible).
        follow_symlinks: Write through symlinks (the default), or refuse them.

    Returns:
        The file written and the backup kept.

    Raises:
        TargetNotRegularFileError: The target is not a regular file (see
            :func:`write_target`); nothing is written. It is an :class:`OSError` too.
        OSError: The file cannot be written; the target is untouched and no temporary
            file is left behind.
    """
    policy: BackupPolicy = ("rolling" if backup else "none") if isinstance(backup, bool) else backup
    target = write_target(path, follow_symlinks=follow_symlinks)
    directory = target.parent
    try:
        existing: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        existing = None
    tmp = _temp_name(directory, target.name)
    kept: Path | None = None
    try:
        create_mode = _DEFAULT_MODE if existing is None and new_file_mode == "umask" else _PRIVATE_MODE
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, create_mode)
        try:
            _set_mode(fd, existing, new_file_mode)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        if existing is not None and policy == "rolling":
            kept = backup_path(target)
            _link_or_copy_over(target, kept)
        elif existing is not None and policy == "numbered":
            kept = _keep_numbered(target)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(directory)
    return WriteResult(target, kept)
