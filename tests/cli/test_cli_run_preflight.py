"""``harness run`` checks the model before any session exists, and a failed first turn leaves no file.

Every test runs the installed ``harness`` command as a real subprocess against a loopback
OpenAI server (or none), with its own session folder.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.cli.conftest import OpenAIServer  # pyright: ignore[reportMissingTypeStubs]

HARNESS = str(Path(sys.executable).with_name("harness"))
_PROVIDER_VARIABLES = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")


def harness(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``harness`` with no provider variables but ``env``, sessions under ``tmp_path/sessions``."""
    clean = {k: v for k, v in os.environ.items() if k not in _PROVIDER_VARIABLES and k != "HARNESS_MODEL"}
    clean |= {
        "HARNESS_SESSION_DIR": str(tmp_path / "sessions"),
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
        **env,
    }
    return subprocess.run(
        [HARNESS, *args], capture_output=True, text=True, env=clean, cwd=tmp_path, timeout=120, check=False
    )


def session_files(tmp_path: Path) -> list[Path]:
    """Every file sessions left in the folder store (its lock file is the store's) or the XDG folder."""
    folder = [p for p in sorted((tmp_path / "sessions").glob("*")) if p.name != ".harness-store.lock"]
    return folder + sorted(p for p in (tmp_path / "xdg").rglob("*") if p.is_file())


def snapshots(tmp_path: Path) -> list[Path]:
    """The folder store's session files (``<project_id>_<session_id>.json``)."""
    return sorted((tmp_path / "sessions").glob("*.json"))


