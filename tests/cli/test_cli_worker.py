"""``harness worker ENGINE ...``: the engine plugin answering ``resolve_engine`` gets the rest of the line.

The engine is a test-only distribution written into a temporary folder (a package and its
``dist-info`` with an ``entry_points.txt``), found by entry-point discovery like any
installed plugin; ``HARNESS_LOAD_PLUGINS`` keeps the real engine plugins out, so the tests
do not depend on which of them are installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import harness.hooks.entrypoints as entrypoints_module
from harness.cli import cli
from harness.cli._app import EXIT_PROBLEM, EXIT_USAGE
from harness.errors import CapabilityError
from harness.hooks.manager import PluginManager

DISTRIBUTION = "harness-fixture-engine"
MODULE = "harness_fixture_engine"

ENGINE = '''
"""A test engine plugin: ``fixture`` runs a worker that writes what it was given."""

import json
import os

import click

from harness.hooks import hookimpl


@click.command()
@click.option("--queue", default="default", help="The queue to serve.")
@click.option("--exit-code", type=int, default=0, help="Exit with this code.")
@click.argument("extra", nargs=-1)
def worker(queue, exit_code, extra):
    """Serve the fixture engine's queue."""
    with open(os.environ["FIXTURE_ENGINE_OUT"], "w") as out:
        json.dump({"queue": queue, "extra": list(extra)}, out)
    click.echo(f"fixture worker serving {queue}")
    if exit_code:
        raise SystemExit(exit_code)


ASKED = []


@hookimpl
def resolve_engine(name):
    ASKED.append(name)
    if name == "fixture":
        return worker
    if name == "notclick":
        return "a string, not a command"
    if name == "raising":
        raise RuntimeError("the engine plugin is broken")
    return None
