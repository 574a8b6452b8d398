"""The published artefacts, built and installed as a user gets them.

Every distribution is built with ``uv build`` into a wheelhouse; the tests check what
each wheel and sdist ships, then install the core from its wheel into fresh virtual
environments and run the commands ``harness --help`` lists.
"""

from __future__ import annotations

import email.parser
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = [ROOT, ROOT / "examples" / "coding-agent", *sorted(ROOT.joinpath("plugins").glob("harness-*"))]
DISTRIBUTIONS = [tomllib.loads((f / "pyproject.toml").read_text())["project"]["name"] for f in FOLDERS]
UV = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))


def _uv(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [UV, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env=env or dict(os.environ),
        timeout=600,
    )


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheelhouse")
    built = _uv("build", "--all-packages", "--out-dir", str(out), "--quiet")
    assert built.returncode == 0, built.stderr
    return out


def _artefacts(wheelhouse: Path, distribution: str) -> tuple[Path, Path]:
    stem = distribution.replace("-", "_")
    [wheel] = wheelhouse.glob(f"{stem}-*.whl")
    [sdist] = wheelhouse.glob(f"{stem}-*.tar.gz")
    return wheel, sdist


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_every_artefact_ships_the_licence_and_typed_metadata(wheelhouse: Path, distribution: str) -> None:
    wheel, sdist = _artefacts(wheelhouse, distribution)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [metadata_name] = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = email.parser.Parser().parsestr(archive.read(metadata_name).decode())
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
        assert (
            "MIT License" in archive.read(next(n for n in names if n.endswith("licenses/LICENSE"))).decode()
        )
        assert any(n.endswith("/py.typed") for n in names), "ships py.typed"
    assert metadata["License-Expression"] == "MIT"
    classifiers = metadata.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers
    assert "Development Status :: 3 - Alpha" in classifiers
    assert any(c.startswith("Programming Language :: Python :: 3.11") for c in classifiers)
    assert metadata["Keywords"]
    assert metadata.get_all("Project-URL")
    with tarfile.open(sdist) as archive:
        members = [m.name.split("/", 1)[1] for m in archive.getmembers() if "/" in m.name]
    assert "LICENSE" in members


def test_the_core_sdist_ships_only_the_core(wheelhouse: Path) -> None:
    _, sdist = _artefacts(wheelhouse, "harness-loop")
    with tarfile.open(sdist) as archive:
        members = {m.name.split("/", 1)[1] for m in archive.getmembers() if "/" in m.name}
    tops = {name.split("/", 1)[0] for name in members}
    assert tops <= {"harness", "README.md", "LICENSE", "pyproject.toml", "PKG-INFO", ".gitignore"}, tops
    assert "harness/cli/demo/transcript.json" in members
    assert not any(
        name.startswith(("plugins", "tests", "examples", "benchmarks", "uv.lock")) for name in members
    )


def _fresh_venv(tmp_path: Path, name: str) -> Path:
    venv = tmp_path / name
    made = _uv("venv", "--quiet", "--python", sys.executable, str(venv))
    assert made.returncode == 0, made.stderr
    return venv


def _install(venv: Path, wheelhouse: Path, requirement: str) -> None:
    installed = _uv(
        "pip",
        "install",
        "--quiet",
        "--python",
        str(venv / "bin" / "python"),
        "--find-links",
        str(wheelhouse),
        requirement,
    )
    assert installed.returncode == 0, installed.stderr


def _harness(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HARNESS_", "VIRTUAL_ENV"))}
    env["HARNESS_SESSION_DIR"] = str(cwd / "sessions")
    return subprocess.run(
        [str(venv / "bin" / "harness"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def test_the_core_wheel_alone_says_how_to_get_the_demo(wheelhouse: Path, tmp_path: Path) -> None:
    venv = _fresh_venv(tmp_path, "core")
    _install(venv, wheelhouse, "harness-loop==0.1.0")
    assert _harness(venv, "--help", cwd=tmp_path).returncode == 0
    demo = _harness(venv, "demo", cwd=tmp_path)
    assert demo.returncode == 2, demo.stdout + demo.stderr
    assert "pip install ./examples/coding-agent ./plugins/harness-*" in demo.stderr
    assert not (tmp_path / "sessions").exists(), "a refused command writes nothing"


def test_the_published_wheels_run_every_listed_command(wheelhouse: Path, tmp_path: Path) -> None:
    venv = _fresh_venv(tmp_path, "demo")
    _install(venv, wheelhouse, "harness-loop[demo]==0.1.0")
    demo = _harness(venv, "demo", "--json", cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    report = json.loads(demo.stdout)
    assert report["over_budget"] == []
    assert "site-packages" in report["root"], "the demo explores the installed package"
    plugins = _harness(venv, "plugins", "--json", cwd=tmp_path)
    assert plugins.returncode == 0, plugins.stderr
    listed = json.dumps(json.loads(plugins.stdout))
    for name in ("sliding_window", "clear_tool_results", "dedupe_file_reads", "summarizing", "tiered"):
        assert name in listed
    run = _harness(venv, "run", "--model", "scripted", "List the top folder.", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert _harness(venv, "sessions", cwd=tmp_path).returncode == 0
