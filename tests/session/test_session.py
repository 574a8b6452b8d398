"""Session files: keys, round trips, version checks, load errors, backups, listing."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core import (
    CanonicalMessage,
    RetryPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    Usage,
    UserPromptPart,
)
from harness.errors import SessionLoadError, SessionSaveError
from harness.session import (
    SESSION_KEYS,
    SESSION_VERSION,
    Session,
    atomic_write_bytes,
    default_session_dir,
    find_session,
    list_sessions,
    project_id_for,
)
from harness.testing.strategies import histories


def sample_messages() -> list[CanonicalMessage]:
    return [
        CanonicalMessage.request(UserPromptPart("list files", timestamp=datetime(2026, 1, 2, tzinfo=UTC))),
        CanonicalMessage.response(
            ThoughtPart("thinking", signature="sig"),
            TextPart("Sure."),
            ToolCallPart(tool_call_id="tc_1", tool_name="bash", args={"command": "ls"}),
            ToolCallPart(tool_call_id="tc_2", tool_name="bash", args='{"command": "pwd"}'),
            usage=Usage(request_tokens=10, response_tokens=3, cached_tokens=4),
            model_name="gpt-test",
        ),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="tc_1", tool_name="bash", content="a\nb"),
            RetryPromptPart("bad", tool_name="bash", tool_call_id="tc_2"),
        ),
        CanonicalMessage.response(TextPart("done")),
    ]


def make_session(tmp_path: Path, **fields: Any) -> Session:
    session = Session.create(tmp_path, **fields)
    session.messages = sample_messages()
    session.thoughts = ["an old thought"]
    session.usage = Usage(request_tokens=100, response_tokens=20, cached_tokens=30, cache_write_tokens=2)
    session.current_model = "gpt-test"
    session.total_tokens = 42
    return session


def test_file_holds_exactly_the_contract_keys(tmp_path: Path) -> None:
    path = make_session(tmp_path).save()
    data = json.loads(path.read_text())
    assert list(data) == list(SESSION_KEYS)
    assert set(SESSION_KEYS) == {
        "version",
        "session_id",
        "project_id",
        "created_at",
        "last_modified",
        "working_directory",
        "current_model",
        "total_tokens",
        "session_total_usage",
        "thoughts",
        "messages",
    }
    assert data["version"] == SESSION_VERSION == 2
    assert data["session_total_usage"] == {
        "request_tokens": 100,
        "response_tokens": 20,
        "cached_tokens": 30,
        "cache_write_tokens": 2,
    }
    assert data["messages"][1]["parts"][2] == {
        "part_kind": "tool-call",
        "tool_call_id": "tc_1",
        "tool_name": "bash",
        "args": {"command": "ls"},
    }
    assert data["messages"][1]["parts"][3]["args"] == '{"command": "pwd"}'


def test_round_trip_preserves_everything(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    path = session.save()
    loaded = Session.load(path)
    assert loaded.messages == session.messages
    assert loaded.thoughts == session.thoughts
    assert loaded.usage == session.usage
    assert loaded.session_id == session.session_id
    assert loaded.project_id == session.project_id
    assert loaded.created_at == session.created_at
    assert loaded.last_modified == session.last_modified
    assert loaded.working_directory == session.working_directory
    assert loaded.current_model == "gpt-test"
    assert loaded.total_tokens == 42
    assert loaded.path == path


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=histories(max_messages=12))
def test_round_trip_of_generated_histories(tmp_path: Path, messages: list[CanonicalMessage]) -> None:
    session = Session.create(tmp_path)
    session.messages = messages
    assert Session.load(session.save()).messages == messages


def test_save_is_atomic_and_keeps_backup(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    path = session.save()
    first = path.read_bytes()
    session.messages.append(CanonicalMessage.user("more"))
    session.save()
    backup = path.with_name(path.name + ".bak")
    assert backup.read_bytes() == first
    assert len(Session.load(path).messages) == 5
    assert len(Session.load(backup).messages) == 4
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)


def test_atomic_write_cleans_temp_file_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "missing_dir" / "file.json"
    with pytest.raises(OSError):
        atomic_write_bytes(target, b"{}")
    target.parent.mkdir()
    atomic_write_bytes(target, b"{}", backup=False)
    atomic_write_bytes(target, b"[]", backup=False)
    assert target.read_bytes() == b"[]"
    assert not target.with_name(target.name + ".bak").exists()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "file is empty"),
        (b'{"version": 2, "session_id": "ab', "not valid JSON"),
        (b"\xff\xfe garbage", "not valid JSON"),
        (b"[1, 2]", "top level must be a JSON object"),
        (b'{"session_id": "x"}', "missing key 'version'"),
        (b'{"version": 99}', "unknown version 99"),
        (b'{"version": "2"}', "key 'version' must be an integer"),
        (b'{"version": true}', "key 'version' must be an integer"),
    ],
)
def test_bad_files_raise_session_load_error_and_stay_untouched(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    path = tmp_path / "s.json"
    path.write_bytes(content)
    before = os.stat(path)
    with pytest.raises(SessionLoadError, match=reason) as info:
        Session.load(path)
    assert info.value.path == path
    assert str(path) in str(info.value)
    assert path.read_bytes() == content
    assert os.stat(path).st_mtime_ns == before.st_mtime_ns


def valid_document(tmp_path: Path) -> dict[str, Any]:
    return make_session(tmp_path).to_dict()


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("session_id", 5, "key 'session_id' must be a string"),
        ("session_id", "", "key 'session_id' is empty"),
        ("created_at", "yesterday", "not an ISO 8601 timestamp"),
        ("total_tokens", "many", "key 'total_tokens' must be an integer"),
        ("session_total_usage", [], "must be an object"),
        (
            "session_total_usage",
            {"request_tokens": "x"},
            "session_total_usage.request_tokens must be an integer",
        ),
        ("thoughts", "a thought", "key 'thoughts' must be a list"),
        ("thoughts", [1], r"thoughts\[0\] must be a string"),
        ("messages", {}, "key 'messages' must be a list"),
        ("messages", [{"kind": "request", "parts": [{"part_kind": "tool-return"}]}], "messages: message 0"),
        ("current_model", 3, "current_model"),
        ("working_directory", None, "working_directory"),
    ],
)
def test_wrong_types_name_the_key(tmp_path: Path, key: str, value: Any, reason: str) -> None:
    document = valid_document(tmp_path)
    document[key] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))
    with pytest.raises(SessionLoadError, match=reason):
        Session.load(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SessionLoadError, match="file not found"):
        Session.load(tmp_path / "nope.json")


def test_error_mentions_backup_when_present(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    path = session.save()
    session.save()
    path.write_bytes(b"{truncated")
    with pytest.raises(SessionLoadError, match=r"a backup exists: .*\.bak"):
        Session.load(path)


def test_save_after_failed_load_refuses_to_overwrite_unless_forced(tmp_path: Path) -> None:
    good = make_session(tmp_path)
    path = good.save()
    good.save()  # creates a backup
    corrupt = b'{"version": 2, "messages": [trunc'
    path.write_bytes(corrupt)
    with pytest.raises(SessionLoadError):
        Session.load(path)
    with pytest.raises(SessionSaveError, match="refusing to overwrite"):
        good.save()
    assert path.read_bytes() == corrupt
    good.save(force=True)
    assert Session.load(path).messages == good.messages
    assert path.with_name(path.name + ".corrupt").read_bytes() == corrupt
    assert Session.load(path.with_name(path.name + ".bak")).messages == good.messages  # backup stayed good
    good.save()  # the quarantine is lifted after a successful save


def test_version_1_tunacode_file_is_migrated(tmp_path: Path) -> None:
    document = {
        "version": 1,
        "session_id": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
        "project_id": "abcdef0123456789",
        "created_at": "2026-01-20T10:00:00",
        "last_modified": "2026-01-20T11:00:00+00:00",
        "working_directory": "/home/u/project",
        "current_model": "openrouter:openai/gpt-4.1",
        "session_total_usage": {
            "prompt_tokens": 1200,
            "completion_tokens": 300,
            "cached_tokens": 800,
            "cost": 0.25,
        },
        "thoughts": ["first thought"],
        "messages": [
            {"content": "legacy user text"},
            {"thought": "legacy thought"},
            {
                "kind": "request",
                "parts": [{"part_kind": "user-prompt", "content": "hi", "timestamp": "2026-01-20T10:00:00Z"}],
                "instructions": None,
                "run_id": "abc",
                "metadata": None,
            },
            {
                "kind": "response",
                "parts": [
                    {
                        "part_kind": "tool-call",
                        "tool_name": "bash",
                        "args": '{"command": "ls"}',
                        "tool_call_id": "call_1",
                        "id": None,
                        "provider_details": None,
                    }
                ],
                "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_tokens": 2},
                "model_name": "gpt-4.1",
                "timestamp": "2026-01-20T10:00:01Z",
                "provider_name": "openrouter",
                "provider_details": None,
                "provider_response_id": "gen-1",
                "finish_reason": "tool_call",
                "run_id": "abc",
                "metadata": None,
            },
            {
                "kind": "request",
                "parts": [
                    {
                        "part_kind": "tool-return",
                        "tool_name": "bash",
                        "content": "file.txt",
                        "tool_call_id": "call_1",
                        "metadata": None,
                        "timestamp": "2026-01-20T10:00:02Z",
                    }
                ],
            },
        ],
    }
    path = tmp_path / "abcdef0123456789_0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0.json"
    path.write_text(json.dumps(document))
    session = Session.load(path)
    assert session.usage == Usage(
        request_tokens=1200, response_tokens=300, cached_tokens=800, extra={"cost": 0.25}
    )
    assert session.thoughts == ["first thought", "legacy thought"]
    assert session.total_tokens == 0
    assert session.created_at.tzinfo is not None
    kinds = [m.kind for m in session.messages]
    assert kinds[0] == "request"
    calls = [p for m in session.messages for p in m.parts if isinstance(p, ToolCallPart)]
    assert calls[0].tool_call_id == "call_1"
    assert calls[0].args == '{"command": "ls"}'
    # saving writes version 2 and the result loads again
    session.save(tmp_path / "migrated.json")
    migrated = json.loads((tmp_path / "migrated.json").read_text())
    assert migrated["version"] == 2
    assert migrated["session_total_usage"]["request_tokens"] == 1200
    assert migrated["session_total_usage"]["cost"] == 0.25
    again = Session.load(tmp_path / "migrated.json")
    assert again.messages == session.messages
    assert again.usage == session.usage


def test_default_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("HARNESS_SESSION_DIR", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_session_dir() == tmp_path / "xdg" / "harness" / "sessions"
    session = Session()
    path = session.save()
    assert path.parent == tmp_path / "xdg" / "harness" / "sessions"
    assert path.name == f"{session.project_id}_{session.session_id}.json"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert default_session_dir() == Path.home() / ".local" / "share" / "harness" / "sessions"


def test_harness_session_dir_wins_over_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HARNESS_SESSION_DIR", str(tmp_path / "mine"))
    assert default_session_dir() == tmp_path / "mine"
    path = Session().save()
    assert path.parent == tmp_path / "mine"
    assert [info.path for info in list_sessions().sessions] == [path]


def test_project_id_uses_git_top_level(tmp_path: Path) -> None:
    import hashlib
    import subprocess

    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    expected = hashlib.sha256(str(repo.resolve()).encode()).hexdigest()[:16]
    assert project_id_for(repo / "sub") == expected
    plain = tmp_path / "plain"
    plain.mkdir()
    assert project_id_for(plain) == hashlib.sha256(str(plain.resolve()).encode()).hexdigest()[:16]
    assert len(Session().project_id) == 16


def test_list_sessions_newest_first_and_reports_problems(tmp_path: Path) -> None:
    older = make_session(tmp_path)
    older.save()
    newer = make_session(tmp_path)
    newer.messages = newer.messages[:2]
    newer.save()
    (tmp_path / "broken_1.json").write_text("{not json")
    (tmp_path / "future_2.json").write_text(json.dumps({"version": 7}))
    listing = list_sessions(tmp_path)
    assert [s.session_id for s in listing.sessions] == [newer.session_id, older.session_id]
    first = listing.sessions[0]
    assert first.message_count == 2
    assert first.current_model == "gpt-test"
    assert first.path == newer.path
    problems = {p.path.name: p.reason for p in listing.problems}
    assert set(problems) == {"broken_1.json", "future_2.json"}
    assert "unknown version 7" in problems["future_2.json"]
    assert list_sessions(tmp_path / "absent").sessions == ()
    assert find_session(older.session_id, tmp_path) == older.path
    assert find_session("nope", tmp_path) is None


def test_run_state_is_not_on_the_session_and_original_query_is_not_persisted(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    assert not hasattr(session, "runtime"), "a run's state belongs to the run, not to the session"
    session.original_query = "abcd1234 the task"
    path = session.save()
    assert "abcd1234" not in path.read_text()
    assert Session.load(path).original_query is None


def test_record_run_is_the_one_write_a_run_makes(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    before = list(session.messages)
    session.usage = Usage(request_tokens=1, response_tokens=2)
    session.thoughts = ["old"]
    history = [*before, CanonicalMessage.user("more")]
    session.record_run(
        messages=history,
        usage=Usage(request_tokens=10, response_tokens=20),
        thoughts=["new"],
        model_name="m2",
        total_tokens=42,
        original_query="task",
    )
    assert session.messages is history
    assert (session.usage.request_tokens, session.usage.response_tokens) == (11, 22)
    assert session.thoughts == ["old", "new"]
    assert (session.current_model, session.total_tokens, session.original_query) == ("m2", 42, "task")


def test_new_is_in_memory_and_update_token_count() -> None:
    from harness.tokens import TokenCounter

    session = Session.new(current_model="m")
    assert session.path is None
    assert session.current_model == "m"
    session.messages = sample_messages()
    counter = TokenCounter()
    assert session.update_token_count(counter) == counter.count_messages(session.messages)
    assert session.total_tokens > 0


_VALID_FILE: dict[str, bytes] = {}


def _valid_bytes(tmp_path: Path) -> bytes:
    if "doc" not in _VALID_FILE:
        _VALID_FILE["doc"] = make_session(tmp_path).save(tmp_path / "valid.json").read_bytes()
    return _VALID_FILE["doc"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_truncated_or_corrupted_files_raise_only_session_load_error(
    tmp_path: Path, data: st.DataObject
) -> None:
    original = _valid_bytes(tmp_path)
    if data.draw(st.booleans(), label="truncate"):
        cut = data.draw(st.integers(0, len(original) - 1), label="cut")
        damaged = original[:cut]
    else:
        position = data.draw(st.integers(0, len(original) - 1), label="position")
        byte = data.draw(st.integers(0, 255), label="byte")
        damaged = original[:position] + bytes([byte]) + original[position + 1 :]
    path = tmp_path / "damaged.json"
    path.write_bytes(damaged)
    failure: SessionLoadError | None = None
    try:
        Session.load(path)
    except SessionLoadError as exc:
        failure = exc
    if failure is not None:
        assert failure.path == path
    assert path.read_bytes() == damaged  # never modified, loaded or not


def test_a_throw_away_session_runs_no_subprocess(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 12 #11: ``Session()`` must not run ``git rev-parse`` until project_id is needed."""
    import subprocess

    import harness.session.paths as session_module

    session_module._project_id.cache_clear()  # pyright: ignore[reportPrivateUsage]
    calls: list[object] = []
    real_run = subprocess.run

    def counting_run(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0] if args else kwargs.get("args"))
        return real_run(*args, **kwargs)

    monkeypatch.setattr(subprocess, "run", counting_run)
    session = Session()
    assert calls == [], "the constructor ran a subprocess"
    assert Session(project_id="given").project_id == "given"
    assert calls == []
    assert len(session.project_id) == 16
    assert calls
    assert calls[0] == ["git", "rev-parse", "--show-toplevel"]


def test_paths_are_accepted_as_str_and_pathlike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 12 #26: every path parameter takes str and os.PathLike."""
    monkeypatch.chdir(tmp_path)
    session = Session(path="sessions/s.json")
    assert session.path == Path("sessions/s.json")
    saved = session.save()
    assert saved.is_file()
    assert Session.load("sessions/s.json").session_id == session.session_id

    class Custom(os.PathLike[str]):
        def __fspath__(self) -> str:
            return str(tmp_path / "custom.json")

    other = Session()
    other.path = Custom()  # type: ignore[assignment]  # the converter runs on assignment too
    assert other.path == tmp_path / "custom.json"
    assert other.save() == tmp_path / "custom.json"
    assert Session.create(str(tmp_path / "dir")).path is not None
    assert list_sessions(str(tmp_path / "dir")).sessions == ()
