"""Keep README.md honest: its Quick start runs as printed, its tables match the code."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import harness.hooks.specs

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()

SAMPLE_README = "# sample\n\nTwo commands set everything up.\n"

PRELUDE = """\
import warnings
import harness
warnings.simplefilter("always")
warnings.filterwarnings("ignore", category=harness.HarnessExperimentalWarning)
"""

EPILOGUE = """
# -- appended by tests/test_readme.py: what did the tool really return?
from harness import ToolReturnPart as _ToolReturnPart

_returns = [p for m in result.all_messages for p in m.parts if isinstance(p, _ToolReturnPart)]
print("TOOL RETURNS:", [(p.tool_name, p.content) for p in _returns])
"""


def section(title: str) -> str:
    """The text of the ``## title`` section of README.md."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.S | re.M)
    assert match is not None, f"README.md has no '## {title}' section"
    return match.group(1)


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def table_rows(text: str) -> list[list[str]]:
    rows: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("|") and not re.fullmatch(r"\|[-| :]+\|", line):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows[1:]  # without the header


# ------------------------------------------------------------------------------ Quick start


def test_quick_start_has_one_python_block() -> None:
    blocks = python_blocks(section("Quick start"))
    assert len(blocks) == 1
    assert "result = agent.run_sync(" in blocks[0]


def test_quick_start_runs_and_prints_what_it_says(tmp_path: Path) -> None:
    (code,) = python_blocks(section("Quick start"))
    (tmp_path / "README.md").write_text(SAMPLE_README)
    script = tmp_path / "quick_start.py"
    script.write_text(PRELUDE + code + EPILOGUE)
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "xdg")}
    completed = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    # Every warning is shown ("always"); the example must cause none (experimental ones aside).
    assert completed.stderr == "", completed.stderr
    output, returns = completed.stdout.splitlines()
    usage = re.fullmatch(
        r"The README starts with two commands\. Usage\(request_tokens=(\d+), response_tokens=(\d+), "
        r"cached_tokens=0, cache_write_tokens=0\)",
        output,
    )
    assert usage is not None, output
    assert int(usage[1]) > 0
    assert int(usage[2]) > 0
    # The tool really read the README of the current folder.
    assert returns == f"TOOL RETURNS: {[('read_file', SAMPLE_README)]!r}"
    assert not (tmp_path / "xdg").exists(), "the Quick start must not write a session file"


# ------------------------------------------------------------------------------ capability table


CAPABILITY_ROW = re.compile(r"\[`(harness-[\w-]+)`\]\((plugins/harness-[\w-]+)\)")


def capability_table() -> list[tuple[str, str, str]]:
    """``(distribution, link, class)`` for each row of the capability table."""
    rows: list[tuple[str, str, str]] = []
    for cells in table_rows(section("Capability plugins")):
        match = CAPABILITY_ROW.fullmatch(cells[0])
        assert match is not None, f"unexpected first cell {cells[0]!r}"
        rows.append((match[1], match[2], cells[1].strip("`")))
    return rows


STORE_DISTRIBUTIONS = {"harness-postgres"}
ENGINE_DISTRIBUTIONS = {"harness-dbos", "harness-temporal"}
MIDDLEWARE_DISTRIBUTIONS = {"harness-model-fallback", "harness-tool-limits", "harness-tool-approval"}
OBSERVER_DISTRIBUTIONS = {"harness-otel"}
"""Plugin folders that are session stores, not capabilities: named below the table instead."""


def test_capability_table_lists_every_plugin_folder() -> None:
    listed = {distribution for distribution, _, _ in capability_table()}
    folders = {p.name for p in (ROOT / "plugins").iterdir() if (p / "pyproject.toml").is_file()}
    assert listed == folders - STORE_DISTRIBUTIONS - ENGINE_DISTRIBUTIONS - MIDDLEWARE_DISTRIBUTIONS - (
        OBSERVER_DISTRIBUTIONS
    )
    for other in (
        STORE_DISTRIBUTIONS | ENGINE_DISTRIBUTIONS | MIDDLEWARE_DISTRIBUTIONS | OBSERVER_DISTRIBUTIONS
    ):
        assert f"[`{other}`](plugins/{other})" in section("Capability plugins")


@pytest.mark.parametrize(("distribution", "link", "class_name"), capability_table())
def test_capability_table_row_matches_the_plugin(distribution: str, link: str, class_name: str) -> None:
    folder = ROOT / link
    assert folder.name == distribution
    assert folder.is_dir(), f"{link} does not exist"
    pyproject = (folder / "pyproject.toml").read_text()
    assert f'name = "{distribution}"' in pyproject
    plugin_readme = folder / "README.md"
    assert plugin_readme.is_file(), f"{distribution} has no README.md"
    assert class_name in plugin_readme.read_text(), f"{distribution}/README.md does not mention {class_name}"
    package = "harness_" + distribution.removeprefix("harness-").replace("-", "_")
    module = importlib.import_module(package)
    assert class_name in module.__all__, f"{package} does not export {class_name}"
    assert f'"{package}:{class_name}"' in pyproject, "the entry point names another class"


