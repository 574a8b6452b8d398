"""``atomic_write_bytes``: modes, symlinks, targets that are not regular files, backup policies."""

from __future__ import annotations

import os
import stat
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness.errors import SessionSaveError, TargetNotRegularFileError
from harness.session import Session
from harness.session.files import (
    ModePolicy,
    atomic_write_bytes,
    backup_path,
    numbered_backups,
    write_target,
)

needs_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="creating device nodes and chown need root"
)


@contextmanager
def umask(mask: int) -> Generator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


# ----------------------------------------------------------------------------- modes


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o000, 0o277])
def test_a_new_private_file_is_exactly_0600_whatever_the_umask(tmp_path: Path, mask: int) -> None:
    target = tmp_path / "private.json"
    with umask(mask):
        atomic_write_bytes(target, b"{}", new_file_mode="private")
    assert mode_of(target) == 0o600


@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_a_new_umask_file_follows_the_umask(tmp_path: Path, mask: int, expected: int) -> None:
    target = tmp_path / "shared.json"
    with umask(mask):
        atomic_write_bytes(target, b"[]", new_file_mode="umask")
    assert mode_of(target) == expected


@pytest.mark.parametrize("policy", ["private", "umask"])
@pytest.mark.parametrize("existing_mode", [0o644, 0o640, 0o604, 0o2750])
def test_an_existing_file_keeps_its_mode(tmp_path: Path, policy: ModePolicy, existing_mode: int) -> None:
    target = tmp_path / "kept.json"
    target.write_bytes(b"old")
    os.chmod(target, existing_mode)
    with umask(0o077):
        atomic_write_bytes(target, b"new", new_file_mode=policy)
    assert target.read_bytes() == b"new"
    assert mode_of(target) == existing_mode


@needs_root
def test_an_existing_file_keeps_its_owner_and_group(tmp_path: Path) -> None:
    target = tmp_path / "owned.json"
    target.write_bytes(b"old")
    os.chown(target, 4321, 8765)
    atomic_write_bytes(target, b"new")
    info = os.stat(target)
    assert (info.st_uid, info.st_gid) == (4321, 8765)
    assert target.read_bytes() == b"new"


def test_session_save_creates_0600_files_and_keeps_a_chosen_mode(tmp_path: Path) -> None:
    session = Session.new(session_id="modes", project_id="p" * 16)
    with umask(0o000):
        path = session.save(tmp_path / "modes.json")
    assert mode_of(path) == 0o600
    os.chmod(path, 0o640)
    session.save()
    assert mode_of(path) == 0o640


# ----------------------------------------------------------------------------- symlinks


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    real = real_dir / "data.json"
    real.write_bytes(b"original")
    os.chmod(real, 0o640)
    link = tmp_path / "link.json"
    link.symlink_to(Path("real") / "data.json")  # relative, as users make them
    result = atomic_write_bytes(link, b"new", backup="numbered", new_file_mode="umask")
    assert link.is_symlink()
    assert os.readlink(link) == str(Path("real") / "data.json")
    assert real.read_bytes() == b"new"
    assert mode_of(real) == 0o640
    assert result.path == real
    assert result.backup == real_dir / "data.json.bak.1"
    assert not (real_dir / "data.json.bak.1").is_symlink()
    assert (real_dir / "data.json.bak.1").read_bytes() == b"original"
    assert leftovers(tmp_path) == leftovers(real_dir) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "real"]


def test_a_chain_of_symlinks_is_followed_to_the_file(tmp_path: Path) -> None:
    real = tmp_path / "data.json"
    real.write_bytes(b"v1")
    (tmp_path / "middle.json").symlink_to(real)
    (tmp_path / "outer.json").symlink_to(tmp_path / "middle.json")
    assert write_target(tmp_path / "outer.json") == real
    atomic_write_bytes(tmp_path / "outer.json", b"v2")
    assert (tmp_path / "outer.json").is_symlink()
    assert (tmp_path / "middle.json").is_symlink()
    assert real.read_bytes() == b"v2"
    assert backup_path(real).read_bytes() == b"v1"


