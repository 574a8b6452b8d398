"""``harness sessions list | show | search | fork | rm | prune`` on real SQLite stores."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest
from click.testing import CliRunner, Result

from harness.cli import cli
from harness.cli.sessions.manage import parse_when
from harness.core.messages import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart
from harness.session import Session, SessionStore
from harness.stores.sqlite import SqliteStore

CLEAR_EVENT: dict[str, Any] = {
    "strategy": "clear_tool_results",
    "reason": "over 100 tokens",
    "messages_before": 4,
    "messages_after": 4,
    "tokens_before": 300,
    "tokens_after": 90,
    "removed_tool_call_ids": [],
    "cleared_tool_call_ids": ["c1"],
    "details": {},
}


@pytest.fixture(autouse=True)
def clean_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default store is under ``tmp_path/xdg``; no variable of the caller leaks in."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    for name in ("HARNESS_STORE", "HARNESS_SESSION_DIR", "HARNESS_MODEL", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "team.db"


@pytest.fixture
def store(db: Path) -> Iterator[SessionStore]:
    opened = SqliteStore(db)
    yield opened
    opened.close()


def conversation(big: str = "print('the big file')") -> list[CanonicalMessage]:
    return [
        CanonicalMessage.user("read a.py"),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="c1", tool_name="read_file", args={"path": "a.py"})
        ),
        CanonicalMessage.request(ToolReturnPart(tool_call_id="c1", tool_name="read_file", content=big)),
        CanonicalMessage.response(TextPart("a.py prints a line")),
    ]


def stored(store: SessionStore, session_id: str, *, compacted: bool = False, model: str = "m") -> Session:
    """A session of four messages (revision 1); ``compacted``: then its tool result cleared (revision 2)."""
    session = Session.create(store=store, session_id=session_id, current_model=model, working_directory="/w")
    session.messages = conversation()
    session.checkpoint()
    if compacted:
        placeholder = CanonicalMessage.request(
            ToolReturnPart(tool_call_id="c1", tool_name="read_file", content="[tool result cleared]")
        )
        session.note_overlays([placeholder], [CLEAR_EVENT])
        session.messages = [session.messages[0], session.messages[1], placeholder, session.messages[3]]
        session.checkpoint()
    return session


def backdate(db: Path, session_id: str, days: int) -> None:
    """Make a session look ``days`` old (the store keeps ``last_modified`` as ISO text)."""
    moment = (datetime.now(UTC) - timedelta(days=days)).isoformat()
    with sqlite3.connect(db) as raw:
        raw.execute("UPDATE sessions SET last_modified = ? WHERE session_id = ?", (moment, session_id))


def invoke(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=input)


def ok(*args: str, input: str | None = None) -> Result:
    result = invoke(*args, input=input)
    assert result.exit_code == 0, result.output
    return result


def document(*args: str) -> dict[str, Any]:
    parsed = json.loads(ok(*args).stdout)
    assert isinstance(parsed, dict)
    assert next(iter(parsed)) == "schema_version"
    return parsed  # pyright: ignore[reportUnknownVariableType]


# ---------------------------------------------------------------------------------- list


def test_sessions_alone_lists_the_default_store_in_the_xdg_data_folder(tmp_path: Path) -> None:
    default = tmp_path / "xdg" / "harness" / "sessions.db"
    with SqliteStore(default) as opened:
        stored(opened, "older")
        stored(opened, "newer", model="other")
    result = ok("sessions")
    assert result.stdout.index("newer") < result.stdout.index("older")
    listed = document("sessions", "list", "--json")
    assert listed["store"] == f"sqlite:///{default}"
    assert [s["session_id"] for s in listed["sessions"]] == ["newer", "older"]
    assert document("sessions", "--json") == listed


def test_list_shows_each_sessions_first_prompt(
    store: SessionStore, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    long = Session.create(store=store, session_id="a" * 32, working_directory="/w")
    long.original_query = (
        "Where is the configuration parsed, and which module\nreads the environment variables?"
    )
    long.messages = conversation()
    long.checkpoint()
    stored(store, "no-prompt")
    monkeypatch.setenv("COLUMNS", "200")
    lines = ok("sessions", "list", "--store", str(db)).stdout.splitlines()
    assert "first prompt" in lines[1]
    (row,) = [line for line in lines if "a" * 32 in line]
    assert "Where is the configuration parsed, and which mo…" in row  # one line, clipped
    (other,) = [line for line in lines if "no-prompt" in line]
    assert "│ -" in other
    rows = {
        r["session_id"]: r for r in document("sessions", "list", "--store", str(db), "--json")["sessions"]
    }
    assert rows["a" * 32]["original_query"] == long.original_query
    assert rows["no-prompt"]["original_query"] is None


def test_list_json_has_the_view_log_revision_model_and_fork(store: SessionStore, db: Path) -> None:
    stored(store, "a", compacted=True)
    store.fork("a", "b")
    rows = {
        row["session_id"]: row
        for row in document("sessions", "list", "--store", str(db), "--json")["sessions"]
    }
    a, b = rows["a"], rows["b"]
    assert (a["messages"], a["log_length"], a["revision"], a["model"], a["forked_from"]) == (
        4,
        4,
        2,
        "m",
        None,
    )
    assert (b["forked_from"], b["forked_at"], b["revision"]) == ("a", 4, 1)
    assert a["path"] is None
    table = ok("sessions", "list", "--store", f"sqlite:///{db}").stdout
    assert "forked from" in table
    assert "clear" not in table
    line = next(line for line in table.splitlines() if "│ b " in line)
    assert "│ a " in line


def test_an_empty_store_says_so(db: Path) -> None:
    SqliteStore(db).close()
    assert f"no sessions in sqlite:///{db}" in ok("sessions", "--store", str(db)).stdout


def test_harness_store_chooses_the_store_and_store_flag_wins(
    store: SessionStore, db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored(store, "in-team-db")
    other = tmp_path / "other.db"
    with SqliteStore(other) as opened:
        stored(opened, "in-other-db")
    monkeypatch.setenv("HARNESS_STORE", f"sqlite:///{db}")
    assert [s["session_id"] for s in document("sessions", "list", "--json")["sessions"]] == ["in-team-db"]
    flagged = document("sessions", "--store", str(other), "list", "--json")
    assert [s["session_id"] for s in flagged["sessions"]] == ["in-other-db"]
    assert not (tmp_path / "xdg").exists()


def test_store_and_session_dir_are_exclusive(db: Path, tmp_path: Path) -> None:
    result = invoke("sessions", "list", "--store", str(db), "--session-dir", str(tmp_path / "s"))
    assert result.exit_code == 2
    assert "--store and --session-dir are exclusive" in result.output


def test_old_session_files_in_the_default_folder_get_a_hint(tmp_path: Path) -> None:
    folder = tmp_path / "xdg" / "harness" / "sessions"
    Session.new(messages=conversation()).save(folder / "p_old.json")
    result = ok("sessions")
    assert "1 session file of an earlier release" in result.stderr
    assert f"harness sessions import {folder}" in result.stderr


# ---------------------------------------------------------------------------------- show


def test_show_prints_the_view_with_its_overlays(store: SessionStore, db: Path) -> None:
    stored(store, "a", compacted=True)
    text = ok("sessions", "show", "a", "--store", str(db)).stdout
    assert "session a" in text
    assert "revision 2 · 4 messages in view, log 4" in text
    assert "user: read a.py" in text
    assert "→ read_file(path='a.py')" in text
    assert "[overlay of log #2] ← read_file: [tool result cleared]" in text
    assert "the big file" not in text
    view = document("sessions", "show", "a", "--store", str(db), "--json")["view"]
    assert [(v["seq"], v["overlay"], v["source"]) for v in view] == [
        (0, False, None),
        (1, False, None),
        (None, True, 2),
        (3, False, None),
    ]
    assert view[2]["message"]["parts"][0]["content"] == "[tool result cleared]"


def test_show_transcript_marks_what_compaction_replaced(store: SessionStore, db: Path) -> None:
    stored(store, "a", compacted=True)
    lines = ok("sessions", "show", "a", "--transcript", "--store", str(db)).stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if "the big file" in line)
    assert lines[at].startswith("#2")
    assert lines[at + 1].strip() == "replaced by clear_tool_results at revision 2: over 100 tokens"
    assert (
        lines[at + 2].strip()
        == "shown as an overlay at view position 2, written by clear_tool_results at revision 2"
    )
    assert "raw log: 4 messages, 1 edit over it" in "\n".join(lines)
    log = document("sessions", "show", "a", "--transcript", "--json", "--store", str(db))
    assert [entry["seq"] for entry in log["log"]] == [0, 1, 2, 3]
    assert [entry["in_view"] for entry in log["log"]] == [True, True, False, True]
    marks = log["log"][2]["marks"]
    assert [(m["kind"], m["by"], m["revision"]) for m in marks] == [
        ("replaced", ["clear_tool_results"], 2),
        ("overlay", ["clear_tool_results"], 2),
    ]
    assert log["edits"][0]["replaced"] == [2]
    assert log["edits"][0]["events"][0]["reason"] == "over 100 tokens"


def test_show_transcript_names_the_editor_inside_a_rollup(store: SessionStore, db: Path) -> None:
    session = stored(store, "a")
    summary = CanonicalMessage.user("[summary of 3 messages]")
    rollup = {"strategy": "tiered", "reason": "tiers ran", "details": {"tiers": ["summarizing"]}}
    summarized = {
        **CLEAR_EVENT,
        "strategy": "summarizing",
        "reason": "too long",
        "cleared_tool_call_ids": [],
        "removed_tool_call_ids": ["c1"],
        "messages_before": 4,
        "messages_after": 2,
    }
    session.note_overlays([summary], [summarized, rollup])
    session.messages = [summary, session.messages[3]]
    session.checkpoint()
    text = ok("sessions", "show", "a", "--transcript", "--store", str(db)).stdout
    assert text.count("replaced by summarizing (via tiered) at revision 2: too long") == 3


def test_show_full_prints_whole_messages(store: SessionStore, db: Path) -> None:
    session = Session.create(store=store, session_id="long")
    session.messages = [CanonicalMessage.user("word " * 100 + "END")]
    session.checkpoint()
    assert "END" not in ok("sessions", "show", "long", "--store", str(db)).stdout
    assert "END" in ok("sessions", "show", "long", "--full", "--store", str(db)).stdout


def test_show_a_missing_session_names_it_and_the_store(db: Path) -> None:
    SqliteStore(db).close()
    result = invoke("sessions", "show", "nope", "--store", str(db))
    assert result.exit_code == 2
    assert (
        f"error: SessionNotFoundError: session 'nope' in store sqlite:///{db}: no such session"
        in result.stderr
    )


def test_a_corrupt_database_is_named_and_left_alone(tmp_path: Path) -> None:
    broken = tmp_path / "broken.db"
    broken.write_bytes(b"this is not a database" * 100)
    before = broken.read_bytes()
    for command in (["list"], ["show", "a"], ["prune", "--keep", "0", "--yes"]):
        result = invoke("sessions", *command, "--store", str(broken))
        assert result.exit_code == 2, command
        assert f"error: SessionStoreError: store sqlite:///{broken}" in result.stderr
    assert broken.read_bytes() == before


def test_a_corrupt_message_row_names_the_store_and_the_session(store: SessionStore, db: Path) -> None:
    stored(store, "a")
    with sqlite3.connect(db) as raw:
        raw.execute("UPDATE log SET body = '{not json' WHERE session_id = 'a' AND seq = 2")
    for extra in ([], ["--json"], ["--transcript"], ["--transcript", "--json"]):
        result = invoke("sessions", "show", "a", *extra, "--store", str(db))
        assert result.exit_code == 2, extra
        assert f"error: SessionStoreError: session 'a' in store sqlite:///{db}" in result.stderr


# -------------------------------------------------------------------------------- search


def test_search_finds_what_compaction_took_out_of_the_view(store: SessionStore, db: Path) -> None:
    stored(store, "a", compacted=True)
    stored(store, "b")
    hits = document("sessions", "search", "big file", "--store", str(db), "--json")["hits"]
    assert sorted((h["session_id"], h["seq"]) for h in hits) == [("a", 2), ("b", 2)]
    only = document("sessions", "search", "big", "--session", "a", "--store", str(db), "--json")["hits"]
    assert [(h["session_id"], h["seq"]) for h in only] == [("a", 2)]
    assert "the big file" in ok("sessions", "search", "big", "--store", str(db)).stdout
    assert "nothing matches" in ok("sessions", "search", "zebra", "--store", str(db)).stdout
    missing = invoke("sessions", "search", "big", "--session", "nope", "--store", str(db))
    assert missing.exit_code == 2
    assert "session 'nope'" in missing.stderr


# ---------------------------------------------------------------------------------- fork


def test_fork_copies_under_a_new_id(store: SessionStore, db: Path) -> None:
    stored(store, "a", compacted=True)
    result = ok("sessions", "fork", "a", "--as", "a2", "--store", str(db))
    assert (
        "forked a as a2 (4 messages in view, log 4); continue it with: harness run --resume a2"
        in result.stdout
    )
    copy = Session.open(store, "a2")
    assert copy.messages == Session.open(store, "a").messages
    assert copy.forked_from == "a"
    assert copy.transcript() == Session.open(store, "a").transcript()
    auto = document("sessions", "fork", "a", "--json", "--store", str(db))["session"]
    assert len(auto["session_id"]) == 32
    assert auto["forked_from"] == "a"


def test_fork_errors(store: SessionStore, db: Path) -> None:
    stored(store, "a")
    stored(store, "b")
    taken = invoke("sessions", "fork", "a", "--as", "b", "--store", str(db))
    assert taken.exit_code == 2
    assert "SessionConflictError: session 'b'" in taken.stderr
    assert Session.open(store, "b").forked_from is None
    assert invoke("sessions", "fork", "nope", "--store", str(db)).exit_code == 2
    bad = invoke("sessions", "fork", "a", "--as", "../x", "--store", str(db))
    assert bad.exit_code == 2
    assert "use 1-64 letters" in bad.output


# ------------------------------------------------------------------------------------ rm


def ids(store: SessionStore) -> set[str]:
    return {head.session_id for head in store.list_sessions()}


def test_rm_asks_then_deletes_only_what_it_was_given(store: SessionStore, db: Path) -> None:
    for sid in ("a", "b", "c"):
        stored(store, sid)
    declined = invoke("sessions", "rm", "a", "--store", str(db), input="n\n")
    assert declined.exit_code == 1
    assert "delete 1 session from" in declined.stderr
    assert "nothing deleted" in declined.stderr
    assert ids(store) == {"a", "b", "c"}
    assert invoke("sessions", "rm", "a", "--store", str(db), input="").exit_code == 1  # end of input is no
    assert ids(store) == {"a", "b", "c"}
    confirmed = ok("sessions", "rm", "a", "b", "--store", str(db), input="y\n")
    assert "deleted 2 sessions: a, b" in confirmed.stdout
    assert ids(store) == {"c"}
    with sqlite3.connect(db) as raw:
        assert raw.execute("SELECT count(*) FROM log WHERE session_id IN ('a', 'b')").fetchone() == (0,)


def test_rm_of_a_missing_id_deletes_nothing(store: SessionStore, db: Path) -> None:
    stored(store, "a")
    result = invoke("sessions", "rm", "a", "ghost", "--yes", "--store", str(db))
    assert result.exit_code == 2
    assert "session 'ghost'" in result.stderr
    assert "nothing was deleted" in result.stderr
    assert ids(store) == {"a"}
    assert document("sessions", "rm", "a", "--yes", "--json", "--store", str(db))["deleted"] == ["a"]
    assert ids(store) == set()


# --------------------------------------------------------------------------------- prune


def test_prune_refuses_without_a_limit(store: SessionStore, db: Path) -> None:
    stored(store, "a")
    result = invoke("sessions", "prune", "--yes", "--store", str(db))
    assert result.exit_code == 2
    assert "give --keep N, --newer-than DATE|DURATION or both" in result.output
    assert ids(store) == {"a"}


def test_prune_keep_dry_run_then_for_real(store: SessionStore, db: Path) -> None:
    for sid in ("old", "mid", "new"):
        stored(store, sid)
    backdate(db, "old", 30)
    backdate(db, "mid", 10)
    dry = ok("sessions", "prune", "--keep", "1", "--dry-run", "--store", str(db)).stdout
    assert "would prune" in dry
    assert "delete old" in dry
    assert "delete mid" in dry
    assert ids(store) == {"old", "mid", "new"}
    planned = document("sessions", "prune", "--keep", "1", "--dry-run", "--json", "--store", str(db))
    assert (planned["dry_run"], sorted(planned["deleted"])) == (True, ["mid", "old"])
    done = document("sessions", "prune", "--keep", "1", "--yes", "--json", "--store", str(db))
    assert sorted(done["deleted"]) == ["mid", "old"]
    assert ids(store) == {"new"}


def test_prune_newer_than_a_duration_or_a_date_after_confirming(store: SessionStore, db: Path) -> None:
    for sid in ("old", "mid", "new"):
        stored(store, sid)
    backdate(db, "old", 40)
    backdate(db, "mid", 10)
    declined = invoke("sessions", "prune", "--newer-than", "30d", "--store", str(db), input="n\n")
    assert declined.exit_code == 1
    assert "delete old" in declined.stderr
    assert ids(store) == {"old", "mid", "new"}
    ok("sessions", "prune", "--newer-than", "30d", "--store", str(db), input="y\n")
    assert ids(store) == {"mid", "new"}
    date = (datetime.now(UTC) - timedelta(days=5)).date().isoformat()
    assert (
        "deleted 1 session: mid"
        in ok("sessions", "prune", "--newer-than", date, "--yes", "--store", str(db)).stdout
    )
    assert ids(store) == {"new"}
    assert "nothing to prune" in ok("sessions", "prune", "--keep", "5", "--store", str(db)).stdout


def test_prune_drop_log_keeps_the_view_and_drops_what_it_replaced(store: SessionStore, db: Path) -> None:
    stored(store, "old", compacted=True)
    stored(store, "new", compacted=True)
    backdate(db, "old", 40)
    view_before = Session.open(store, "old").messages
    done = document("sessions", "prune", "--keep", "1", "--drop-log", "--yes", "--json", "--store", str(db))
    assert (done["deleted"], done["trimmed"], done["log_messages_dropped"]) == ([], ["old"], 1)
    assert ids(store) == {"old", "new"}
    assert Session.open(store, "old").messages == view_before
    assert [entry.seq for entry in store.read_log("old")] == [0, 1, 3]
    assert len(store.read_log("new")) == 4
    transcript = ok("sessions", "show", "old", "--transcript", "--store", str(db)).stdout
    assert "#2: dropped by prune --drop-log" in transcript
    assert "(pruned)" in ok("sessions", "list", "--store", str(db)).stdout


def test_prune_json_needs_yes_or_dry_run(store: SessionStore, db: Path) -> None:
    stored(store, "a")
    stored(store, "b")
    result = invoke("sessions", "prune", "--keep", "1", "--json", "--store", str(db))
    assert result.exit_code == 2
    assert "pass --yes" in result.output
    assert ids(store) == {"a", "b"}


def test_prune_rejects_a_bad_date(db: Path) -> None:
    result = invoke("sessions", "prune", "--newer-than", "last tuesday", "--store", str(db))
    assert result.exit_code == 2
    assert "neither a date (2026-11-01, 2026-11-01T12:00) nor a duration (30d, 12h, 2w, 90m)" in result.output


def test_parse_when_reads_durations_and_dates() -> None:
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    assert parse_when("30d", now=now) == now - timedelta(days=30)
    assert parse_when("1d12h", now=now) == now - timedelta(hours=36)
    assert parse_when("2w", now=now) == now - timedelta(weeks=2)
    assert parse_when("90M", now=now) == now - timedelta(minutes=90)
    assert parse_when("2026-11-01T00:00+00:00") == datetime(2026, 11, 1, tzinfo=UTC)
    local = parse_when("2026-11-01")
    assert local.tzinfo is not None
    assert local.replace(tzinfo=None) == datetime(2026, 11, 1)
    with pytest.raises(ValueError, match="neither a date"):
        parse_when("soon")


def test_every_subcommand_has_help_with_examples() -> None:
    for command in ("list", "show", "search", "fork", "rm", "prune", "export", "import"):
        text = ok("sessions", command, "--help").stdout
        assert "Examples:" in text, command
        assert f"harness sessions {command}" in text.split("Examples:")[1], command
        assert "--store" in text, command
        assert "--session-dir" in text, command


def test_a_group_option_reaches_the_command(store: SessionStore, db: Path) -> None:
    stored(store, "a")
    shown = document("sessions", "--store", str(db), "--json", "show", "a")
    assert shown["session"]["session_id"] == "a"
    assert attrs.asdict(store.head("a"))["revision"] == shown["session"]["revision"]


def test_the_readme_command_line_life_cycle_uses_real_options() -> None:
    import re
    import shlex

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("\n## Sessions\n", 1)[1].split("\n## ", 1)[0]
    lines = [line[2:] for line in section.splitlines() if line.startswith("$ harness ")]
    assert len(lines) >= 8
    for line in lines:
        words = shlex.split(re.sub(r"\s+#.*$", "", line))[1:]
        result = invoke(*words, "--help")  # --help is eager: the options before it must exist
        assert result.exit_code == 0, (line, result.output)


def test_every_command_works_on_a_folder_store(tmp_path: Path) -> None:
    from harness.stores.jsonfile import JsonFileStore

    folder = tmp_path / "files"
    with JsonFileStore(folder) as files:
        stored(files, "a", compacted=True)
        stored(files, "b")
    where = ("--session-dir", str(folder))
    listed = document("sessions", "list", "--json", *where)
    assert listed["store"] == f"file://{folder}"
    paths = {row["session_id"]: Path(row["path"]) for row in listed["sessions"]}
    assert Session.load(paths["a"]).messages == Session.open(JsonFileStore(folder), "a").messages
    transcript = ok("sessions", "show", "a", "--transcript", "--dir", str(folder)).stdout
    assert "replaced by clear_tool_results at revision 2: over 100 tokens" in transcript
    hits = document("sessions", "search", "big", "--json", *where)["hits"]
    assert sorted(h["session_id"] for h in hits) == ["a", "b"]
    ok("sessions", "fork", "a", "--as", "c", *where)
    trimmed = document("sessions", "prune", "--keep", "2", "--drop-log", "--yes", "--json", *where)
    assert trimmed["trimmed"] == ["a"]
    assert trimmed["log_messages_dropped"] == 1
    ok("sessions", "rm", "c", "--yes", *where)
    assert sorted(
        row["session_id"] for row in document("sessions", "--dir", str(folder), "--json")["sessions"]
    ) == [
        "a",
        "b",
    ]
