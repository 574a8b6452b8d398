"""``harness compact`` writes: modes, symlinks, refused targets, numbered backups, the window exit code."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import cli
from harness.cli._app import EXIT_OVER_WINDOW
from harness.core import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart
from harness.session import Session
from harness.wire import dump_messages, load_messages

CLEAR = "clear_tool_results:keep_pairs=1,max_fraction=0.5"
ROOMY = ["--stack", CLEAR, "--window", "1000000"]

needs_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="creating device nodes needs root"
)


def _history() -> list[CanonicalMessage]:
    messages = [CanonicalMessage.user("tidy the module")]
    for turn in range(5):
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"w{turn}", tool_name="read", args={"path": f"m{turn}.py"})
            )
        )
        messages.append(
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=f"w{turn}", tool_name="read", content=f"code {turn}\n" * 50)
            )
        )
    messages.append(CanonicalMessage.response(TextPart("tidied")))
    return messages


@contextmanager
def umask(mask: int) -> Generator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "source.json"
    path.write_bytes(dump_messages(_history()))
    return path


# ----------------------------------------------------------------------------- modes (item 13)


def test_in_place_keeps_the_input_mode(runner: CliRunner, source: Path) -> None:
    os.chmod(source, 0o644)
    with umask(0o077):
        result = runner.invoke(cli, ["compact", str(source), *ROOMY, "--in-place"])
    assert result.exit_code == 0, result.output
    assert mode_of(source) == 0o644
    assert len(load_messages(source.read_bytes())) == len(_history())


@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o027, 0o640)])
def test_a_new_out_file_follows_the_umask(
    runner: CliRunner, source: Path, tmp_path: Path, mask: int, expected: int
) -> None:
    os.chmod(source, 0o600)
    out = tmp_path / "fresh.json"
    with umask(mask):
        result = runner.invoke(cli, ["compact", str(source), *ROOMY, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert mode_of(out) == expected


def test_out_force_keeps_the_mode_of_the_file_it_replaces(
    runner: CliRunner, source: Path, tmp_path: Path
) -> None:
    out = tmp_path / "shared.json"
    out.write_text("[]")
    os.chmod(out, 0o664)
    with umask(0o077):
        result = runner.invoke(cli, ["compact", str(source), *ROOMY, "--out", str(out), "--force"])
    assert result.exit_code == 0, result.output
    assert mode_of(out) == 0o664
    assert load_messages(out.read_bytes()) != []


# ----------------------------------------------------------------------------- targets (item 14)


def test_in_place_writes_through_a_symlink_and_backs_up_the_content(
    runner: CliRunner, source: Path, tmp_path: Path
) -> None:
    original = source.read_bytes()
    link = tmp_path / "link.json"
    link.symlink_to(source.name)
    result = runner.invoke(cli, ["compact", str(link), *ROOMY, "--in-place"])
    assert result.exit_code == 0, result.output
    assert link.is_symlink()
    assert os.readlink(link) == source.name
    assert source.read_bytes() != original
    backup = tmp_path / "source.json.bak.1"
    assert not backup.is_symlink()
    assert backup.read_bytes() == original
    assert f"through the symlink, to {source}" in result.stdout
    assert f"previous version kept as {backup}" in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "source.json", "source.json.bak.1"]


def test_out_through_a_symlink_replaces_its_target(runner: CliRunner, source: Path, tmp_path: Path) -> None:
    real = tmp_path / "real-out.json"
    real.write_text("[]")
    link = tmp_path / "out-link.json"
    link.symlink_to(real)
    result = runner.invoke(cli, ["compact", str(source), *ROOMY, "--out", str(link), "--force"])
    assert result.exit_code == 0, result.output
    assert link.is_symlink()
    assert len(load_messages(real.read_bytes())) == len(_history())


def test_out_a_dangling_symlink_is_refused(runner: CliRunner, source: Path, tmp_path: Path) -> None:
    link = tmp_path / "dangling.json"
    link.symlink_to(tmp_path / "nowhere.json")
    result = runner.invoke(cli, ["compact", str(source), *ROOMY, "--out", str(link), "--force"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: TargetNotRegularFileError: ")
    assert "dangling symlink" in result.stderr
    assert not (tmp_path / "nowhere.json").exists()
    assert link.is_symlink()


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_out_a_fifo_is_refused(runner: CliRunner, source: Path, tmp_path: Path, force: list[str]) -> None:
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    result = runner.invoke(cli, ["compact", str(source), *ROOMY, "--out", str(fifo), *force])
    assert result.exit_code == 2
    assert f"refusing to write {fifo}: it is a FIFO, not a regular file" in result.stderr
    assert result.stdout == ""
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_out_a_folder_is_refused(runner: CliRunner, source: Path, tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    result = runner.invoke(cli, ["compact", str(source), *ROOMY, "--out", str(folder), "--force"])
    assert result.exit_code == 2
    assert "it is a directory" in result.stderr
    assert list(folder.iterdir()) == []


@needs_root
def test_out_a_character_device_is_refused_even_with_force(
    runner: CliRunner, source: Path, tmp_path: Path
) -> None:
    device = tmp_path / "full"
    os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # a /dev/full of our own
    result = runner.invoke(cli, ["compact", str(source), *ROOMY, "--out", str(device), "--force"])
    assert result.exit_code == 2
    assert "it is a character device" in result.stderr
    assert stat.S_ISCHR(os.lstat(device).st_mode)
    assert os.lstat(device).st_rdev == os.makedev(1, 7)


def test_in_place_on_a_fifo_is_refused_before_reading_it(tmp_path: Path) -> None:
    fifo = tmp_path / "input-pipe.json"
    os.mkfifo(fifo)
    script = "import sys; from harness.cli import main; sys.exit(main(sys.argv[1:]))"
    completed = subprocess.run(
        [sys.executable, "-c", script, "compact", str(fifo), "--stack", CLEAR, "--in-place"],
        capture_output=True,
        text=True,
        timeout=60,  # reading the FIFO first would block forever
        check=False,
    )
    assert completed.returncode == 2
    assert "TargetNotRegularFileError" in completed.stderr
    assert "FIFO" in completed.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_out_a_hard_link_to_the_input_is_refused(runner: CliRunner, source: Path, tmp_path: Path) -> None:
    alias = tmp_path / "alias.json"
    os.link(source, alias)
    original = source.read_bytes()
    result = runner.invoke(cli, ["compact", str(source), *ROOMY, "--out", str(alias), "--force"])
    assert result.exit_code == 2
    assert "--out names the input file" in result.stderr
    assert source.read_bytes() == original


# ----------------------------------------------------------------------------- backups (item 15)


def test_a_second_in_place_run_keeps_the_original(runner: CliRunner, source: Path, tmp_path: Path) -> None:
    original = source.read_bytes()
    first = runner.invoke(cli, ["compact", str(source), "--stack", CLEAR, "--in-place", "--json"])
    assert first.exit_code == 0, first.output
    after_first = source.read_bytes()
    second = runner.invoke(
        cli,
        ["compact", str(source), "--stack", "sliding_window:max_messages=4,keep_messages=3", "--in-place"],
    )
    assert second.exit_code == 0, second.output
    assert (tmp_path / "source.json.bak.1").read_bytes() == original
    assert (tmp_path / "source.json.bak.2").read_bytes() == after_first
    assert json.loads(first.stdout)["backup"] == str(tmp_path / "source.json.bak.1")
    assert f"previous version kept as {tmp_path / 'source.json.bak.2'}" in second.stdout
    assert source.read_bytes() != after_first


def test_saving_a_session_after_in_place_keeps_the_original(runner: CliRunner, tmp_path: Path) -> None:
    path = Session.new(messages=_history(), session_id="kept").save(tmp_path / "kept.json")
    original = path.read_bytes()
    result = runner.invoke(cli, ["compact", str(path), *ROOMY, "--in-place"])
    assert result.exit_code == 0, result.output
    session = Session.load(path)
    session.save()
    session.save()
    assert (tmp_path / "kept.json.bak.1").read_bytes() == original
    assert Session.load(tmp_path / "kept.json.bak").session_id == "kept"


def test_out_writes_no_backup(runner: CliRunner, source: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    out.write_text("[]")
    result = runner.invoke(cli, ["compact", str(source), *ROOMY, "--out", str(out), "--force", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["backup"] is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "source.json"]


# ----------------------------------------------------------------------------- over the window (item 16)


def test_a_result_over_the_window_warns_and_exits_3(runner: CliRunner, source: Path, tmp_path: Path) -> None:
    out = tmp_path / "still-big.json"
    result = runner.invoke(
        cli, ["compact", str(source), "--stack", CLEAR, "--window", "50", "--out", str(out), "--json"]
    )
    assert result.exit_code == EXIT_OVER_WINDOW == 3
    report = json.loads(result.stdout)
    over = report["tokens_after"] - 50
    assert report["tokens_over_window"] == over > 0
    assert f"warning: the result is {over:,} tokens over --window 50: {report['tokens_after']:,} tokens" in (
        result.stderr
    )
    assert report["written"] == str(out)
    assert out.exists()


def test_a_dry_run_over_the_window_also_exits_3(runner: CliRunner, source: Path, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["compact", str(source), "--stack", CLEAR, "--window", "50", "--dry-run"])
    assert result.exit_code == 3
    assert "warning: the result is " in result.stderr
    assert "dry run: nothing written" in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["source.json"]


def test_a_result_within_the_window_exits_0_without_warning(runner: CliRunner, source: Path) -> None:
    result = runner.invoke(cli, ["compact", str(source), *ROOMY, "--dry-run", "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["tokens_over_window"] == 0
    assert "warning:" not in result.stderr


def test_a_broken_invariant_wins_over_the_window(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "unanswered.json"
    path.write_bytes(
        dump_messages(
            [
                CanonicalMessage.user("go"),
                CanonicalMessage.response(
                    ToolCallPart(tool_call_id="u1", tool_name="bash", args={"command": "ls"})
                ),
                CanonicalMessage.user("never answered"),
            ]
        )
    )
    result = runner.invoke(cli, ["compact", str(path), "--stack", "", "--window", "1", "--in-place"])
    assert result.exit_code == 1
    assert "warning: the result is " in result.stderr
    assert "breaks an invariant" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["unanswered.json"]


def test_out_force_from_standard_input(runner: CliRunner, source: Path, tmp_path: Path) -> None:
    out = tmp_path / "from-stdin.json"
    out.write_text("[]")
    result = runner.invoke(
        cli, ["compact", "-", *ROOMY, "--out", str(out), "--force"], input=source.read_bytes()
    )
    assert result.exit_code == 0, result.output
    assert len(load_messages(out.read_bytes())) == len(_history())
