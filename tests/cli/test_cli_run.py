"""``harness run``: the example agent, once or interactively, in saved, resumable sessions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness.cli import cli
from harness.core import message_text
from harness.session import Session, list_sessions


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "app.py").write_text("class App:\n    pass\n\n\ndef main():\n    return App()\n")
    (root / "README.md").write_text("# App\n")
    return root


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    # Nothing may be written to the real home: sessions go to a temporary folder.
    monkeypatch.setenv("HARNESS_SESSION_DIR", str(tmp_path / "sessions"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("HARNESS_MODEL", raising=False)
    return CliRunner()


def run_json(runner: CliRunner, *args: str, input: str | None = None) -> dict[str, Any]:
    result = runner.invoke(cli, ["run", "--json", *args], input=input)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_run_once_with_the_scripted_model(runner: CliRunner, project: Path, tmp_path: Path) -> None:
    report = run_json(runner, "--root", str(project), "Explore this project.")
    assert report["model"] == "scripted"
    assert "app.py: 6 lines; the part I read defines App, main." in report["output"]
    assert report["turns"][0]["requests"] > 3
    path = Path(report["session_path"])
    assert path.parent == tmp_path / "sessions"
    assert Session.load(path).session_id == report["session_id"]
    assert not (tmp_path / "xdg").exists()


def test_resume_continues_the_saved_session(runner: CliRunner, project: Path) -> None:
    first = run_json(runner, "--root", str(project), "What is in app.py?")
    second = run_json(runner, "--root", str(project), "--resume", first["session_id"], "And README.md?")
    assert second["session_id"] == first["session_id"]
    assert second["messages"] > first["messages"]
    assert second["output"].startswith("README.md: 1 lines")
    saved = Session.load(second["session_path"])
    assert len(saved.messages) == second["messages"]
    assert message_text(saved.messages[0]) == "What is in app.py?"


def test_named_session_is_created_then_continued(runner: CliRunner, project: Path, tmp_path: Path) -> None:
    first = run_json(runner, "--root", str(project), "--session", "review-1", "What is in app.py?")
    assert first["session_id"] == "review-1"
    again = run_json(runner, "--root", str(project), "--session", "review-1", "What is in README.md?")
    assert again["messages"] > first["messages"]
    listing = list_sessions(tmp_path / "sessions")
    assert [info.session_id for info in listing.sessions] == ["review-1"]
    listed = runner.invoke(cli, ["sessions", "--dir", str(tmp_path / "sessions")])
    assert "review-1" in listed.output


def test_interactive_turns_share_one_session(runner: CliRunner, project: Path) -> None:
    result = runner.invoke(
        cli,
        ["run", "-i", "--root", str(project)],
        input="What is in app.py?\n\nWhat is in README.md?\nexit\n",
    )
    assert result.exit_code == 0, result.output
    assert result.output.count("you> ") == 4  # the empty line asks again
    assert "scripted: app.py: 6 lines" in result.output
    assert "scripted: README.md: 1 lines" in result.output
    assert "continue with: harness run --resume" in result.output


def test_interactive_ends_at_end_of_input(runner: CliRunner, project: Path) -> None:
    result = runner.invoke(
        cli, ["run", "--interactive", "--root", str(project)], input="What is in app.py?\n"
    )
    assert result.exit_code == 0, result.output
    assert "scripted: app.py: 6 lines" in result.output


def test_prompt_from_standard_input(runner: CliRunner, project: Path) -> None:
    report = run_json(runner, "--root", str(project), input="What is in app.py?\n")
    assert report["turns"][0]["prompt"] == "What is in app.py?"


def test_shows_tool_calls_and_compaction_events(runner: CliRunner, project: Path) -> None:
    for i in range(4):
        (project / f"mod{i}.py").write_text("".join(f"def f{j}():\n    return {j}\n" for j in range(150)))
    result = runner.invoke(cli, ["run", "--root", str(project), "--budget", "3000", "Explore."])
    assert result.exit_code == 0, result.output
    assert "→ list_dir(path='.')" in result.output
    assert "compaction: " in result.output


def test_other_models_resolve_through_harness_models(
    runner: CliRunner, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESS_MODEL", "test")
    report = run_json(runner, "--root", str(project), "--budget", "8000", "hello")
    assert report["model"] == "test"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "nonsense-model", "hi"], "cannot resolve model 'nonsense-model'"),
        (["--resume", "nope", "hi"], "no session 'nope'"),
        (["--session", "a", "--resume", "a", "hi"], "--session and --resume are exclusive"),
        (["--session", "../x", "hi"], "use 1-64 letters"),
        (["--json", "--interactive"], "cannot be combined with --interactive"),
        (["--stack", "tiered[", "hi"], "missing ']'"),
        (["--root", "/nonexistent/dir", "hi"], "does not exist"),
    ],
)
def test_usage_errors_exit_2(runner: CliRunner, project: Path, args: list[str], message: str) -> None:
    result = runner.invoke(cli, ["run", *args], input="")
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_empty_standard_input_is_a_usage_error(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["run", "--json"], input="")
    assert result.exit_code == 2
    assert "give a PROMPT" in result.output


def test_run_help_has_examples(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["run", "--help"])
    assert result.exit_code == 0
    assert "Examples:" in result.output
    assert "--model openai:gpt-4o-mini" in result.output
