"""A core-only install (no capability plugin) says which distribution to install, instead of failing silently.

The plugins of this repository are installed in the test environment, so each test runs a real
subprocess whose ``sitecustomize`` hides every ``harness`` entry point but the core's: what
``pip install harness-loop`` alone gives.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from harness.hooks.bundled import BUNDLED_PLUGINS, install_command, missing_plugin_hint

REPO = Path(__file__).resolve().parents[2]
CLI = ("-c", "import sys; from harness.cli import main; main(sys.argv[1:])")

HIDE_PLUGINS = """
import importlib.metadata as md
_entry_points = md.entry_points
def entry_points(**params):
    found = _entry_points(**params)
    if params.get("group") == "harness":
        return md.EntryPoints([ep for ep in found if ep.dist is not None and ep.dist.name == "harness-loop"])
    return found
md.entry_points = entry_points
_distribution = md.distribution
def distribution(name):
    if name.startswith("harness-") and name != "harness-loop":
        raise md.PackageNotFoundError(name)
    return _distribution(name)
md.distribution = distribution
"""


def _core_only(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(HIDE_PLUGINS)
    env = {**os.environ, "PYTHONPATH": str(site), "COLUMNS": "200"}
    env.pop("HARNESS_LOAD_PLUGINS", None)
    env.pop("HARNESS_DISABLE_PLUGINS", None)
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )


def _history(tmp_path: Path) -> Path:
    path = tmp_path / "h.json"
    messages = [
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "read a.py"}]},
        {
            "kind": "response",
            "parts": [
                {
                    "part_kind": "tool-call",
                    "tool_name": "read_file",
                    "args": {"path": "a.py"},
                    "tool_call_id": "c1",
                }
            ],
        },
        {
            "kind": "request",
            "parts": [
                {
                    "part_kind": "tool-return",
                    "tool_name": "read_file",
                    "content": "x = 1\n" * 200,
                    "tool_call_id": "c1",
                }
            ],
        },
        {"kind": "response", "parts": [{"part_kind": "text", "content": "done"}]},
    ]
    path.write_text(json.dumps(messages))
    return path


def test_every_bundled_plugin_maps_to_the_distribution_that_publishes_it() -> None:
    declared: dict[str, str] = {}
    for pyproject in sorted((REPO / "plugins").glob("harness-*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text())["project"]
        for name in project.get("entry-points", {}).get("harness", {}):
            declared[name] = project["name"]
    assert dict(BUNDLED_PLUGINS) == declared


def test_the_hint_names_the_distribution_and_a_command_that_installs_it() -> None:
    assert missing_plugin_hint(["nope"]) is None
    # installed here (an allow list may leave it out): no install hint
    assert missing_plugin_hint(["sliding_window"]) is None
    assert install_command(["harness-sliding-window"]) == "pip install ./plugins/harness-sliding-window"
    for distribution in set(BUNDLED_PLUGINS.values()):  # the command's paths exist in a clone
        assert (REPO / "plugins" / distribution / "pyproject.toml").is_file()


def test_agent_with_a_bundled_capability_name_says_what_to_install(tmp_path: Path) -> None:
    script = "from harness import Agent\nAgent('test', capabilities=['sliding_window'])"
    done = _core_only(tmp_path, "-c", script)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("harness.errors.StackConfigError: ")
    assert "unknown capability 'sliding_window'" in last
    assert "pip install ./plugins/harness-sliding-window" in last


def test_compact_without_a_stack_fails_naming_the_distributions(tmp_path: Path) -> None:
    done = _core_only(tmp_path, *CLI, "compact", str(_history(tmp_path)), "--dry-run")
    assert done.returncode == 2, done.stdout
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: StackConfigError: harness compact: the default stack (tiered) needs")
    for distribution in ("harness-tiered", "harness-summarizing", "harness-sliding-window"):
        assert f"./plugins/{distribution}" in line
    assert "no capability edited" not in done.stdout


def test_compact_with_an_explicit_empty_stack_still_runs(tmp_path: Path) -> None:
    done = _core_only(tmp_path, *CLI, "compact", str(_history(tmp_path)), "--stack", "", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "no capability edited the history" in done.stdout


@pytest.mark.parametrize(
    ("stack", "distributions"),
    [
        ([], ("harness-tiered", "harness-dedupe-file-reads")),
        (["--stack", "clear+window"], ("harness-clear-tool-results", "harness-sliding-window")),
        (["--stack", "sliding_window:keep_messages=4"], ("harness-sliding-window",)),
    ],
)
def test_eval_names_the_distributions_its_stacks_need(
    tmp_path: Path, stack: list[str], distributions: tuple[str, ...]
) -> None:
    done = _core_only(tmp_path, *CLI, "eval", str(_history(tmp_path)), *stack, "--budget", "8000")
    assert done.returncode == 2, done.stdout
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: StackConfigError: ")
    for distribution in distributions:
        assert f"./plugins/{distribution}" in line
