"""examples/plugin-template: rendering, and a rendered distribution installed and tested in its own venv."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "examples" / "plugin-template"


def load_render() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("harness_plugin_template_render", TEMPLATE / "render.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


render = load_render()


def test_names_follow_the_plugin_layout():
    assert render.names_for("trim-logs") == {
        "project_name": "harness-trim-logs",
        "package": "harness_trim_logs",
        "entry_point": "trim_logs",
        "class_name": "TrimLogs",
    }
    assert render.names_for("harness-trim-logs") == render.names_for("trim-logs")
    assert render.names_for("x", class_name="Shorten")["class_name"] == "Shorten"


@pytest.mark.parametrize("bad", ["Trim", "trim_logs", "trim--logs", "-trim", "9lives", ""])
def test_bad_names_are_refused(bad: str):
    with pytest.raises(render.RenderError, match="--name"):
        render.names_for(bad)


def test_bad_class_names_are_refused():
    with pytest.raises(render.RenderError, match="--class-name 'lower'"):
        render.names_for("trim", class_name="lower")


def test_render_replaces_every_placeholder(tmp_path: Path):
    target = render.render("trim-logs", tmp_path)
    assert target == tmp_path / "harness-trim-logs"
    files = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file())
    assert files == [
        "LICENSE",
        "README.md",
        "harness_trim_logs/__init__.py",
        "harness_trim_logs/capability.py",
        "harness_trim_logs/py.typed",
        "pyproject.toml",
        "tests/test_trim_logs_behaviour.py",
        "tests/test_trim_logs_properties.py",
    ]
    for path in target.rglob("*"):
        if path.is_file():
            assert "{{" not in path.read_text(encoding="utf-8"), path
    pyproject = (target / "pyproject.toml").read_text(encoding="utf-8")
    assert 'trim_logs = "harness_trim_logs:TrimLogs"' in pyproject
    assert 'name = "harness-trim-logs"' in pyproject
    assert 'name: ClassVar[str] = "trim_logs"' in (target / "harness_trim_logs/capability.py").read_text()


def test_render_refuses_an_existing_folder_unless_forced(tmp_path: Path):
    target = render.render("trim-logs", tmp_path)
    (target / "stale.txt").write_text("old")
    with pytest.raises(render.RenderError, match="already exists"):
        render.render("trim-logs", tmp_path)
    render.render("trim-logs", tmp_path, force=True)
    assert not (target / "stale.txt").exists()


def test_unknown_placeholders_are_reported(tmp_path: Path):
    template = tmp_path / "template"
    template.mkdir()
    (template / "a.txt.tmpl").write_text("{{ nope }}")
    with pytest.raises(render.RenderError, match=r"a.txt.tmpl: unknown placeholder '\{\{ nope \}\}'"):
        render.render("x", tmp_path / "out", template=template)


def test_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert render.main(["--name", "trim-logs", "--dest", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "harness-trim-logs")
    assert render.main(["--name", "trim-logs", "--dest", str(tmp_path)]) == 2
    assert "render.py: error:" in capsys.readouterr().err
    assert render.main(["--name", "Bad", "--dest", str(tmp_path)]) == 2


def test_the_rendered_project_is_lint_clean(tmp_path: Path):
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent))
    if ruff is None:
        pytest.skip("ruff is not installed next to this interpreter")
    target = render.render("trim-logs", tmp_path)
    for args in (["check", "."], ["format", "--check", "."]):
        done = subprocess.run([ruff, *args], cwd=target, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stdout + done.stderr


def test_a_rendered_project_installs_and_its_tests_pass(tmp_path: Path):
    """Render, install with uv offline into a fresh venv that sees this checkout, run its tests."""
    uv = shutil.which("uv")
    if uv is None or os.name != "posix":
        pytest.skip("needs uv on a POSIX system")
    project = render.render("trim-logs", tmp_path)
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env["UV_OFFLINE"] = "1"

    def run(*args: str | Path, cwd: Path = tmp_path) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=120
        )
        assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
        return done

    run(uv, "venv", "--quiet", "--python", sys.executable, venv)
    python = venv / "bin" / "python"
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    # The venv sees this checkout's environment (harness, pytest, hypothesis, the plugins), offline.
    ours = sysconfig.get_paths()["purelib"]
    (site / "_harness_dev.pth").write_text(f"import site; site.addsitedir({ours!r})\n{ROOT}\n")
    run(uv, "pip", "install", "--quiet", "--no-deps", "--offline", "--python", python, project)

    found = run(
        python,
        "-c",
        "import importlib.metadata as m; "
        "print([(e.name, e.value) for e in m.entry_points(group='harness') if e.name == 'trim_logs'])",
    )
    assert found.stdout.strip() == "[('trim_logs', 'harness_trim_logs:TrimLogs')]"
    located = run(python, "-c", "import harness, harness_trim_logs; print(harness.__file__)")
    assert Path(located.stdout.strip()).is_relative_to(ROOT)

    tests = run(python, "-m", "pytest", "-q", "-p", "no:randomly", cwd=project)
    summary = tests.stdout.strip().splitlines()[-1]
    match = re.fullmatch(r"(\d+) passed in [\d.]+s", summary)
    assert match is not None, tests.stdout
    assert int(match.group(1)) >= 8
