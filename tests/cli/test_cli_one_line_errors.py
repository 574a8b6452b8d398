"""Every subcommand, given bad arguments, and every worker, given an unreachable server: one line, exit 2.

Each case runs in its own process (forked from one that imported the CLI once, see
``cli_fork_driver.py``; one case runs the ``harness`` console script itself) and checks that
standard error holds exactly one line, ``error: <Type>: <message>``,
and the exit status is 2. The subcommands are discovered from the click group, so a new
one is covered by the ``--no-such-option`` case without being listed here.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from harness.cli import cli

HARNESS = str(Path(sys.executable).with_name("harness"))
DRIVER = Path(__file__).with_name("cli_fork_driver.py")


def _command_paths() -> list[list[str]]:
    paths: list[list[str]] = []
    for name, command in sorted(cli.commands.items()):
        paths.append([name])
        if isinstance(command, click.Group):
            paths.extend([name, sub] for sub in sorted(command.commands))
    return paths


def _run_all(
    cases: list[list[str]], *, cwd: Path, env: dict[str, str]
) -> list[subprocess.CompletedProcess[str]]:
    """Run every case in its own process, forked from one that imported the CLI once."""
    done = subprocess.run(
        [sys.executable, str(DRIVER)],
        input=json.dumps(cases),
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return [
        subprocess.CompletedProcess(r["args"], r["returncode"], r["stdout"], r["stderr"])
        for r in json.loads(done.stdout)
    ]


def _assert_one_line(done: subprocess.CompletedProcess[str], kind: str | None = None) -> str:
    lines = done.stderr.splitlines()
    assert done.returncode == 2, (done.args, done.returncode, done.stderr)
    assert len(lines) == 1, (done.args, done.stderr)
    assert lines[0].startswith("error: "), (done.args, lines[0])
    assert "Traceback" not in done.stderr
    if kind is not None:
        assert lines[0].startswith(f"error: {kind}: "), (done.args, lines[0])
    return lines[0]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "sessions").mkdir()
    environ = {**os.environ, "HARNESS_SESSION_DIR": str(tmp_path / "sessions"), "COLUMNS": "200"}
    environ.pop("HARNESS_STORE", None)
    return environ


def test_every_subcommand_with_an_unknown_option_prints_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    paths = _command_paths()
    assert ["sessions", "list"] in paths
    assert ["worker"] in paths
    for done in _run_all([[*path, "--no-such-option"] for path in paths], cwd=tmp_path, env=env):
        line = _assert_one_line(done)
        if done.args[0] != "worker":  # the worker's first argument is the engine
            assert line.startswith("error: NoSuchOption: No such option '--no-such-option'."), line


def test_bad_values_and_missing_files_print_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    missing = str(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    cases: list[tuple[list[str], str]] = [
        (["nope"], "NoSuchCommand"),
        (["inspect"], "MissingParameter"),
        (["inspect", missing], "BadParameter"),
        (["inspect", str(bad)], "HistoryFileError"),
        (["compact", str(bad), "--dry-run"], "HistoryFileError"),
        (["compact", missing], "BadParameter"),
        (["stats", missing], "BadParameter"),
        (["eval", str(bad)], "HistoryFileError"),
        (["eval", str(bad), "--budget", "many"], "BadParameter"),
        (["replay", str(bad)], "HistoryFileError"),
        (["run", "x", "--stack", "no_such_capability"], "StackConfigError"),
        (["demo", "--budget", "-5"], "BadParameter"),
        (["sessions", "show", "no-such-session"], "SessionNotFoundError"),
        (["sessions", "list", "--store", "nope://x"], "StoreResolutionError"),
        (["sessions", "list", "--store", "sqlite:////proc/no/such/folder/s.db"], "SessionStoreError"),
        (["hooks", "extra-argument"], "UsageError"),
        (["plugins", "--json", "extra"], "UsageError"),
        (["worker"], "MissingParameter"),
        (["worker", "nope"], "UsageError"),
        (["worker", "dbos"], "MissingParameter"),
        (["worker", "temporal", "--sticky-timeout", "soon"], "BadParameter"),
        (["worker", "temporal", "--agent", "no_such_module:agent"], "AgentLoadError"),
        (["worker", "temporal", "--store", "app=sqlite:////proc/no/such/folder/s.db"], "SessionStoreError"),
        (
            ["worker", "dbos", "--system-db", f"sqlite:///{tmp_path}/d.sqlite", "--agent", "no_such:x"],
            "AgentLoadError",
        ),
        (["-v", "run", "--no-such-option"], "NoSuchOption"),
    ]
    for done, (_, kind) in zip(_run_all([c for c, _ in cases], cwd=tmp_path, env=env), cases, strict=True):
        if done.args == ["-v", "run", "--no-such-option"]:  # -v: the usage hint follows the line
            assert done.returncode == 2
            lines = done.stderr.splitlines()
            assert lines[0] == "error: NoSuchOption: No such option '--no-such-option'."
            assert lines[1].startswith("Usage: harness run ")
            continue
        _assert_one_line(done, kind)


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers (a server that hangs)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener.getsockname()[1]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_workers_against_unreachable_servers_print_one_line_naming_what_to_check(
    tmp_path: Path, env: dict[str, str], silent_port: int
) -> None:
    closed = _closed_port()
    cases = [
        ["worker", "dbos", "--system-db", f"postgresql://127.0.0.1:{closed}/dbos", "--connect-timeout", "2"],
        [
            "worker",
            "dbos",
            "--system-db",
            f"postgresql://127.0.0.1:{silent_port}/dbos",
            "--connect-timeout",
            "1",
        ],
        ["worker", "dbos", "--system-db", "mysql://x"],
        ["worker", "dbos", "--system-db", f"sqlite:///{tmp_path}/no/such/folder/dbos.sqlite"],
        ["worker", "temporal", "--address", f"127.0.0.1:{closed}", "--connect-timeout", "2"],
        ["worker", "temporal", "--address", f"127.0.0.1:{silent_port}", "--connect-timeout", "1"],
    ]
    preimport = "harness_dbos.cli,harness_dbos.preflight,harness_dbos.engine,harness_temporal.engine"
    done = _run_all(cases, cwd=tmp_path, env={**env, "HARNESS_PREIMPORT": preimport})
    lines = [_assert_one_line(d, "EngineConnectionError") for d in done]
    assert "cannot connect to PostgreSQL" in lines[0]
    assert "check that the server runs there" in lines[0]
    assert "cannot connect to PostgreSQL" in lines[1]
    assert "not 'mysql'" in lines[2]
    assert "pass --system-db postgresql://HOST/DATABASE or sqlite:///FILE" in lines[2]
    assert "does not exist" in lines[3]
    assert "Connection refused" in lines[4]
    assert "check that a Temporal server runs at" in lines[4]
    assert "no answer within 1s" in lines[5]


def test_the_console_script_prints_one_line_for_a_usage_error(tmp_path: Path, env: dict[str, str]) -> None:
    done = subprocess.run(
        [HARNESS, "stats", "--no-such-option"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert _assert_one_line(done) == "error: NoSuchOption: No such option '--no-such-option'."


def test_stats_reports_each_bad_file_and_goes_on(tmp_path: Path, env: dict[str, str]) -> None:
    good = tmp_path / "good.json"
    good.write_text('[{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"}]}]')
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    empty = tmp_path / "empty.json"
    empty.write_text("")
    table, document = _run_all(
        [["stats", str(bad), str(good), str(empty)], ["stats", "--json", str(bad), str(good), str(empty)]],
        cwd=tmp_path,
        env=env,
    )
    for done in (table, document):
        assert done.returncode == 2, done.stderr
        lines = done.stderr.splitlines()
        assert len(lines) == 2, done.stderr
        assert lines[0].startswith(f"error: HistoryFileError: {bad}: ")
        assert lines[1] == f"error: HistoryFileError: {empty}: the file is empty"
    assert "good.json" in table.stdout
    parsed = json.loads(document.stdout)
    assert [row["file"] for row in parsed["files"]] == [str(good)]
    assert [(e["file"], e["error"]) for e in parsed["errors"]] == [
        (str(bad), "HistoryFileError"),
        (str(empty), "HistoryFileError"),
    ]


@pytest.mark.parametrize(
    ("where", "level"),
    [
        (["-v", "stats"], logging.INFO),
        (["stats", "-v"], logging.INFO),
        (["stats", "-vv"], logging.DEBUG),
        (["stats", "--quiet"], logging.ERROR),
        (["sessions", "list", "-v"], logging.INFO),
    ],
)
def test_global_options_work_after_the_subcommand_too(
    tmp_path: Path, env: dict[str, str], where: list[str], level: int
) -> None:
    history = tmp_path / "h.json"
    history.write_text('[{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"}]}]')
    logger = logging.getLogger("harness")
    before = (logger.level, list(logger.handlers))
    extra = [str(history)] if "stats" in where else []
    try:
        result = CliRunner(env=env).invoke(cli, [*where, *extra])
        assert result.exit_code == 0, result.output
        assert logger.level == level
    finally:
        logger.setLevel(before[0])
        for handler in list(logger.handlers):
            if handler not in before[1]:
                logger.removeHandler(handler)
