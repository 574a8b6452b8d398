"""JsonFileStore on its own: today's files, the JSON Lines log, crash leftovers, corrupt and plain files."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from harness.core.messages import CanonicalMessage, TextPart, ToolReturnPart, UserPromptPart
from harness.errors import SessionConflictError, SessionIdError, SessionNotFoundError, SessionStoreError
from harness.session import SESSION_KEYS, LedgerEntry, Session, list_sessions
from harness.stores import open_store, store_url
from harness.stores.filelog import STATE_FORMAT
from harness.stores.jsonfile import LOCK_NAME, JsonFileStore
from harness.testing import assert_store_consistent
from harness.testing.store_kit import STAMP, new_session, sample_messages


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != LOCK_NAME}


def stored(folder: Path, *, messages: list[CanonicalMessage] | None = None) -> tuple[JsonFileStore, Session]:
    store = JsonFileStore(folder)
    session = new_session(store, messages if messages is not None else sample_messages(), thoughts=["t1"])
    session.checkpoint()
    return store, session


def read_everything(store: JsonFileStore, session_id: str) -> None:
    store.load(session_id)
    store.read_log(session_id)
    store.edits(session_id)


def stem(session: Session) -> str:
    return f"{session.project_id}_{session.session_id}"


# --------------------------------------------------------------------- the files


def test_the_snapshot_is_todays_session_file(folder: Path) -> None:
    store, session = stored(folder)
    cleared = session.messages[2].replace(
        parts=(ToolReturnPart(tool_call_id="call_a", tool_name="grep", content="[cleared]"),)
    )
    session.messages[2] = cleared
    session.note_overlays([cleared])
    session.checkpoint()
    snapshot = folder / f"{stem(session)}.json"
    doc = json.loads(snapshot.read_bytes())
    assert tuple(doc) == SESSION_KEYS
    loaded = Session.load(snapshot)
    assert loaded.messages == session.messages  # the view, placeholder included
    assert loaded.thoughts == ["t1"]
    assert (loaded.session_id, loaded.project_id, loaded.created_at) == (
        session.session_id,
        session.project_id,
        session.created_at,
    )
    listing = list_sessions(folder)
    assert listing.problems == ()
    assert [(i.session_id, i.message_count) for i in listing.sessions] == [(session.session_id, 8)]
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [LOCK_NAME, *(stem(session) + ext for ext in (".json", ".log.jsonl", ".meta.jsonl", ".state"))]
    )
    store.close()


def test_the_log_is_json_lines_only_ever_appended(folder: Path) -> None:
    store, session = stored(folder)
    log = folder / f"{stem(session)}.log.jsonl"
    first = log.read_bytes()
    lines = [json.loads(line) for line in first.splitlines()]
    assert [line["seq"] for line in lines] == list(range(8))
    assert [json.dumps(line["body"]) for line in lines] == [
        json.dumps(json.loads(e.body)) for e in store.read_log(session.session_id)
    ]
    summary = CanonicalMessage.request(UserPromptPart("summary"))
    session.messages = [summary, *session.messages[5:]]
    session.note_overlays([summary])
    session.checkpoint()
    assert log.read_bytes() == first  # a rewrite of the view writes nothing to the log
    session.messages.append(CanonicalMessage.request(UserPromptPart("next")))
    session.checkpoint()
    grown = log.read_bytes()
    assert grown.startswith(first)
    assert [json.loads(line)["seq"] for line in grown[len(first) :].splitlines()] == [8]
    store.close()


def test_files_are_private(folder: Path) -> None:
    store, _ = stored(folder)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for path in folder.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path.name
    store.close()


def test_the_file_url_opens_a_file_store(folder: Path) -> None:
    store, session = stored(folder)
    assert store.url == store_url(folder, "file")
    other = open_store(store.url)
    assert isinstance(other, JsonFileStore)
    assert other.head(session.session_id) == store.head(session.session_id)
    other.close()
    store.close()


def test_durability_full_round_trips(folder: Path) -> None:
    store = JsonFileStore(folder, durability="full")
    session = new_session(store, sample_messages())
    session.checkpoint()
    assert Session.open(JsonFileStore(folder), session.session_id).messages == sample_messages()
    store.close()


# --------------------------------------------------------------------- crash leftovers


def test_lines_past_the_committed_length_are_ignored_then_cut(folder: Path) -> None:
    store, session = stored(folder)
    sid = session.session_id
    log = folder / f"{stem(session)}.log.jsonl"
    journal = folder / f"{stem(session)}.meta.jsonl"
    committed = log.read_bytes()
    with log.open("ab") as handle:  # what a commit killed before its sidecar leaves
        handle.write(b'{"seq":8,"body":{"kind":"request","parts":[]}}\n{"seq":9,"bo')
    with journal.open("ab") as handle:
        handle.write(b'{"thought": "never committed"}\n{"tho')
    reader = JsonFileStore(folder)
    assert [e.seq for e in reader.read_log(sid)] == list(range(8))
    assert reader.load(sid).thoughts == ("t1",)
    assert_store_consistent(reader, sid)
    session.messages.append(CanonicalMessage.request(UserPromptPart("after the crash")))
    session.checkpoint()
    assert log.read_bytes().startswith(committed)
    assert [e.seq for e in reader.read_log(sid)] == list(range(9))
    assert b"never committed" not in journal.read_bytes()
    assert Session.open(reader, sid).transcript()[-1].parts[0] == UserPromptPart("after the crash")
    store.close()
    reader.close()


def test_a_snapshot_left_behind_by_a_crash_is_rewritten(folder: Path) -> None:
    store, session = stored(folder)
    snapshot = folder / f"{stem(session)}.json"
    old = snapshot.read_bytes()
    session.messages.append(CanonicalMessage.request(UserPromptPart("two")))
    session.checkpoint()
    snapshot.write_bytes(old)  # killed after the sidecar (the commit), before the snapshot
    reader = JsonFileStore(folder)
    assert reader.head(session.session_id).revision == 2
    assert len(Session.open(reader, session.session_id).messages) == 9
    session.messages.append(CanonicalMessage.response(TextPart("three")))
    session.checkpoint()
    assert Session.load(snapshot).messages == session.messages
    store.close()
    reader.close()


def test_a_creation_killed_before_its_sidecar_leaves_no_session(folder: Path) -> None:
    folder.mkdir()
    (folder / "0123456789abcdef_ghost.log.jsonl").write_bytes(
        b'{"seq":0,"body":{"kind":"request","parts":[]}}\n'
    )
    (folder / "0123456789abcdef_ghost.meta.jsonl").write_bytes(b'{"thought": "x"}\n')
    store = JsonFileStore(folder)
    assert store.list_sessions() == []
    with pytest.raises(SessionNotFoundError):
        store.load("ghost")
    session = new_session(store, sample_messages()[:2], session_id="ghost")
    assert session.checkpoint() == 1
    assert [e.seq for e in store.read_log("ghost")] == [0, 1]
    assert store.load("ghost").thoughts == ()
    store.close()


# --------------------------------------------------------------------- corrupt files


@pytest.mark.parametrize(
    ("suffix", "content", "words"),
    [
        (".state", b"{not json", "not a valid session sidecar"),
        (".state", json.dumps({"format": STATE_FORMAT + 1}).encode(), "newer than this release"),
        (".log.jsonl", b"garbage line\n" * 200, "is not a log line"),
        (".log.jsonl", b"", "fewer than the"),
        (".meta.jsonl", b'{"ledger": {"tool_call_id": 3}}\n' * 50, "is not a journal line"),
    ],
)
def test_a_corrupt_file_names_the_store_and_session_and_is_never_overwritten(
    folder: Path, suffix: str, content: bytes, words: str
) -> None:
    store, session = stored(folder)
    session.record_tool(LedgerEntry("c", "t", "started", STAMP))
    session.checkpoint()
    (folder / f"{stem(session)}{suffix}").write_bytes(content)
    before = files(folder)
    reader = JsonFileStore(folder)
    with pytest.raises(SessionStoreError) as caught:
        read_everything(reader, session.session_id)
    assert words in caught.value.reason
    assert (caught.value.store, caught.value.session_id) == (reader.url, session.session_id)
    session.messages.append(CanonicalMessage.request(UserPromptPart("more")))
    with pytest.raises(SessionStoreError):
        session.checkpoint()
    assert files(folder) == before
    store.close()
    reader.close()


def test_a_corrupt_plain_file_is_reported_and_kept(folder: Path) -> None:
    folder.mkdir()
    broken = folder / "0123456789abcdef_broken.json"
    broken.write_bytes(b'{"version": 2, "session_id": "broken", "messa')
    (folder / "notes.json").write_text("[1, 2, 3]")
    store = JsonFileStore(folder)
    assert store.list_sessions() == []
    assert {p.name for p, _ in store.problems} == {broken.name, "notes.json"}
    with pytest.raises(SessionStoreError) as caught:
        store.load("broken")
    assert caught.value.session_id == "broken"
    with pytest.raises(SessionStoreError):
        new_session(store, sample_messages(), session_id="broken").checkpoint()
    assert broken.read_bytes() == b'{"version": 2, "session_id": "broken", "messa'
    store.close()


def test_ids_that_are_not_file_names_are_refused(folder: Path) -> None:
    store = JsonFileStore(folder)
    for bad in ("../escape", "a/b", ".hidden", ""):
        with pytest.raises(SessionIdError):  # Session.create refuses it first
            new_session(store, sample_messages(), session_id=bad)
        unchecked = Session(store=store, messages=sample_messages(), session_id=bad, project_id="p")
        with pytest.raises(SessionStoreError, match="file name"):  # the store refuses it too
            unchecked.checkpoint()
        with pytest.raises(SessionNotFoundError):
            store.load(bad)
    with pytest.raises(SessionStoreError, match="file name"):
        new_session(store, sample_messages(), project_id="../up").checkpoint()
    assert list(folder.parent.glob("*.json")) == []
    assert files(folder) == {}
    store.close()


def test_a_store_path_that_is_a_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(SessionStoreError, match="not a folder"):
        JsonFileStore(path)
    assert path.read_text() == "x"


def test_a_file_name_taken_by_another_session_is_refused(folder: Path) -> None:
    store = JsonFileStore(folder)
    new_session(store, sample_messages("ab"), session_id="a_b", project_id="p").checkpoint()
    before = files(folder)
    with pytest.raises(SessionStoreError, match="another session"):
        new_session(store, sample_messages("b"), session_id="b", project_id="p_a").checkpoint()  # p_a_b.*
    assert files(folder) == before
    new_session(store, sample_messages("b"), session_id="b", project_id="x").checkpoint()
    assert {h.session_id for h in store.list_sessions()} == {"a_b", "b"}
    reader = JsonFileStore(folder)
    assert Session.open(reader, "b").messages == sample_messages("b")
    assert Session.open(reader, "a_b").messages == sample_messages("ab")
    with pytest.raises(SessionNotFoundError):
        reader.load("_b")
    store.close()
    reader.close()


# --------------------------------------------------------------------- plain session files


def plain_files(folder: Path, count: int = 2) -> list[Session]:
    sessions: list[Session] = []
    for i in range(count):
        session = Session.create(folder, project_id="0123456789abcdef", messages=sample_messages(str(i)))
        session.thoughts = [f"old thought {i}"]
        session.save()
        sessions.append(session)
    return sessions


def test_a_folder_of_plain_session_files_is_a_store(folder: Path) -> None:
    plain = plain_files(folder)
    before = files(folder)
    store = JsonFileStore(folder)
    assert {h.session_id for h in store.list_sessions()} == {s.session_id for s in plain}
    for session in plain:
        head = store.head(session.session_id)
        assert (head.revision, head.log_length, head.view_length) == (1, 8, 8)
        opened = Session.open(store, session.session_id)
        assert opened.messages == session.messages
        assert opened.transcript() == session.messages
        assert opened.thoughts == session.thoughts
        assert [h.seq for h in store.search("marmot", session_id=session.session_id)] == [4]
        assert_store_consistent(store, session.session_id, history=False)
    assert files(folder) == before  # reading wrote nothing
    store.close()


def test_the_first_commit_to_a_plain_file_adopts_it(folder: Path) -> None:
    plain = plain_files(folder, 1)[0]
    original = (folder / f"{stem(plain)}.json").read_bytes()
    store = JsonFileStore(folder)
    session = Session.open(store, plain.session_id)
    session.messages.append(CanonicalMessage.request(UserPromptPart("continued")))
    session.thoughts.append("new thought")
    assert session.checkpoint() == 2
    reader = JsonFileStore(folder)
    assert [e.seq for e in reader.read_log(plain.session_id)] == list(range(9))
    assert Session.open(reader, plain.session_id).transcript() == [*plain.messages, session.messages[-1]]
    assert reader.load(plain.session_id).thoughts == ("old thought 0", "new thought")
    assert (folder / f"{stem(plain)}.json.bak").read_bytes() == original
    assert Session.load(folder / f"{stem(plain)}.json").messages == session.messages
    stale = Session.open(JsonFileStore(folder), plain.session_id)
    assert stale.revision == 2
    store.close()
    reader.close()


def test_a_stale_handle_on_a_plain_file_conflicts(folder: Path) -> None:
    plain = plain_files(folder, 1)[0]
    first = Session.open(JsonFileStore(folder), plain.session_id)
    second = Session.open(JsonFileStore(folder), plain.session_id)
    first.messages.append(CanonicalMessage.request(UserPromptPart("one")))
    first.checkpoint()
    second.messages.append(CanonicalMessage.request(UserPromptPart("two")))
    with pytest.raises(SessionConflictError):
        second.checkpoint()


def test_fork_delete_and_prune_of_plain_files(folder: Path) -> None:
    old, new = plain_files(folder)
    store = JsonFileStore(folder)
    forked = store.fork(old.session_id, "forked")
    assert (forked.forked_from, forked.revision) == (old.session_id, 1)
    assert Session.open(store, "forked").messages == old.messages
    assert store.prune(keep_last=2, drop_log=True).log_messages_dropped == 0
    assert store.delete(new.session_id)
    assert not (folder / f"{stem(new)}.json").exists()
    assert {h.session_id for h in store.list_sessions()} == {old.session_id, "forked"}
    store.close()


def test_prune_drop_log_switches_to_a_new_log_file(folder: Path) -> None:
    store, session = stored(folder)
    summary = CanonicalMessage.request(UserPromptPart("summary"))
    session.messages = [summary, *session.messages[6:]]
    session.note_overlays([summary])
    session.checkpoint()
    result = store.prune(keep_last=0, drop_log=True)
    assert result.log_messages_dropped == 6
    logs = sorted(p.name for p in folder.glob(f"{stem(session)}.log*.jsonl"))
    assert len(logs) == 1
    assert logs[0] != f"{stem(session)}.log.jsonl"
    assert [json.loads(line)["seq"] for line in (folder / logs[0]).read_bytes().splitlines()] == [6, 7]
    assert store.delete(session.session_id)
    assert files(folder) == {}
    store.close()


def test_search_is_a_scan_with_prefixes(folder: Path) -> None:
    store, session = stored(folder)
    assert [h.seq for h in store.search("quok*")] == [2]
    assert [h.seq for h in store.search("quok")] == []
    assert [h.seq for h in store.search("zebra grep")] == [1]  # every word, in one message
    assert store.search("*") == []
    assert store.search("zebra", session_id="other") == []
    assert session.session_id in {h.session_id for h in store.search("ZEBRA")}
    store.close()


def test_the_cache_holds_a_few_sessions_however_many_were_touched(folder: Path) -> None:
    """200 sessions written and read through one handle leave at most CACHED_SESSIONS in memory."""
    from harness.stores.jsonfile import CACHED_SESSIONS

    store = JsonFileStore(folder)
    for index in range(200):
        session = new_session(store, sample_messages()[:2], session_id=f"s{index}")
        session.checkpoint()
        assert Session.open(store, f"s{index}").messages == session.messages
        assert len(store.cached_session_ids) <= CACHED_SESSIONS
    assert store.cached_session_ids == tuple(f"s{i}" for i in range(200 - CACHED_SESSIONS, 200))
    assert len(store.search("zebra", limit=1000)) == 400  # a scan of all 200 keeps the bound too
    assert len(store.cached_session_ids) <= CACHED_SESSIONS
    Session.open(store, "s0").messages.append(CanonicalMessage.request(UserPromptPart(content="again")))
    reopened = Session.open(store, "s0")  # evicted long ago: read again from the files, then cached
    assert len(reopened.messages) == 2
    assert store.cached_session_ids[-1] == "s0"
    store.close()