def test_the_rolling_backup_of_a_linked_file_is_a_copy_of_the_content(tmp_path: Path) -> None:
    real = tmp_path / "data.json"
    real.write_bytes(b"first")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    atomic_write_bytes(link, b"second")
    backup = backup_path(real)
    assert not backup.is_symlink()
    assert backup.read_bytes() == b"first"
    assert not backup_path(link).exists()


def test_symlinks_are_refused_when_asked(tmp_path: Path) -> None:
    real = tmp_path / "data.json"
    real.write_bytes(b"keep")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    with pytest.raises(TargetNotRegularFileError) as info:
        atomic_write_bytes(link, b"new", follow_symlinks=False)
    assert info.value.kind == "symlink"
    assert info.value.path == link
    assert info.value.target == real
    assert real.read_bytes() == b"keep"
    assert link.is_symlink()


def test_a_dangling_symlink_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "dangling.json"
    link.symlink_to(tmp_path / "missing" / "nowhere.json")
    with pytest.raises(TargetNotRegularFileError, match="dangling symlink") as info:
        atomic_write_bytes(link, b"new")
    assert info.value.kind == "dangling symlink"
    assert info.value.target == tmp_path / "missing" / "nowhere.json"
    assert link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling.json"]


def test_a_symlink_loop_is_refused(tmp_path: Path) -> None:
    first = tmp_path / "a.json"
    second = tmp_path / "b.json"
    first.symlink_to(second)
    second.symlink_to(first)
    with pytest.raises(TargetNotRegularFileError) as info:
        atomic_write_bytes(first, b"new")
    assert info.value.kind == "symlink loop"
    assert first.is_symlink()
    assert second.is_symlink()


# ----------------------------------------------------------------------------- not regular files


def test_a_fifo_is_refused_and_stays_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(TargetNotRegularFileError, match=r"it is a FIFO, not a regular file") as info:
        atomic_write_bytes(fifo, b"new", backup="numbered")
    assert info.value.kind == "FIFO"
    assert info.value.path == fifo
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe.json"]