def tool_call_completion(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A ``chat.completion`` object calling one tool."""
    answer: dict[str, Any] = {
        "id": "chatcmpl-loopback-tool",
        "object": "chat.completion",
        "created": 1741570283,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "logprobs": None, "finish_reason": "tool_calls"}],
    }
    answer["choices"][0]["message"] = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_loopback_1",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }
    return answer


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_no_api_key_fails_before_creating_a_session(tmp_path: Path) -> None:
    completed = harness(tmp_path, "run", "--model", "openai:gpt-4o-mini", "--root", str(tmp_path), "hi")
    assert completed.returncode == 2, completed.stderr
    assert "error: ModelAuthenticationError" in completed.stderr
    assert "OPENAI_API_KEY" in completed.stderr
    assert session_files(tmp_path) == []


def test_no_anthropic_key_fails_before_creating_a_session(tmp_path: Path) -> None:
    completed = harness(tmp_path, "run", "--model", "anthropic:claude-sonnet-4-6", "hi")
    assert completed.returncode == 2, completed.stderr
    assert "error: ModelAuthenticationError" in completed.stderr
    assert "ANTHROPIC_API_KEY" in completed.stderr
    assert session_files(tmp_path) == []


def test_a_refused_key_fails_on_the_check_and_sends_no_prompt(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.models_status = 401
    completed = harness(
        tmp_path,
        "run",
        "--model",
        "openai:gpt-4o-mini",
        "hi",
        OPENAI_API_KEY="sk-wrong",
        OPENAI_BASE_URL=openai_server.base_url,
    )
    assert completed.returncode == 2, completed.stderr
    assert "error: ModelAuthenticationError: openai model 'gpt-4o-mini' (HTTP 401)" in completed.stderr
    assert openai_server.requests == ["GET /v1/models"]  # one check, no retry, no chat request
    assert session_files(tmp_path) == []


def test_an_unreachable_server_fails_naming_it(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    completed = harness(
        tmp_path, "run", "--model", "openai:gpt-4o-mini", "hi", OPENAI_API_KEY="sk-x", OPENAI_BASE_URL=url
    )
    assert completed.returncode == 2, completed.stderr
    assert "error: ModelUnavailableError" in completed.stderr
    assert f"cannot reach {url}" in completed.stderr
    assert session_files(tmp_path) == []


def test_a_reachable_server_is_checked_first_then_used(tmp_path: Path, openai_server: OpenAIServer) -> None:
    completed = harness(
        tmp_path,
        "run",
        "--json",
        "--model",
        "openai:gpt-4o-mini",
        "--stack",
        "",
        "hi",
        OPENAI_API_KEY="sk-ok",
        OPENAI_BASE_URL=openai_server.base_url,
    )
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    assert report["output"] == "loopback answer"
    assert openai_server.requests == ["GET /v1/models", "POST /v1/chat/completions"]
    (snapshot,) = snapshots(tmp_path)
    assert Path(report["session_path"]) == snapshot
    assert all(p.name.startswith(snapshot.stem) for p in session_files(tmp_path))  # its log and state


def test_a_server_without_a_model_list_passes_the_check(tmp_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.models_status = 404
    completed = harness(
        tmp_path,
        "run",
        "--json",
        "--model",
        "openai:gpt-4o-mini",
        "hi",
        OPENAI_API_KEY="sk-ok",
        OPENAI_BASE_URL=openai_server.base_url,
    )
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["output"] == "loopback answer"


def test_a_first_turn_failing_before_any_answer_leaves_no_file(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.chat_status = 400  # the check passes, the request itself is refused
    completed = harness(
        tmp_path,
        "run",
        "--model",
        "openai:gpt-4o-mini",
        "hi",
        OPENAI_API_KEY="sk-ok",
        OPENAI_BASE_URL=openai_server.base_url,
    )
    assert completed.returncode == 2, completed.stderr
    assert "ModelBadRequestError" in completed.stderr
    assert openai_server.requests == ["GET /v1/models", "POST /v1/chat/completions"]
    assert session_files(tmp_path) == []


def test_a_first_turn_failing_after_an_answer_keeps_its_work(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.chat_replies = [
        (200, tool_call_completion("list_dir", {"path": "."})),
        (400, {"error": {"message": "loopback refuses the second request", "type": "error"}}),
    ]
    completed = harness(
        tmp_path,
        "run",
        "--model",
        "openai:gpt-4o-mini",
        "--session",
        "half-done",
        "List this folder.",
        OPENAI_API_KEY="sk-ok",
        OPENAI_BASE_URL=openai_server.base_url,
    )
    assert completed.returncode == 2, completed.stderr
    assert "ModelBadRequestError" in completed.stderr
    (saved,) = snapshots(tmp_path)
    store = f"file://{tmp_path / 'sessions'}"
    assert f"the session so far was saved in {store}; continue with: harness run --resume half-done" in (
        completed.stderr
    )
    kinds = [message["kind"] for message in json.loads(saved.read_text())["messages"]]
    assert kinds[:3] == ["request", "response", "request"]  # the prompt, the call, the tool's answer


def test_a_refused_key_leaves_a_resumed_session_untouched(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    first = harness(tmp_path, "run", "--json", "--session", "kept", "What is in this folder?")
    assert first.returncode == 0, first.stderr
    before = {path: path.read_bytes() for path in session_files(tmp_path)}
    openai_server.models_status = 403
    again = harness(
        tmp_path,
        "run",
        "--resume",
        "kept",
        "--model",
        "openai:gpt-4o-mini",
        "And now?",
        OPENAI_API_KEY="sk-wrong",
        OPENAI_BASE_URL=openai_server.base_url,
    )
    assert again.returncode == 2, again.stderr
    assert "ModelAuthenticationError" in again.stderr
    assert {path: path.read_bytes() for path in session_files(tmp_path)} == before


@pytest.mark.parametrize("words", ["exit\n", ""])
def test_an_interactive_run_without_a_turn_writes_nothing(tmp_path: Path, words: str) -> None:
    completed = subprocess.run(
        [HARNESS, "run", "-i"],
        input=words,
        capture_output=True,
        text=True,
        env={**os.environ, "HARNESS_SESSION_DIR": str(tmp_path / "sessions")},
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert "was not created" in completed.stdout
    assert session_files(tmp_path) == []
