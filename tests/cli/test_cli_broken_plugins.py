"""``harness plugins`` / ``harness hooks`` with a broken plugin installed; the plugin filters at the CLI."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import harness.hooks.entrypoints as entrypoints_module
from harness.cli import cli
from harness.cli._app import EXIT_PROBLEM, EXIT_USAGE
from harness.errors import UnknownPluginNameWarning

FIXTURES = Path(__file__).parents[1] / "hooks" / "fixtures" / "entrypoints"
TRANSCRIPT = Path(__file__).parents[2] / "harness" / "cli" / "demo" / "transcript.json"
BUNDLED = [
    "sliding_window",
    "clear_tool_results",
    "dedupe_file_reads",
    "limit_warner",
    "summarizing",
    "tiered",
]
BROKEN = ["fixture_broken", "fixture_plain_class", "fixture_bad_hook", "fixture_function"]


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with no plugin-filter entry warned about, and no filter set."""
    monkeypatch.setattr(entrypoints_module, "_warned_entries", set[tuple[str, str]]())
    monkeypatch.delenv(entrypoints_module.LOAD_ENV, raising=False)
    monkeypatch.delenv(entrypoints_module.DISABLE_ENV, raising=False)


@pytest.fixture
def broken_installed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The fixture distributions (one good, one broken) installed beside the bundled plugins."""
    monkeypatch.syspath_prepend(str(FIXTURES))
    yield
    for module in list(sys.modules):
        if module.startswith(("harness_fixture_good", "harness_fixture_broken")):
            del sys.modules[module]


def test_plugins_json_lists_the_broken_plugins_with_their_error_and_exits_1(broken_installed: None) -> None:
    result = CliRunner().invoke(cli, ["plugins", "--json"])
    assert result.exit_code == EXIT_PROBLEM, result.output
    rows = {row["name"]: row for row in json.loads(result.stdout)["plugins"]}
    for name in [*BUNDLED, "fixture_observer", "fixture_capability"]:  # the others are still listed
        assert rows[name]["error"] is None
        assert rows[name]["hooks"]
    for name in BROKEN:
        row = rows[name]
        assert row["distribution"] == "harness-fixture-broken"
        assert row["version"] == "0.2.0"
        assert row["kind"] is None
        assert row["hooks"] == []
        assert row["entry_point"].startswith("harness_fixture_broken.")
        assert f"Disable it with HARNESS_DISABLE_PLUGINS={name}" in row["error"]
    assert (
        "ImportError: harness_fixture_broken needs the 'frobnicate' package"
        in rows["fixture_broken"]["error"]
    )
    names = list(rows)
    assert names[-len(BROKEN) :] == BROKEN  # broken ones last, in discovery order


def test_plugins_table_shows_the_broken_plugins_and_their_errors(broken_installed: None) -> None:
    result = CliRunner().invoke(cli, ["plugins"])
    assert result.exit_code == EXIT_PROBLEM, result.output
    for name in [*BUNDLED, *BROKEN]:
        assert name in result.stdout
    assert "failed to load" in result.stdout
    assert f"{len(BROKEN)} plugins failed to load:" in result.stdout
    assert "fixture_broken: harness plugin 'fixture_broken'" in result.stdout
    assert "did you mean 'before_model_request'?" in result.stdout


def test_disabling_the_broken_plugin_makes_plugins_succeed_again(broken_installed: None) -> None:
    result = CliRunner().invoke(
        cli, ["plugins", "--json"], env={"HARNESS_DISABLE_PLUGINS": "harness-fixture-broken"}
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["plugins"]
    assert {row["name"] for row in rows} >= {*BUNDLED, "fixture_observer"}
    assert all(row["error"] is None for row in rows)


def test_hooks_still_runs_and_names_the_broken_plugins_on_stderr(broken_installed: None) -> None:
    result = CliRunner().invoke(cli, ["hooks", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.stdout)["hooks"]}
    assert "fixture_observer" in rows["on_compaction"]["implementers"]
    assert not any(name in row["implementers"] for row in rows.values() for name in BROKEN)
    assert "4 harness plugins failed to load" in result.stderr
    assert "fixture_bad_hook" in result.stderr
    assert "harness plugins" in result.stderr


def test_compact_with_a_disabled_capability_says_it_is_disabled() -> None:
    result = CliRunner().invoke(
        cli,
        ["compact", str(TRANSCRIPT), "--stack", "summarizing", "--dry-run"],
        env={"HARNESS_DISABLE_PLUGINS": "summarizing"},
    )
    assert result.exit_code == EXIT_USAGE
    assert "unknown capability" not in result.stderr
    assert (
        "capability 'summarizing' is installed but disabled by HARNESS_DISABLE_PLUGINS (entry 'summarizing')"
        in result.stderr
    )


def test_compact_with_a_capability_the_allow_list_omits_says_so() -> None:
    result = CliRunner().invoke(
        cli,
        ["compact", str(TRANSCRIPT), "--stack", "summarizing", "--dry-run"],
        env={"HARNESS_LOAD_PLUGINS": "tiered"},
    )
    assert result.exit_code == EXIT_USAGE
    assert (
        "capability 'summarizing' is installed but not listed in HARNESS_LOAD_PLUGINS (tiered)"
        in result.stderr
    )


def test_a_misspelt_disable_entry_warns_naming_it_and_the_installed_plugins() -> None:
    with pytest.warns(UnknownPluginNameWarning) as record:
        result = CliRunner().invoke(cli, ["plugins", "--json"], env={"HARNESS_DISABLE_PLUGINS": "sumarizing"})
    assert result.exit_code == 0, result.output
    messages = [str(w.message) for w in record if isinstance(w.message, UnknownPluginNameWarning)]
    assert len(messages) == 1
    assert "HARNESS_DISABLE_PLUGINS entry 'sumarizing' matches no installed harness plugin" in messages[0]
    assert "did you mean 'summarizing'?" in messages[0]
    assert all(name in messages[0] for name in BUNDLED)
    assert "summarizing" in {row["name"] for row in json.loads(result.stdout)["plugins"]}