def test_a_link_to_a_fifo_is_refused_naming_both(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "link.json"
    link.symlink_to(fifo)
    with pytest.raises(TargetNotRegularFileError) as info:
        atomic_write_bytes(link, b"new")
    assert info.value.kind == "FIFO"
    assert info.value.target == fifo
    assert str(fifo) in str(info.value)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert link.is_symlink()


def test_a_directory_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "folder.json"
    folder.mkdir()
    with pytest.raises(TargetNotRegularFileError) as info:
        atomic_write_bytes(folder, b"new")
    assert info.value.kind == "directory"
    assert folder.is_dir()


@needs_root
def test_a_character_device_is_refused_and_stays_a_device(tmp_path: Path) -> None:
    device = tmp_path / "full"
    os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # what /dev/full is
    with pytest.raises(TargetNotRegularFileError) as info:
        atomic_write_bytes(device, b"new")
    assert info.value.kind == "character device"
    assert stat.S_ISCHR(os.lstat(device).st_mode)
    assert os.lstat(device).st_rdev == os.makedev(1, 7)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full"]


def test_the_error_is_an_os_error_and_session_save_reports_it(tmp_path: Path) -> None:
    fifo = tmp_path / "session.json"
    os.mkfifo(fifo)
    session = Session.new(session_id="fifo", project_id="p" * 16)
    with pytest.raises(SessionSaveError, match="FIFO") as info:
        session.save(fifo)
    assert isinstance(info.value.__cause__, TargetNotRegularFileError)
    assert isinstance(info.value.__cause__, OSError)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


# ----------------------------------------------------------------------------- backups


def test_numbered_backups_never_overwrite_an_older_one(tmp_path: Path) -> None:
    target = tmp_path / "h.json"
    target.write_bytes(b"original")
    first = atomic_write_bytes(target, b"second", backup="numbered")
    second = atomic_write_bytes(target, b"third", backup="numbered")
    assert first.backup == tmp_path / "h.json.bak.1"
    assert second.backup == tmp_path / "h.json.bak.2"
    assert (tmp_path / "h.json.bak.1").read_bytes() == b"original"
    assert (tmp_path / "h.json.bak.2").read_bytes() == b"second"
    assert target.read_bytes() == b"third"
    assert numbered_backups(target) == [tmp_path / "h.json.bak.1", tmp_path / "h.json.bak.2"]


def test_numbered_backups_count_on_from_the_highest(tmp_path: Path) -> None:
    target = tmp_path / "h.json"
    target.write_bytes(b"now")
    (tmp_path / "h.json.bak.3").write_bytes(b"kept")
    (tmp_path / "h.json.bak.10").write_bytes(b"kept too")
    (tmp_path / "h.json.bak.x").write_bytes(b"not a numbered backup")
    result = atomic_write_bytes(target, b"next", backup="numbered")
    assert result.backup == tmp_path / "h.json.bak.11"
    assert (tmp_path / "h.json.bak.11").read_bytes() == b"now"
    assert (tmp_path / "h.json.bak.3").read_bytes() == b"kept"
    assert (tmp_path / "h.json.bak.10").read_bytes() == b"kept too"


def test_a_backup_name_taken_meanwhile_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "h.json"
    target.write_bytes(b"now")
    (tmp_path / "h.json.bak.1").write_bytes(b"written by a concurrent run")
    monkeypatch.setattr("harness.session.files.numbered_backups", lambda path: [])  # it was not there yet
    result = atomic_write_bytes(target, b"next", backup="numbered")
    assert result.backup == tmp_path / "h.json.bak.2"
    assert (tmp_path / "h.json.bak.1").read_bytes() == b"written by a concurrent run"
    assert (tmp_path / "h.json.bak.2").read_bytes() == b"now"


def test_without_hard_links_backups_are_durable_copies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(source: object, destination: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    target = tmp_path / "h.json"
    target.write_bytes(b"v1")
    atomic_write_bytes(target, b"v2", backup="numbered")
    (tmp_path / "h.json.bak.2").write_bytes(b"someone else's")
    atomic_write_bytes(target, b"v3", backup="numbered")
    atomic_write_bytes(target, b"v4", backup="rolling")
    assert (tmp_path / "h.json.bak.1").read_bytes() == b"v1"
    assert (tmp_path / "h.json.bak.2").read_bytes() == b"someone else's"
    assert (tmp_path / "h.json.bak.3").read_bytes() == b"v2"
    assert (tmp_path / "h.json.bak").read_bytes() == b"v3"
    assert target.read_bytes() == b"v4"
    assert leftovers(tmp_path) == []


def test_a_rolling_backup_leaves_numbered_ones_alone(tmp_path: Path) -> None:
    target = tmp_path / "s.json"
    target.write_bytes(b"original")
    atomic_write_bytes(target, b"compacted", backup="numbered")
    atomic_write_bytes(target, b"saved once", backup="rolling")
    atomic_write_bytes(target, b"saved twice", backup="rolling")
    assert (tmp_path / "s.json.bak.1").read_bytes() == b"original"
    assert (tmp_path / "s.json.bak").read_bytes() == b"saved once"


def test_bool_backup_values_still_work(tmp_path: Path) -> None:
    target = tmp_path / "b.json"
    target.write_bytes(b"one")
    assert atomic_write_bytes(target, b"two", backup=False).backup is None
    assert atomic_write_bytes(target, b"three", backup=True).backup == backup_path(target)
    assert backup_path(target).read_bytes() == b"two"


def test_a_new_file_has_no_backup(tmp_path: Path) -> None:
    result = atomic_write_bytes(tmp_path / "new.json", b"x", backup="numbered")
    assert result.backup is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.json"]