# ------------------------------------------------------------------------------ other tables


def test_hook_table_matches_the_hookspecs() -> None:
    names = [re.match(r"`(\w+)\(", cells[0]) for cells in table_rows(section("Hooks and plugins"))]
    assert all(names), "every row of the hook table starts with `hook(...)`"
    assert {m[1] for m in names if m} == set(harness.hooks.specs.__all__)


def test_contents_links_point_at_sections() -> None:
    contents = section("Contents")
    headings = re.findall(r"^## (.+)$", README, re.M)
    anchors = {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings}
    links = re.findall(r"\]\(#([\w-]+)\)", contents)
    assert links, "the Contents section links to no section"
    assert set(links) <= anchors
    assert set(links) == anchors - {"contents"}, "a section is missing from Contents"


# ------------------------------------------------------------------------------ names


def resolve(dotted: str) -> object:
    """Import ``dotted`` as far as it is a module, then follow attributes."""
    parts = dotted.split(".")
    obj: object = importlib.import_module(parts[0])
    for index, part in enumerate(parts[1:], start=1):
        if hasattr(obj, part):
            obj = getattr(obj, part)
        else:
            obj = importlib.import_module(".".join(parts[: index + 1]))
    return obj


FILE_NAMES = {"harness.toml"}  # files the README names, not Python names

README_NAMES = sorted(set(re.findall(r"`(harness(?:\.[A-Za-z_]\w*)+)", README)) - FILE_NAMES)


def test_readme_names_some_harness_api() -> None:
    assert "harness.compact" in README_NAMES
    assert len(README_NAMES) >= 5


@pytest.mark.parametrize("dotted", README_NAMES)
def test_every_harness_name_in_the_readme_exists(dotted: str) -> None:
    try:
        resolve(dotted)
    except ImportError as exc:
        pytest.fail(f"README.md names `{dotted}`, which does not exist: {exc}")


def _fresh_machine_commands() -> list[str]:
    block = re.search(r"^```sh\n(.*?)^```", README, re.S | re.M)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_the_fresh_machine_commands_never_install_into_the_system_python() -> None:
    commands = _fresh_machine_commands()
    assert len(commands) == 2
    assert commands[0].endswith("uv run harness demo")
    assert commands[1].endswith("uv run pytest")
    for command in commands:
        steps = [step.strip() for step in command.split("&&")]
        assert steps[0] == "python3 -m venv .venv", "the first step makes the project's own environment"
        assert all(not step.startswith(("python3 -m pip", "pip ", "pip3 ")) for step in steps), command
        assert "--inexact" in command, "uv sync must keep the uv it runs from"


def _externally_managed_python() -> Path | None:
    """A system Python whose pip refuses installs (PEP 668), if this machine has one."""
    for candidate in (Path("/usr/bin/python3"), Path("/usr/local/bin/python3")):
        if not candidate.exists():
            continue
        stdlib = subprocess.run(
            [str(candidate), "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        if stdlib and (Path(stdlib) / "EXTERNALLY-MANAGED").exists():
            return candidate
    return None


@pytest.mark.skipif(
    _externally_managed_python() is None and os.environ.get("CI") != "true",
    reason="no PEP 668 (externally managed) system Python on this machine",
)
def test_the_bootstrap_works_on_an_externally_managed_python(tmp_path: Path) -> None:
    python = _externally_managed_python()
    assert python is not None, "CI machines have Debian's externally managed python3"
    env = {"PATH": f"{python.parent}:/bin", "HOME": os.environ.get("HOME", str(tmp_path)), "LANG": "C.UTF-8"}
    refused = subprocess.run(
        ["python3", "-m", "pip", "install", "--dry-run", "uv"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert refused.returncode != 0
    assert "externally-managed-environment" in refused.stdout + refused.stderr, (
        "the old first step fails here"
    )
    bootstrap = _fresh_machine_commands()[0].split(" && .venv/bin/uv sync")[0]
    done = subprocess.run(
        ["bash", "-c", f"{bootstrap} && .venv/bin/uv --version"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("uv ")


@pytest.mark.parametrize("title", ["Sessions", "Errors and warnings"])
def test_section_examples_run_and_print_what_they_say(title: str, tmp_path: Path) -> None:
    blocks = python_blocks(section(title))
    assert blocks, f"## {title} has a runnable example"
    for code in blocks:
        promised = re.search(r"^# prints: (.*)$", code, re.M)
        assert promised is not None, "each example says what it prints"
        completed = subprocess.run(
            [sys.executable, "-c", PRELUDE + code], cwd=tmp_path, capture_output=True, text=True, check=False
        )
        assert completed.returncode == 0, completed.stderr
        assert completed.stdout.splitlines() == promised.group(1).split(" / ")
