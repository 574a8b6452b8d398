"""``harness run`` and ``harness demo`` on stores: --store, HARNESS_STORE, the XDG default, --resume."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from harness.cli import cli
from harness.core import message_text
from harness.core.messages import CanonicalMessage, ToolCallPart, ToolReturnPart
from harness.session import Session
from harness.stores.sqlite import SqliteStore

HARNESS = str(Path(sys.executable).with_name("harness"))


@pytest.fixture(autouse=True)
def clean_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    for name in ("HARNESS_STORE", "HARNESS_SESSION_DIR", "HARNESS_MODEL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "app.py").write_text("class App:\n    pass\n\n\ndef main():\n    return App()\n")
    (root / "README.md").write_text("# App\n")
    return root


def invoke(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=input)


def run_json(*args: str, input: str | None = None) -> dict[str, Any]:
    result = invoke("run", "--json", *args, input=input)
    assert result.exit_code == 0, result.output
    parsed = json.loads(result.stdout)
    assert isinstance(parsed, dict)
    return parsed  # pyright: ignore[reportUnknownVariableType]


def test_run_writes_to_the_sqlite_store_it_is_given(project: Path, tmp_path: Path) -> None:
    db = tmp_path / "team.db"
    report = run_json("--root", str(project), "--store", f"sqlite:///{db}", "What is in app.py?")
    assert report["store"] == f"sqlite:///{db}"
    assert report["session_path"] is None
    assert report["revision"] > 2  # checkpointed at every step, not once at the end
    with SqliteStore(db) as store:
        session = Session.open(store, report["session_id"])
        assert len(session.messages) == report["messages"]
        assert session.revision == report["revision"]
        assert session.working_directory == str(project)
        assert all(entry.status == "completed" for entry in session.ledger.values())
    assert not (tmp_path / "xdg").exists()


def test_resume_continues_a_stored_session(project: Path, tmp_path: Path) -> None:
    store_flag = ("--store", str(tmp_path / "s.db"))
    first = run_json("--root", str(project), *store_flag, "What is in app.py?")
    second = run_json("--root", str(project), *store_flag, "--resume", first["session_id"], "And README.md?")
    assert second["session_id"] == first["session_id"]
    assert second["revision"] > first["revision"]
    assert second["messages"] > first["messages"]
    assert second["output"].startswith("README.md: 1 lines")
    with SqliteStore(tmp_path / "s.db") as store:
        session = Session.open(store, first["session_id"])
        assert message_text(session.transcript()[0]) == "What is in app.py?"
        assert len(store.list_sessions()) == 1


def test_harness_store_and_a_named_session(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESS_STORE", f"sqlite:///{tmp_path / 'env.db'}")
    first = run_json("--root", str(project), "--session", "review", "What is in app.py?")
    again = run_json("--root", str(project), "--session", "review", "What is in README.md?")
    assert first["session_id"] == again["session_id"] == "review"
    assert again["messages"] > first["messages"]
    with SqliteStore(tmp_path / "env.db") as store:
        assert [h.session_id for h in store.list_sessions()] == ["review"]
    listed = invoke("sessions", "list", "--json")
    assert [s["session_id"] for s in json.loads(listed.stdout)["sessions"]] == ["review"]


def test_the_default_store_is_sessions_db_in_the_xdg_data_folder(project: Path, tmp_path: Path) -> None:
    report = run_json("--root", str(project), "What is in app.py?")
    default = tmp_path / "xdg" / "harness" / "sessions.db"
    assert report["store"] == f"sqlite:///{default}"
    with SqliteStore(default) as store:
        assert store.head(report["session_id"]).view_length == report["messages"]
    text = invoke("run", "--root", str(project), "--resume", report["session_id"], "And README.md?").stdout
    assert f"saved in sqlite:///{default}" in text
    assert f'continue with: harness run --resume {report["session_id"]} "PROMPT"' in " ".join(text.split())


def test_session_dir_is_a_folder_of_session_files(project: Path, tmp_path: Path) -> None:
    folder = tmp_path / "files"
    report = run_json("--root", str(project), "--session-dir", str(folder), "What is in app.py?")
    assert report["store"] == f"file://{folder}"
    saved = Session.load(report["session_path"])
    assert Path(report["session_path"]).parent == folder
    assert len(saved.messages) == report["messages"]


def interrupted(store: SqliteStore, session_id: str, root: Path) -> None:
    """A session whose run stopped after the model asked for a tool (as a SIGKILL can leave it)."""
    session = Session.create(store=store, session_id=session_id, working_directory=str(root))
    session.messages = [
        CanonicalMessage.user("What is in app.py?"),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="c1", tool_name="read_file", args={"path": "app.py"})
        ),
    ]
    session.checkpoint()


def test_resume_without_a_prompt_finishes_an_interrupted_run(project: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SqliteStore(db) as store:
        interrupted(store, "stopped", project)
    report = run_json("--root", str(project), "--store", str(db), "--resume", "stopped", input="")
    assert report["turns"][0]["prompt"] is None
    with SqliteStore(db) as store:
        session = Session.open(store, "stopped")
        kinds = [m.kind for m in session.messages]
        assert kinds[:3] == ["request", "response", "request"]
        assert "class App" in message_text(session.messages[2])  # the pending call ran
        assert session.messages[-1].kind == "response"
        assert not session.messages[-1].tool_calls
    finished = invoke("run", "--root", str(project), "--store", str(db), "--resume", "stopped", input="")
    assert finished.exit_code == 2
    assert "has no interrupted run to continue; give a PROMPT" in finished.output


def test_resume_errors_name_the_store(project: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    missing = invoke("run", "--root", str(project), "--store", str(db), "--resume", "nope", "hi")
    assert missing.exit_code == 2
    assert f"no session 'nope' in sqlite:///{db}" in missing.output
    both = invoke("run", "--store", str(db), "--session-dir", str(tmp_path / "d"), "hi")
    assert both.exit_code == 2
    assert "--store and --session-dir are exclusive" in both.output
    unknown = invoke("run", "--root", str(project), "--store", "nosuch://x", "hi")
    assert unknown.exit_code == 2
    assert "error: StoreResolutionError: cannot open session store 'nosuch://x'" in unknown.stderr


def test_resume_of_an_old_session_file_says_how_to_import_it(project: Path, tmp_path: Path) -> None:
    old = Session.create(tmp_path / "xdg" / "harness" / "sessions", session_id="legacy")
    old.save()
    result = invoke("run", "--root", str(project), "--resume", "legacy", "hi")
    assert result.exit_code == 2
    assert f"import it with `harness sessions import {old.path}`" in " ".join(result.output.split())


def test_demo_keeps_its_session_in_the_store(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    result = invoke("demo", "--json", "--store", f"sqlite:///{db}")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["store"] == f"sqlite:///{db}"
    assert report["session_roundtrip"] is True
    assert report["edits"] > 0
    with SqliteStore(db) as store:
        head = store.head(report["session_id"])
        assert head.log_length == report["log_length"] > head.view_length  # compaction destroyed nothing
    shown = invoke("sessions", "show", report["session_id"], "--transcript", "--store", str(db))
    assert "replaced by " in shown.stdout


def test_a_run_killed_mid_way_resumes_from_its_last_checkpoint(project: Path, tmp_path: Path) -> None:
    for i in range(4):
        (project / f"mod{i}.py").write_text("".join(f"def f{j}():\n    return {j}\n" for j in range(150)))
    db = tmp_path / "s.db"
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "xdg")}
    args = [HARNESS, "run", "--root", str(project), "--store", str(db), "--budget", "3000"]
    child = subprocess.Popen(
        [*args, "--session", "killed", "Explore."],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    revision = 0
    deadline = time.monotonic() + 60
    while revision < 6 and time.monotonic() < deadline and child.poll() is None:
        try:
            with sqlite3.connect(db, timeout=1) as raw:
                row = raw.execute("SELECT revision FROM sessions WHERE session_id = 'killed'").fetchone()
            revision = row[0] if row else 0
        except sqlite3.Error:
            pass
        time.sleep(0.002)
    child.send_signal(signal.SIGKILL)
    assert child.wait(timeout=30) == -signal.SIGKILL, "the run finished before it could be killed"
    with SqliteStore(db) as store:
        at_kill = Session.open(store, "killed")
    assert at_kill.revision >= 6
    resumed = subprocess.run(
        [*args, "--resume", "killed", "--json"],
        env=env,
        input="",
        capture_output=True,
        text=True,
        timeout=120,
    )
    if resumed.returncode == 2 and "no interrupted run" in resumed.stderr:  # killed between two runs' steps
        resumed = subprocess.run(
            [*args, "--resume", "killed", "--json", "Go on."],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert resumed.returncode == 0, resumed.stderr
    with SqliteStore(db) as store:
        final = Session.open(store, "killed")
        log = final.transcript()
    assert final.revision > at_kill.revision
    assert final.messages[-1].kind == "response"
    assert not final.messages[-1].tool_calls
    answered = [p.tool_call_id for m in log for p in m.parts if isinstance(p, ToolReturnPart)]
    assert len(answered) == len(set(answered)), "a completed tool ran twice"


def _ctrl_c(env: dict[str, str], db: Path, args: list[str], *, after_revision: int) -> str:
    """Run ``harness run ARGS`` on session ``cc``, send it a real SIGINT once its revision
    passes ``after_revision``, and return the continue hint it printed (exactly one)."""
    child = subprocess.Popen(
        [HARNESS, "run", *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    revision = 0
    deadline = time.monotonic() + 60
    while revision < after_revision and time.monotonic() < deadline and child.poll() is None:
        try:
            with sqlite3.connect(db, timeout=1) as raw:
                row = raw.execute("SELECT revision FROM sessions WHERE session_id = 'cc'").fetchone()
            revision = row[0] if row else 0
        except sqlite3.Error:
            pass
        time.sleep(0.002)
    child.send_signal(signal.SIGINT)
    _, stderr = child.communicate(timeout=30)
    assert child.returncode == 130, stderr
    (hint,) = [
        line.split("continue with: ", 1)[1] for line in stderr.splitlines() if "continue with: " in line
    ]
    return hint


def _follow(hint: str, env: dict[str, str], db: Path) -> None:
    """Run the hint as printed (a new prompt for PROMPT) and check that it continued session ``cc``."""
    words = shlex.split(hint)
    assert words[:2] == ["harness", "run"]
    assert "--store" in words  # the hint repeats the options the session needs
    with SqliteStore(db) as store:
        stopped = Session.open(store, "cc")
    if words[-1] == "PROMPT":  # closed with [INTERRUPTED]: --resume alone says what to do instead
        assert message_text(stopped.messages[-1]).endswith("[INTERRUPTED]")
        alone = subprocess.run(
            [HARNESS, *words[1:-1]], env=env, input="", capture_output=True, text=True, timeout=120
        )
        assert alone.returncode == 2
        assert "was interrupted and closed with [INTERRUPTED]; continue it with a new prompt" in alone.stderr
        assert "has no interrupted run" not in alone.stderr
        words[-1] = "Go on."
    followed = subprocess.run(
        [HARNESS, *words[1:]], env=env, input="", capture_output=True, text=True, timeout=120
    )
    assert followed.returncode == 0, followed.stderr
    with SqliteStore(db) as store:
        assert Session.open(store, "cc").revision > stopped.revision


def _long_project(project: Path) -> None:
    for i in range(4):
        (project / f"mod{i}.py").write_text("".join(f"def f{j}():\n    return {j}\n" for j in range(150)))


def test_the_hint_printed_after_ctrl_c_continues_the_session(project: Path, tmp_path: Path) -> None:
    _long_project(project)
    db = tmp_path / "s.db"
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "xdg")}
    args = ["--root", str(project), "--store", str(db), "--budget", "3000", "--session", "cc", "Go."]
    _follow(_ctrl_c(env, db, args, after_revision=4), env, db)


def test_ctrl_c_in_a_resumed_session_prints_the_hint_too(project: Path, tmp_path: Path) -> None:
    _long_project(project)
    db = tmp_path / "s.db"
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "xdg")}
    started = ["--root", str(project), "--store", str(db), "--budget", "3000", "--session", "cc", "Go."]
    first = subprocess.run(
        [HARNESS, "run", *started], env=env, input="", capture_output=True, text=True, timeout=120
    )
    assert first.returncode == 0, first.stderr
    with SqliteStore(db) as store:
        done = Session.open(store, "cc").revision
    args = ["--store", str(db), "--budget", "3000", "--resume", "cc", "Go on."]
    _follow(_ctrl_c(env, db, args, after_revision=done + 4), env, db)


def test_resume_runs_on_the_folder_the_session_was_started_on(project: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    first = invoke(
        "run", "--root", str(project), "--store", str(db), "--session", "here", "What is in app.py?"
    )
    assert first.exit_code == 0, first.output
    assert f'continue with: harness run --store {db} --resume here "PROMPT"' in " ".join(first.stdout.split())
    again = invoke("run", "--store", str(db), "--resume", "here", "What is in app.py?")  # no --root
    assert again.exit_code == 0, again.output
    assert f"root {project.resolve()}" in " ".join(again.stdout.split())
    with SqliteStore(db) as store:
        returns = [
            part.content
            for message in Session.open(store, "here").messages
            for part in message.parts
            if isinstance(part, ToolReturnPart)
        ]
    assert (
        sum("class App" in str(content) for content in returns) >= 2
    )  # both turns read the project's app.py
