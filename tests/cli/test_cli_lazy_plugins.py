"""What a new user hits with plugins installed, in fresh processes: nothing imported, nothing broken, unasked.

Each test runs a real process (the ``harness`` command or a script) with every plugin of
the workspace installed, and, for the broken-plugin tests, a third-party distribution that
fails to import written into a temporary site folder on ``PYTHONPATH``: a capability, an
observer (``plugin.<name>``) and a store scheme, all in one broken package.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.stores import SqliteStore

ROOT = Path(__file__).resolve().parents[2]
HARNESS = Path(sys.executable).with_name("harness")
TRANSCRIPT = ROOT / "harness" / "cli" / "demo" / "transcript.json"
BROKEN = "harness_broken_thirdparty"


def _env(tmp_path: Path, *paths: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("HARNESS_")}
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in paths)
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    env["HARNESS_STORE"] = f"sqlite:///{tmp_path}/sessions.db"
    return env


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=180, check=False)


@pytest.fixture
def broken_site(tmp_path: Path) -> Path:
    """A site folder holding one third-party distribution whose package fails to import."""
    site = tmp_path / "site"
    (site / BROKEN).mkdir(parents=True)
    (site / BROKEN / "__init__.py").write_text(
        "raise ImportError(\"harness_broken_thirdparty needs the 'frobnicate' package\")\n"
    )
    info = site / f"{BROKEN}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: harness-broken-thirdparty\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[harness]\n"
        f"broken_thirdparty = {BROKEN}:Capability\n"
        f"plugin.broken_thirdparty = {BROKEN}:plugin\n"
        f"store.brokenscheme = {BROKEN}\n"
    )
    return site


def _broken_mentions(text: str) -> int:
    return len(re.findall(r"harness plugin 'plugin\.broken_thirdparty'", text))


@pytest.mark.parametrize(
    "args",
    [
        ["sessions", "list"],
        ["demo"],
        ["compact", "--dry-run", str(TRANSCRIPT), "--stack", "sliding_window:max_messages=6,keep_messages=4"],
    ],
    ids=["sessions-list", "demo", "compact-dry-run"],
)
def test_a_broken_third_party_plugin_breaks_no_command_that_does_not_use_it(
    broken_site: Path, tmp_path: Path, args: list[str]
) -> None:
    env = _env(tmp_path, broken_site)
    if args[0] == "sessions":  # read-only: the store must exist (a missing one is an error)
        SqliteStore(tmp_path / "sessions.db").close()
    done = _run([str(HARNESS), *args], env, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert _broken_mentions(done.stderr) == 1, done.stderr  # warned once, and went on
    assert "ImportError: harness_broken_thirdparty needs the 'frobnicate' package" in done.stderr


SCRIPTS = {
    "open-sqlite": """
        import harness
        store = harness.open_store("sqlite:///{tmp}/api.db")  # the user's line
        print(type(store).__name__)
    """,
    "agent-with-a-stack-string": """
        import warnings
        warnings.filterwarnings("ignore", category=__import__("harness").HarnessExperimentalWarning)
        from harness import Agent
        from harness.models.test import TestModel
        stack = ["sliding_window:max_messages=80,keep_messages=10"]
        agent = Agent(TestModel(), capabilities=stack)  # the user's line
        print(agent.run_sync("hi").output)
    """,
}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_a_broken_third_party_plugin_breaks_no_api_path_that_does_not_use_it(
    broken_site: Path, tmp_path: Path, name: str
) -> None:
    script = tmp_path / "user.py"
    code = textwrap.dedent(SCRIPTS[name]).format(tmp=tmp_path)
    script.write_text(code)
    done = _run([sys.executable, str(script)], _env(tmp_path, broken_site), tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() in ("SqliteStore", "done")
    assert _broken_mentions(done.stderr) == 1, done.stderr
    line = next(i for i, text in enumerate(code.splitlines(), 1) if "the user's line" in text)
    assert done.stderr.startswith(f"{script}:{line}: PluginLoadWarning: "), done.stderr


@pytest.mark.parametrize(
    "code",
    [
        "from harness import Agent\nfrom harness.models.test import TestModel\n"
        'Agent(TestModel(), capabilities=["broken_thirdparty"])',
        'import harness\nharness.open_store("brokenscheme://somewhere")',
    ],
    ids=["its-capability", "its-store-scheme"],
)
def test_the_paths_that_need_the_broken_plugin_fail_naming_it(
    broken_site: Path, tmp_path: Path, code: str
) -> None:
    done = _run([sys.executable, "-c", code], _env(tmp_path, broken_site), tmp_path)
    assert done.returncode == 1
    assert "harness.errors.PluginLoadError: harness plugin 'broken_thirdparty" in done.stderr or (
        "harness.errors.PluginLoadError: harness plugin 'store.brokenscheme'" in done.stderr
    ), done.stderr
    assert "HARNESS_DISABLE_PLUGINS=" in done.stderr


def _imported_plugins(tmp_path: Path, code: str) -> list[str]:
    listing = "sorted({m.split('.')[0] for m in sys.modules if m.startswith('harness_')})"
    probe = f"{code}\nimport sys\nprint({listing})"
    done = _run([sys.executable, "-c", probe], _env(tmp_path), tmp_path)
    assert done.returncode == 0, done.stderr
    return eval(done.stdout.strip().splitlines()[-1])  # a printed list of names


def test_open_store_and_agent_import_only_what_they_are_asked_for(tmp_path: Path) -> None:
    opened = f'import harness\nharness.open_store("sqlite:///{tmp_path}/x.db").close()'
    assert _imported_plugins(tmp_path, opened) == ["harness_otel"], "the observer only (installed: on)"
    stack = (
        "import warnings, harness\n"
        "warnings.simplefilter('ignore', harness.HarnessExperimentalWarning)\n"
        "from harness.models.test import TestModel\n"
        "harness.Agent(TestModel(), capabilities=['sliding_window:max_messages=80,keep_messages=10'])"
    )
    assert _imported_plugins(tmp_path, stack) == ["harness_otel", "harness_sliding_window"]


def _sessions_example() -> str:
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"^## Sessions\n(.*?)(?=^## )", readme, re.S | re.M)
    assert match is not None
    return re.findall(r"^```python\n(.*?)^```", match.group(1), re.S | re.M)[0]


def test_the_sessions_example_under_w_error_raises_nothing_until_a_capability_is_used(tmp_path: Path) -> None:
    script = tmp_path / "sessions_example.py"
    code = _sessions_example()
    script.write_text(code)
    # The -W category is imported when Python starts, before site-packages is on sys.path:
    # with the checkout on PYTHONPATH it is importable then, and the filter is in force.
    option = ["-W", "error::harness.HarnessExperimentalWarning"]
    done = _run([sys.executable, *option, str(script)], _env(tmp_path, ROOT), tmp_path)
    assert "Invalid -W option ignored" not in done.stderr, "the filter must be in force"
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.count("True unknown_after_crash 6 ['release', 'release-retry'] ('release',)") == 2
    # ... and once a capability is used, it raises, from the user's line
    stack = '["sliding_window:max_messages=80,keep_messages=10"]'
    used = f'{code}\nAgent(FunctionModel.from_responses("ok"), capabilities={stack})\n'
    script.write_text(used)
    line = len(used.splitlines())
    done = _run([sys.executable, *option, str(script)], _env(tmp_path, ROOT), tmp_path)
    assert done.returncode == 1
    assert "HarnessExperimentalWarning: harness_sliding_window is experimental" in done.stderr
    always = ["-W", "always::harness.HarnessExperimentalWarning"]
    shown = _run([sys.executable, *always, str(script)], _env(tmp_path, ROOT), tmp_path)
    assert shown.returncode == 0, shown.stderr
    warned = [text for text in shown.stderr.splitlines() if "HarnessExperimentalWarning" in text]
    assert warned == [f"{script}:{line}: HarnessExperimentalWarning: {warned[0].split(': ', 2)[2]}"]
    assert "harness_sliding_window is experimental" in warned[0]


def test_the_quick_start_warns_once_per_plugin_it_imports_at_its_import_line(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"^## Quick start\n(.*?)(?=^## )", readme, re.S | re.M)
    assert match is not None
    [code] = re.findall(r"^```python\n(.*?)^```", match.group(1), re.S | re.M)
    script = tmp_path / "quick_start.py"
    script.write_text(code)
    (tmp_path / "README.md").write_text("# sample\n\nTwo commands.\n")
    done = _run([sys.executable, str(script)], _env(tmp_path), tmp_path)
    assert done.returncode == 0, done.stderr
    warned = [text for text in done.stderr.splitlines() if "Warning" in text]
    lines = code.splitlines()
    expected = [
        (i, f"harness_{name} is experimental")
        for i, text in enumerate(lines, 1)
        for name in ("sliding_window", "clear_tool_results")
        if text.startswith(f"from harness_{name} import")
    ]
    assert len(warned) == len(expected) == 2, done.stderr  # the plugins it uses, none of the others
    for text, (line, what) in zip(warned, expected, strict=True):
        assert text.startswith(f"{script}:{line}: HarnessExperimentalWarning: {what}")