'''


def _write_distribution(root: Path) -> None:
    package = root / MODULE
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(ENGINE))
    info = root / f"{MODULE}-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {DISTRIBUTION}\nVersion: 0.1.0\n"
        "Summary: test engine (never installed)\n"
    )
    # engine.<name>: one entry point per engine the module answers, so `harness worker NAME`
    # imports it only for those names
    lines = "".join(f"engine.{name} = {MODULE}\n" for name in ("fixture", "notclick", "raising"))
    (info / "entry_points.txt").write_text(f"[harness]\n{lines}")


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The fixture engine installed (only it is loaded); yields the file its worker writes."""
    root = tmp_path / "site"
    _write_distribution(root)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv(entrypoints_module.LOAD_ENV, DISTRIBUTION)
    monkeypatch.delenv(entrypoints_module.DISABLE_ENV, raising=False)
    monkeypatch.setattr(entrypoints_module, "_warned_entries", set[tuple[str, str]]())
    out = tmp_path / "worker.json"
    monkeypatch.setenv("FIXTURE_ENGINE_OUT", str(out))
    yield out
    for name in list(sys.modules):
        if name == MODULE or name.startswith(MODULE + "."):
            del sys.modules[name]


def test_the_engine_plugin_gets_the_rest_of_the_command_line(engine: Path) -> None:
    result = CliRunner().invoke(cli, ["worker", "fixture", "--queue", "q1", "one", "--", "two"])
    assert result.exit_code == 0, result.output
    assert "fixture worker serving q1" in result.output
    assert json.loads(engine.read_text()) == {"queue": "q1", "extra": ["one", "two"]}
    assert sys.modules[MODULE].ASKED == ["fixture"]


def test_the_engine_name_is_stripped_and_lowercased_for_the_plugin(engine: Path) -> None:
    result = CliRunner().invoke(cli, ["worker", " Fixture ", "x"])
    assert result.exit_code == 0, result.output
    assert sys.modules[MODULE].ASKED == ["fixture"]
    assert json.loads(engine.read_text()) == {"queue": "default", "extra": ["x"]}


def test_help_before_the_engine_is_the_commands_help_with_the_installed_engines(engine: Path) -> None:
    result = CliRunner().invoke(cli, ["worker", "--help"])
    assert result.exit_code == 0, result.output
    assert "worker [OPTIONS] ENGINE [ARGUMENTS]..." in result.output
    assert "Installed engines: fixture, notclick, raising." in result.output
    assert MODULE not in sys.modules  # listed from the entry points, not imported


def test_help_after_the_engine_is_the_engines_help(engine: Path) -> None:
    result = CliRunner().invoke(cli, ["worker", "fixture", "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage: harness worker fixture [OPTIONS] [EXTRA]..." in result.output
    assert "The queue to serve." in result.output
    assert not engine.exists()  # --help did not run the worker


def test_the_engine_workers_exit_code_is_the_commands(engine: Path) -> None:
    result = CliRunner().invoke(cli, ["worker", "fixture", "--exit-code", "3"])
    assert result.exit_code == 3
    assert json.loads(engine.read_text())["queue"] == "default"


def test_an_engine_usage_error_is_reported_by_the_engines_command(engine: Path) -> None:
    result = CliRunner().invoke(cli, ["worker", "fixture", "--queue"])
    assert result.exit_code == 2
    assert "Option '--queue' requires an argument" in result.output
    assert not engine.exists()


def test_an_unknown_engine_is_a_usage_error_listing_the_installed_engines(engine: Path) -> None:
    result = CliRunner().invoke(cli, ["worker", "nosuch", "--queue", "q"])
    assert result.exit_code == EXIT_USAGE
    assert (
        "no installed plugin runs workers for engine 'nosuch' (installed engines: fixture, notclick, raising)"
        in result.output
    )
    assert "install harness-" not in result.output
    assert MODULE not in sys.modules, "no entry point is named engine.nosuch: no engine plugin was imported"
    assert not engine.exists()


@pytest.mark.parametrize(
    ("name", "distribution"), [("dbos", "harness-dbos"), ("Temporal", "harness-temporal")]
)
def test_a_known_engine_not_installed_names_its_distribution(
    engine: Path, name: str, distribution: str
) -> None:
    del engine
    result = CliRunner().invoke(cli, ["worker", name])
    assert result.exit_code == EXIT_USAGE
    assert f"no installed plugin runs workers for engine {name!r}; install {distribution}" in result.output


def test_a_plugin_answering_with_something_else_than_a_command_is_reported(engine: Path) -> None:
    del engine
    result = CliRunner().invoke(cli, ["worker", "notclick"])
    assert result.exit_code == EXIT_PROBLEM
    assert "answered resolve_engine with a str, not a click command" in result.output


def test_a_raising_plugin_is_a_capability_error_naming_it(engine: Path) -> None:
    del engine
    manager = PluginManager()
    manager.load_entrypoint_plugins()
    assert manager.resolve_engine("fixture") is not None
    assert manager.resolve_engine("nothing-knows-this") is None
    with pytest.raises(CapabilityError, match="'fixture'") as caught:
        manager.resolve_engine("raising")
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert "the engine plugin is broken" in str(caught.value.__cause__)


def test_without_any_engine_plugin_nothing_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(entrypoints_module.LOAD_ENV, "")  # set but empty: no plugin at all
    result = CliRunner().invoke(cli, ["worker", "fixture"])
    assert result.exit_code == EXIT_USAGE
    assert "no installed plugin runs workers for engine 'fixture'" in result.output


def test_the_console_script_runs_the_engine_worker_in_a_process(tmp_path: Path) -> None:
    root = tmp_path / "site"
    _write_distribution(root)
    out = tmp_path / "worker.json"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
        entrypoints_module.LOAD_ENV: DISTRIBUTION,
        "FIXTURE_ENGINE_OUT": str(out),
    }
    env.pop(entrypoints_module.DISABLE_ENV, None)
    script = Path(sys.executable).with_name("harness")
    done = subprocess.run(
        [str(script), "worker", "fixture", "--queue", "proc", "a"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text()) == {"queue": "proc", "extra": ["a"]}
    missing = subprocess.run(
        [str(script), "worker", "nosuch"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert missing.returncode == EXIT_USAGE
    assert missing.stderr.splitlines() == [
        "error: UsageError: no installed plugin runs workers for engine 'nosuch' "
        "(installed engines: fixture, notclick, raising)"
    ]
    failing = subprocess.run(
        [str(script), "worker", "fixture", "--exit-code", "4"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert failing.returncode == 4
