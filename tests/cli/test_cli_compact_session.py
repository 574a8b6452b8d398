"""``harness compact --session ID``: a stored session compacted from outside, saved back through its store.

On a real SQLite store, and on PostgreSQL when a server answers (``$HARNESS_TEST_POSTGRES_DSN``;
skipped elsewhere, a failure under ``CI=true``; a schema of its own, dropped afterwards). The
concurrent writer of the conflict test is a test-only capability distribution written into a
temporary folder (a package and its ``dist-info``), found by entry-point discovery like any
installed plugin, that writes to the session through the store while the stack runs.
"""

from __future__ import annotations

import json
import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import harness.hooks.entrypoints as entrypoints_module
from harness.cli import cli
from harness.cli.compact import EXIT_CONFLICT
from harness.config.store import open_store
from harness.core.messages import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart
from harness.errors import SessionConflictError
from harness.history import check_invariants
from harness.session import Session, SessionStore
from harness.stores import default_store_url
from harness.tokens import TokenCounter

STACK = "sliding_window:keep_messages=2"


def history(reads: int = 4) -> list[CanonicalMessage]:
    messages: list[CanonicalMessage] = [CanonicalMessage.user("Read the files and sum up.")]
    for n in range(reads):
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"c{n}", tool_name="read_file", args={"path": f"f{n}.py"})
            )
        )
        body = "".join(f"f{n}.py line {i}: text\n" for i in range(150))
        messages.append(
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=f"c{n}", tool_name="read_file", content=body)
            )
        )
    messages.append(CanonicalMessage.response(TextPart("The files hold text.")))
    return messages


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'sessions.db'}"
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from harness_postgres.testing import require_server, schema_url, temporary_schema

    dsn = require_server()
    with temporary_schema(dsn, "harness_compact_cli") as schema:
        yield schema_url(dsn, schema)


@pytest.fixture
def store(store_url: str) -> Iterator[SessionStore]:
    opened = open_store(store_url)
    yield opened
    opened.close()


def stored(store: SessionStore, messages: list[CanonicalMessage] | None = None) -> Session:
    session = Session.create(store=store)
    session.messages = history() if messages is None else messages
    session.checkpoint()
    return session


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["compact", *args])
    return result.exit_code, result.stdout, result.stderr


def test_dry_run_shows_the_manifest_and_writes_nothing(store: SessionStore, store_url: str) -> None:
    session = stored(store)
    code, out, err = invoke(
        "--session", session.session_id, "--store", store_url, "--stack", STACK, "--dry-run", "--json"
    )
    assert code == 0, err
    manifest = json.loads(out)
    assert manifest["session"] == session.session_id
    assert manifest["store"] == store.url
    assert manifest["file"] is None
    assert manifest["format"] == "session"
    assert manifest["dry_run"] is True
    assert manifest["written"] is None
    assert [e["capability"] for e in manifest["edits"]] == ["sliding_window"]
    assert manifest["messages_before"] == 10
    assert manifest["messages_after"] < 10
    assert manifest["revision"] == manifest["revision_before"] == session.revision
    again = Session.open(store, session.session_id)
    assert again.revision == session.revision
    assert again.messages == session.messages


def test_the_compacted_view_is_saved_and_the_log_keeps_the_originals(
    store: SessionStore, store_url: str
) -> None:
    session = stored(store)
    code, out, err = invoke("--session", session.session_id, "--store", store_url, "--stack", STACK, "--json")
    assert code == 0, err
    manifest = json.loads(out)
    assert manifest["revision"] == session.revision + 1
    assert manifest["written"] == f"{store.url} session {session.session_id} revision {manifest['revision']}"
    reopened = Session.open(store, session.session_id)
    assert reopened.revision == manifest["revision"]
    assert len(reopened.messages) == manifest["messages_after"] < len(session.messages)
    assert not check_invariants(reopened.messages, persisted=True)
    assert reopened.transcript() == session.messages, "every replaced message stays in the log"
    assert reopened.total_tokens == TokenCounter().count_messages(reopened.messages)
    [edit] = store.edits(session.session_id)
    assert [event["strategy"] for event in edit.events] == ["sliding_window"]
    # the view and the log as `harness sessions show` presents them
    shown = CliRunner().invoke(
        cli, ["sessions", "--store", store_url, "show", session.session_id, "--transcript"]
    )
    assert shown.exit_code == 0, shown.output
    assert "replaced by sliding_window" in shown.output


def test_a_second_writer_that_read_before_gets_a_conflict_and_nothing_is_lost(
    store: SessionStore, store_url: str
) -> None:
    session = stored(store)
    other = Session.open(store, session.session_id)  # a run holding the session, at the same revision
    code, _, err = invoke("--session", session.session_id, "--store", store_url, "--stack", STACK)
    assert code == 0, err
    other.messages = [*other.messages, CanonicalMessage.user("And one more thing.")]
    with pytest.raises(SessionConflictError) as raised:
        other.checkpoint()
    assert raised.value.expected == session.revision
    reopened = Session.open(store, session.session_id)
    assert len(reopened.messages) < len(session.messages), "the compaction is kept"
    assert reopened.transcript() == session.messages
    reopened.messages = [*reopened.messages, CanonicalMessage.user("And one more thing.")]
    reopened.checkpoint()  # reloaded, the other writer goes on from the compacted view
    assert Session.open(store, session.session_id).messages[-1] == CanonicalMessage.user(
        "And one more thing."
    )


