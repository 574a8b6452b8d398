"""``harness run`` with the approval plugin: it asks, or stays paused and says how to resume.

The scripted model reads the file a prompt names (``read_file``); ``--require-approval
read_file`` makes that call wait for a human. The plugin is the installed workspace
distribution, found through its ``tool_approval`` entry point as the command finds it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from harness.cli import cli
from harness.cli.approval import EXIT_AWAITING_APPROVAL
from harness.core import ToolReturnPart
from harness.history import check_invariants
from harness.run.approvals import held_calls, is_placeholder
from harness.session import Session
from harness.stores import open_store

HARNESS = str(Path(sys.executable).with_name("harness"))
PROMPT = "What is in app.py?"
ANSWER = "app.py: 6 lines; the part I read defines App, main."


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "app.py").write_text("class App:\n    pass\n\n\ndef main():\n    return App()\n")
    (root / "README.md").write_text("# App\n")
    return root


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/s.db"


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    for name in ("HARNESS_SESSION_DIR", "HARNESS_STORE", "HARNESS_MODEL"):
        monkeypatch.delenv(name, raising=False)
    return CliRunner()


def invoke(runner: CliRunner, project: Path, url: str, *args: str, input: str | None = None) -> Result:
    return runner.invoke(cli, ["run", "--root", str(project), "--store", url, *args], input=input)


def stored(url: str, session_id: str) -> Session:
    store = open_store(url)
    try:
        return Session.open(store, session_id)
    finally:
        store.close()


def returns_of(session: Session, call_id: str) -> list[ToolReturnPart]:
    return [
        p
        for m in session.messages
        for p in m.parts
        if isinstance(p, ToolReturnPart) and p.tool_call_id == call_id
    ]


def paused_session(runner: CliRunner, project: Path, url: str) -> dict[str, Any]:
    result = invoke(runner, project, url, "--json", "--require-approval", "read_file", PROMPT)
    assert result.exit_code == EXIT_AWAITING_APPROVAL == 5, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    assert document["status"] == "awaiting_approval"
    return document


# ------------------------------------------------------------------------------ staying paused


def test_without_a_terminal_the_run_stays_paused_and_the_command_says_how_to_resume(
    runner: CliRunner, project: Path, url: str
) -> None:
    result = invoke(runner, project, url, "--require-approval", "read_file", PROMPT)
    assert result.exit_code == EXIT_AWAITING_APPROVAL, result.output  # paused is not done
    out = result.stdout
    assert "paused: 1 tool call waits for approval in session" in out
    assert 'approval needed scripted_1: read_file {"path": "app.py", "limit": 150}' in out
    assert "awaiting approval: ToolApproval(tools=...) lists read_file" in out
    command = f"harness run --store {url} --resume "  # no --root: --resume runs on the session's folder
    assert f"approve: {command}" in out
    assert "--approve scripted_1" in out
    assert "--reject scripted_1=REASON" in out
    assert '--edit \'scripted_1={"path": "app.py", "limit": 150}\'' in out
    streamed, paused = out.index("scripted: Next: read_file"), out.index("paused: 1 tool call")
    assert streamed < paused, "the text before the held call streams, then the pause is reported"
    [session_id] = [line.split("--resume ")[1].split()[0] for line in out.splitlines() if "approve:" in line]
    session = stored(url, session_id)
    assert [c.tool_call_id for c in held_calls(session.messages)] == ["scripted_1"]
    assert [is_placeholder(p) for p in returns_of(session, "scripted_1")] == [True]
    assert check_invariants(session.messages, persisted=True) == []


def test_the_json_document_lists_the_pending_calls(runner: CliRunner, project: Path, url: str) -> None:
    document = paused_session(runner, project, url)
    assert document["pending_approvals"] == [
        {
            "tool_call_id": "scripted_1",
            "tool_name": "read_file",
            "args": {"path": "app.py", "limit": 150},
            "reason": "awaiting approval: ToolApproval(tools=...) lists read_file",
        }
    ]
    assert document["turns"][0]["status"] == "awaiting_approval"
    assert document["output"] is None


def test_no_input_never_asks_even_interactively(runner: CliRunner, project: Path, url: str) -> None:
    result = invoke(
        runner, project, url, "-i", "--no-input", "--require-approval", "read_file", PROMPT, input=""
    )
    assert result.exit_code == EXIT_AWAITING_APPROVAL, result.output
    assert "approve, reject, edit or later?" not in result.stdout
    assert "paused: 1 tool call waits for approval" in result.stdout


def test_a_call_not_needing_approval_runs_as_before(runner: CliRunner, project: Path, url: str) -> None:
    result = invoke(runner, project, url, "--json", "--require-approval", "run_shell", PROMPT)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["status"] == "completed"
    assert document["pending_approvals"] == []
    assert ANSWER in document["output"]


# ------------------------------------------------------------------------------ resuming with options


def test_approve_resumes_the_paused_run(runner: CliRunner, project: Path, url: str) -> None:
    paused = paused_session(runner, project, url)
    sid = paused["session_id"]
    result = invoke(runner, project, url, "--json", "--resume", sid, "--approve", "scripted_1")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["status"] == "completed"
    assert document["pending_approvals"] == []
    session = stored(url, sid)
    [answer] = returns_of(session, "scripted_1")
    assert str(answer.content).startswith("app.py: lines 1-6 of 6")
    assert held_calls(session.messages) == ()
    assert check_invariants(session.messages, persisted=True) == []


def test_reject_gives_the_model_the_reason_and_the_tool_never_runs(
    runner: CliRunner, project: Path, url: str
) -> None:
    sid = paused_session(runner, project, url)["session_id"]
    result = invoke(runner, project, url, "--resume", sid, "--reject", "scripted_1=not that file")
    assert result.exit_code == 0, result.output
    [answer] = returns_of(stored(url, sid), "scripted_1")
    assert answer.content == "The user rejected this call: not that file"


def test_reject_without_a_reason(runner: CliRunner, project: Path, url: str) -> None:
    sid = paused_session(runner, project, url)["session_id"]
    result = invoke(runner, project, url, "--resume", sid, "--reject", "scripted_1")
    assert result.exit_code == 0, result.output
    [answer] = returns_of(stored(url, sid), "scripted_1")
    assert answer.content == "The user rejected this call: no reason given"


def test_edit_runs_the_call_with_the_new_arguments(runner: CliRunner, project: Path, url: str) -> None:
    sid = paused_session(runner, project, url)["session_id"]
    result = invoke(runner, project, url, "--resume", sid, "--edit", 'scripted_1={"path": "README.md"}')
    assert result.exit_code == 0, result.output
    [answer] = returns_of(stored(url, sid), "scripted_1")
    assert str(answer.content).startswith("README.md: lines 1-1 of 1")


def test_the_options_also_resume_a_session_named_with_session(
    runner: CliRunner, project: Path, url: str
) -> None:
    first = invoke(runner, project, url, "--session", "review", "--require-approval", "read_file", PROMPT)
    assert first.exit_code == EXIT_AWAITING_APPROVAL, first.output
    result = invoke(runner, project, url, "--session", "review", "--approve", "scripted_1")
    assert result.exit_code == 0, result.output
    assert held_calls(stored(url, "review").messages) == ()


def test_another_process_resumes_the_paused_run(tmp_path: Path, project: Path, url: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_SESSION_DIR", "HARNESS_STORE")}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    base = [HARNESS, "run", "--root", str(project), "--store", url]

    def harness(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*base, *args],
            capture_output=True,
            text=True,
            env=env,
            stdin=subprocess.DEVNULL,
            timeout=120,
            check=False,
        )

    paused = harness("--json", "--require-approval", "read_file", PROMPT)
    assert paused.returncode == EXIT_AWAITING_APPROVAL, paused.stderr
    sid = json.loads(paused.stdout)["session_id"]
    done = harness("--json", "--resume", sid, "--approve", "scripted_1")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "completed"
    [answer] = returns_of(stored(url, sid), "scripted_1")
    assert str(answer.content).startswith("app.py: lines 1-6 of 6")


# ------------------------------------------------------------------------------ asking


def test_interactively_it_asks_and_approve_resumes_at_once(
    runner: CliRunner, project: Path, url: str
) -> None:
    result = invoke(runner, project, url, "-i", "--require-approval", "read_file", PROMPT, input="a\n")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert 'approval needed scripted_1: read_file {"path": "app.py", "limit": 150}' in out
    assert "approve, reject, edit or later? [a/r/e/l]:" in out
    assert f"scripted: {ANSWER}" in out
    assert "paused:" not in out


def test_interactively_a_bad_answer_is_asked_again_and_reject_takes_a_reason(
    runner: CliRunner, project: Path, url: str
) -> None:
    result = invoke(
        runner, project, url, "-i", "--require-approval", "read_file", PROMPT, input="maybe\nr\nprivate\n"
    )
    assert result.exit_code == 0, result.output
    assert "Error: answer a (approve), r (reject), e (edit) or l (later)" in result.stdout
    assert "reason (the model reads it):" in result.stdout
    sid = result.stdout.split("session ")[1].split()[0]
    [answer] = returns_of(stored(url, sid), "scripted_1")
    assert answer.content == "The user rejected this call: private"


def test_interactively_edit_asks_for_json_until_it_is_an_object(
    runner: CliRunner, project: Path, url: str
) -> None:
    answers = 'e\n[1, 2]\n{"path": "README.md"\n{"path": "README.md"}\n'
    result = invoke(runner, project, url, "-i", "--require-approval", "read_file", PROMPT, input=answers)
    assert result.exit_code == 0, result.output
    assert result.stdout.count("new arguments (a JSON object)") == 3
    assert "not a JSON object: a JSON object is needed, got list" in result.stdout
    assert "not a JSON object: Expecting ',' delimiter" in result.stdout
    sid = result.stdout.split("session ")[1].split()[0]
    [answer] = returns_of(stored(url, sid), "scripted_1")
    assert str(answer.content).startswith("README.md: lines 1-1 of 1")


def test_interactively_later_leaves_the_run_paused(runner: CliRunner, project: Path, url: str) -> None:
    result = invoke(runner, project, url, "-i", "--require-approval", "read_file", PROMPT, input="l\n")
    assert result.exit_code == EXIT_AWAITING_APPROVAL, result.output
    assert "paused: 1 tool call waits for approval" in result.stdout
    sid = result.stdout.split("session ")[1].split()[0]
    assert [c.tool_call_id for c in held_calls(stored(url, sid).messages)] == ["scripted_1"]


def test_interactively_a_prompt_typed_while_calls_wait_asks_for_them_first(
    runner: CliRunner, project: Path, url: str
) -> None:
    # later, then a new prompt: the waiting call is asked for again; approved, the prompt runs
    answers = "l\nAnd README.md?\na\na\nexit\n"
    result = invoke(runner, project, url, "-i", "--require-approval", "read_file", PROMPT, input=answers)
    assert result.exit_code == 0, result.output
    assert result.stdout.count("approval needed scripted_1") >= 2
    assert f"scripted: {ANSWER}" in result.stdout
    sid = result.stdout.split("session ")[1].split()[0]
    session = stored(url, sid)
    assert held_calls(session.messages) == ()
    [readme] = [
        p
        for m in session.messages
        for p in m.parts
        if isinstance(p, ToolReturnPart) and "README.md" in str(p.content)
    ]
    assert is_placeholder(readme) is False


def test_resuming_a_paused_session_on_a_terminal_asks(runner: CliRunner, project: Path, url: str) -> None:
    sid = paused_session(runner, project, url)["session_id"]
    result = invoke(runner, project, url, "-i", "--resume", sid, input="a\nexit\n")
    assert result.exit_code == 0, result.output
    assert "approval needed scripted_1" in result.stdout
    assert held_calls(stored(url, sid).messages) == ()


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
def test_on_a_real_terminal_it_asks_without_interactive(tmp_path: Path, project: Path, url: str) -> None:
    """The default path: standard input is a terminal (a pseudo-terminal here), no -i needed."""
    import pty
    import select

    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_SESSION_DIR", "HARNESS_STORE")}
    env |= {"XDG_DATA_HOME": str(tmp_path / "xdg"), "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    main, secondary = pty.openpty()
    process = subprocess.Popen(
        [HARNESS, "run", "--root", str(project), "--store", url, "--require-approval", "read_file", PROMPT],
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        env=env,
    )
    os.close(secondary)
    seen = b""
    answered = False
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(main, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                seen += chunk
            if not answered and b"[a/r/e/l]:" in seen:
                os.write(main, b"a\n")
                answered = True
            if process.poll() is not None and not ready:
                break
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
        os.close(main)
    text = seen.decode(errors="replace")
    assert answered, text
    assert process.returncode == 0, text
    assert ANSWER in text


# ------------------------------------------------------------------------------ errors


def test_a_new_prompt_on_a_paused_session_is_refused(runner: CliRunner, project: Path, url: str) -> None:
    sid = paused_session(runner, project, url)["session_id"]
    before = stored(url, sid).messages
    result = invoke(runner, project, url, "--resume", sid, "And README.md?")
    assert result.exit_code == 2
    assert "error: ApprovalPendingError: session" in result.stderr
    assert "has tool calls waiting for approval (scripted_1); the prompt was not run" in result.stderr
    assert f"--resume {sid} --approve CALL_ID" in result.stderr
    assert stored(url, sid).messages == before


def test_an_option_naming_a_call_that_does_not_wait_is_refused(
    runner: CliRunner, project: Path, url: str
) -> None:
    sid = paused_session(runner, project, url)["session_id"]
    result = invoke(runner, project, url, "--resume", sid, "--approve", "nope")
    assert result.exit_code == 2
    assert (
        f"error: ApprovalError: tool call 'nope' is not waiting for approval in session '{sid}' "
        "(waiting: scripted_1)"
    ) in result.stderr
    assert [c.tool_call_id for c in held_calls(stored(url, sid).messages)] == ["scripted_1"]


def test_decisions_for_a_session_that_is_not_paused_are_refused(
    runner: CliRunner, project: Path, url: str
) -> None:
    done = invoke(runner, project, url, "--json", PROMPT)
    sid = json.loads(done.stdout)["session_id"]
    result = invoke(runner, project, url, "--resume", sid, "--approve", "scripted_1")
    assert result.exit_code == 2
    assert f"session '{sid}' has no tool calls waiting for approval" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--edit", "scripted_1"], "'scripted_1': give CALL_ID=JSON, the call's new arguments"),
        (
            ["--edit", "scripted_1=[1]"],
            "the arguments of 'scripted_1' are not a JSON object: a JSON object is needed",
        ),
        (["--edit", "scripted_1={nope"], "the arguments of 'scripted_1' are not a JSON object: Expecting"),
        (
            ["--approve", "scripted_1", "--reject", "scripted_1=no"],
            "tool call 'scripted_1' is given two decisions",
        ),
        (["--approve", "=x"], "'=x' names no tool call"),
    ],
)
def test_malformed_decision_options_are_usage_errors(
    runner: CliRunner, project: Path, url: str, args: list[str], message: str
) -> None:
    result = invoke(runner, project, url, "--resume", "whatever", *args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_require_approval_with_a_tool_approval_stack_entry_is_refused(
    runner: CliRunner, project: Path, url: str
) -> None:
    result = invoke(
        runner, project, url, "--stack", "tool_approval", "--require-approval", "read_file", PROMPT
    )
    assert result.exit_code == 2
    assert "--require-approval and a tool_approval stack entry both configure approval" in result.stderr


def test_a_stack_entry_configures_approval_too(runner: CliRunner, project: Path, url: str) -> None:
    result = invoke(runner, project, url, "--json", "--stack", "tool_approval:tools=read_file", PROMPT)
    assert result.exit_code == EXIT_AWAITING_APPROVAL, result.output
    assert json.loads(result.stdout)["status"] == "awaiting_approval"


def test_without_the_plugin_the_options_say_what_to_install(
    runner: CliRunner, project: Path, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESS_DISABLE_PLUGINS", "tool_approval")
    result = invoke(runner, project, url, "--require-approval", "read_file", PROMPT)
    assert result.exit_code == 2
    assert "--require-approval needs the approval plugin: install harness-tool-approval" in result.stderr
    plain = invoke(runner, project, url, "--json", PROMPT)
    assert plain.exit_code == 0, plain.output
    assert json.loads(plain.stdout)["status"] == "completed"


def test_a_held_call_is_shown_as_run_only_once_it_ran(runner: CliRunner, project: Path, url: str) -> None:
    paused = invoke(runner, project, url, "--session", "shown", "--require-approval", "read_file", PROMPT)
    assert paused.exit_code == EXIT_AWAITING_APPROVAL, paused.output
    assert "approval needed scripted_1: read_file" in paused.stdout
    assert "→ read_file" not in paused.stdout  # not printed as if it had already run
    approved = invoke(runner, project, url, "--resume", "shown", "--approve", "scripted_1")
    assert approved.exit_code == 0, approved.output
    assert "→ read_file(path='app.py', limit=150)" in approved.stdout