WRITER = '''
"""A test capability: while the stack runs, another writer appends a turn to the session in the store."""

import os

from harness import CanonicalMessage, Capability, Session, TextPart
from harness.config.store import open_store


class ConcurrentWriter(Capability):
    name = "concurrent_writer"

    async def compact(self, ctx, *, reason="forced"):
        store = open_store(os.environ["FIXTURE_STORE_URL"])
        try:
            other = Session.open(store, ctx.session.session_id)
            other.messages = [
                *other.messages,
                CanonicalMessage.user("a turn written meanwhile"),
                CanonicalMessage.response(TextPart("answered meanwhile")),
            ]
            other.checkpoint()
        finally:
            store.close()
'''

MODULE = "harness_fixture_writer"


@pytest.fixture
def concurrent_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store_url: str) -> Iterator[None]:
    """The fixture capability installed; only it, sliding_window and the postgres store are loaded."""
    root = tmp_path / "site"
    package = root / MODULE
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(WRITER))
    info = root / f"{MODULE}-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: harness-fixture-writer\nVersion: 0.1.0\nSummary: test only\n"
    )
    (info / "entry_points.txt").write_text(f"[harness]\nconcurrent_writer = {MODULE}:ConcurrentWriter\n")
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv(entrypoints_module.LOAD_ENV, "concurrent_writer,sliding_window,postgres")
    monkeypatch.delenv(entrypoints_module.DISABLE_ENV, raising=False)
    monkeypatch.setattr(entrypoints_module, "_warned_entries", set[tuple[str, str]]())
    monkeypatch.setenv("FIXTURE_STORE_URL", store_url)
    yield
    for name in list(sys.modules):
        if name == MODULE or name.startswith(MODULE + "."):
            del sys.modules[name]


@pytest.mark.usefixtures("concurrent_writer")
def test_a_writer_during_the_compaction_makes_the_save_fail_and_nothing_is_lost(
    store: SessionStore, store_url: str
) -> None:
    session = stored(store)
    code, out, err = invoke(
        "--session", session.session_id, "--store", store_url, "--stack", f"concurrent_writer {STACK}"
    )
    assert code == EXIT_CONFLICT, (out, err)
    assert "error: SessionConflictError" in err
    assert "another writer changed the session" in err
    assert "nothing was written: run the command again" in err
    reopened = Session.open(store, session.session_id)
    assert reopened.messages == [
        *session.messages,
        CanonicalMessage.user("a turn written meanwhile"),
        CanonicalMessage.response(TextPart("answered meanwhile")),
    ], "the other writer's turn is kept, and no compaction was applied over it"
    assert store.edits(session.session_id) == []
    # run again: it compacts the session as it is now
    code, _, err = invoke("--session", session.session_id, "--store", store_url, "--stack", STACK)
    assert code == 0, err
    assert Session.open(store, session.session_id).transcript() == reopened.messages


def test_the_default_store_is_the_one_the_session_commands_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("HARNESS_STORE", raising=False)
    monkeypatch.delenv("HARNESS_SESSION_DIR", raising=False)
    url = default_store_url()
    store = open_store(url)
    session = stored(store)
    store.close()
    code, out, err = invoke("--session", session.session_id, "--stack", STACK, "--json")
    assert code == 0, err
    assert json.loads(out)["store"] == url
    listed = CliRunner().invoke(cli, ["sessions", "list", "--json"])
    assert session.session_id in listed.output
    monkeypatch.setenv("HARNESS_STORE", f"sqlite:///{tmp_path / 'other.db'}")
    code, _, err = invoke("--session", session.session_id, "--stack", STACK)
    assert code == 2
    assert "SessionNotFoundError" in err
    assert "no such session" in err


def test_text_output_names_the_session_and_what_was_saved(store: SessionStore, store_url: str) -> None:
    session = stored(store)
    code, out, err = invoke("--session", session.session_id, "--store", store_url, "--stack", STACK)
    assert code == 0, err
    assert f"session {session.session_id} ({store.url})" in " ".join(out.split())
    assert f"saved session {session.session_id} at revision {session.revision + 1}" in " ".join(out.split())


def test_if_needed_lets_the_triggers_decide(store: SessionStore, store_url: str) -> None:
    session = stored(store)
    idle = "sliding_window:max_messages=50,keep_messages=2"
    code, out, err = invoke(
        "--session", session.session_id, "--store", store_url, "--stack", idle, "--if-needed", "--json"
    )
    assert code == 0, err
    manifest = json.loads(out)
    assert manifest["edits"] == []
    assert manifest["written"] is None
    assert Session.open(store, session.session_id).revision == session.revision
    assert (
        "nothing to save"
        in invoke("--session", session.session_id, "--store", store_url, "--stack", idle, "--if-needed")[1]
    )


def test_still_over_the_window_exits_3_and_saves(store: SessionStore, store_url: str) -> None:
    session = stored(store)
    code, out, err = invoke(
        "--session", session.session_id, "--store", store_url, "--stack", STACK, "--window", "50", "--json"
    )
    assert code == 3
    assert "tokens over --window 50" in err
    assert json.loads(out)["written"] is not None
    assert Session.open(store, session.session_id).revision == session.revision + 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["history.json", "--session", "s1"], "PATH and --session exclude each other"),
        ([], "give a history file PATH, or --session ID"),
        (["--session", "s1", "--out", "x.json"], "--out: not with --session"),
        (["--session", "s1", "--in-place"], "--in-place: not with --session"),
        (["--session", "s1", "--format", "openai"], "--format: not with --session"),
        (["history.json", "--store", "sqlite:///x.db"], "--store needs --session ID"),
    ],
)
def test_bad_combinations_are_usage_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "history.json").write_text("[]")
    code, _, err = invoke(*args)
    assert code == 2
    assert message in err


def test_an_unknown_session_is_an_input_error(store: SessionStore, store_url: str) -> None:
    code, out, err = invoke("--session", "nope", "--store", store_url, "--stack", STACK)
    assert code == 2
    assert out == ""
    assert "SessionNotFoundError" in err
    assert "nope" in err
