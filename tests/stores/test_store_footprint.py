"""What keeps a stored session near its raw transcript's size: tool results stored once, bodies compressed.

* A finished call's answer stays in the ledger only until the checkpoint that logs it
  (then the log holds it), in the store and in memory alike; a call whose answer is not
  logged yet keeps it, so a resumed run can reuse it.
* A cleared tool result's overlay names the result it replaced as its source, not the
  call (``recall`` fetches the source).
* SQLite stores large bodies zlib-compressed: they read back, fork, search and prune as
  before, and a corrupt one is reported naming the store and the session.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness.core.messages import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart
from harness.errors import SessionStoreError
from harness.session import LedgerEntry, Session
from harness.session.tracking import encode_part
from harness.stores.sqlite import SqliteStore

STAMP = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
BIG = "def handler(event):\n    return process(event)\n" * 200  # ~9 KB, compresses well


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    opened = SqliteStore(tmp_path / "sessions.db")
    yield opened
    opened.close()


def _session(store: SqliteStore) -> Session:
    session = Session.create(store=store, project_id="p" * 16, working_directory="/w")
    session.messages = [
        CanonicalMessage.user("read the handler"),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="c1", tool_name="read", args={"path": "handler.py"})
        ),
    ]
    session.checkpoint()
    return session


def _finish(session: Session, call_id: str = "c1", content: str = BIG) -> ToolReturnPart:
    answer = ToolReturnPart(tool_call_id=call_id, tool_name="read", content=content, timestamp=STAMP)
    session.record_tool(LedgerEntry(call_id, "read", "completed", STAMP, STAMP, encode_part(answer)))
    return answer


def test_a_finished_call_keeps_its_answer_until_the_answer_is_logged(store: SqliteStore) -> None:
    session = _session(store)
    answer = _finish(session)
    session.checkpoint()
    assert store.load(session.session_id).ledger[0].result == encode_part(answer)  # resumable

    session.messages.append(CanonicalMessage.request(answer))
    session.checkpoint()
    stored = store.load(session.session_id).ledger[0]
    assert (stored.status, stored.result) == ("completed", None)
    assert session.ledger["c1"] == stored
    assert Session.open(store, session.session_id).ledger == session.ledger
    logged = session.transcript()[-1].parts[0]
    assert isinstance(logged, ToolReturnPart)
    assert logged.content == BIG


def test_an_answer_logged_with_its_ledger_entry_is_stored_once(store: SqliteStore) -> None:
    session = _session(store)
    answer = _finish(session)
    session.messages.append(CanonicalMessage.request(answer))
    session.checkpoint()
    assert store.load(session.session_id).ledger[0].result is None
    session.messages.append(CanonicalMessage.response(TextPart("done")))
    session.checkpoint()  # nothing queued any more: the entry is not written again
    assert store.load(session.session_id).ledger[0].result is None


def test_only_the_answered_calls_lose_their_result(store: SqliteStore) -> None:
    session = Session.create(store=store, project_id="p" * 16, working_directory="/w")
    session.messages = [
        CanonicalMessage.user("two reads"),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="c1", tool_name="read", args={}),
            ToolCallPart(tool_call_id="c2", tool_name="read", args={}),
        ),
    ]
    first = _finish(session, "c1", "one")
    _finish(session, "c2", "two")
    session.record_tool(LedgerEntry("c3", "read", "started", STAMP))
    session.checkpoint()
    # A request answering only c1 (a partial answer, as a test can write it).
    session.messages.append(CanonicalMessage.request(first))
    session.checkpoint()
    results = {e.tool_call_id: e.result for e in store.load(session.session_id).ledger}
    assert results["c1"] is None
    assert results["c2"] is not None
    assert results["c3"] is None


def test_a_cleared_results_overlay_names_the_result_as_its_source(store: SqliteStore) -> None:
    session = _session(store)
    first = _finish(session, "c1", "one")
    second = ToolReturnPart(tool_call_id="c2", tool_name="read", content="two", timestamp=STAMP)
    session.messages += [
        CanonicalMessage.request(first),
        CanonicalMessage.response(ToolCallPart(tool_call_id="c2", tool_name="read", args={"path": "b"})),
        CanonicalMessage.request(second),
        CanonicalMessage.response(TextPart("read both")),
    ]
    session.checkpoint()
    # Both results cleared at once: the rewrite starts at the first, so the second's call
    # (log message 3) is inside the rewritten range too; the source is still the result (4).
    cleared = [
        session.messages[i].replace(
            parts=(ToolReturnPart(tool_call_id=c, tool_name="read", content="[cleared]", timestamp=STAMP),)
        )
        for i, c in ((2, "c1"), (4, "c2"))
    ]
    session.messages[2], session.messages[4] = cleared
    session.note_overlays(cleared, [{"strategy": "clear_tool_results"}])
    session.checkpoint()
    assert [session.log_seq_of(m) for m in cleared] == [2, 4]
    assert store.edits(session.session_id)[0].overlays == ((2, 2), (4, 4))
    reopened = Session.open(store, session.session_id)
    assert reopened.log_seq_of(reopened.messages[4]) == 4


def test_large_bodies_are_compressed_and_read_back_search_and_fork(store: SqliteStore) -> None:
    session = _session(store)
    answer = _finish(session)
    session.messages.append(CanonicalMessage.request(answer))
    session.checkpoint()
    assert store.path is not None
    raw = sqlite3.connect(store.path)
    try:
        kinds = dict(
            raw.execute("SELECT seq, typeof(body) FROM log WHERE session_id = ?", (session.session_id,))
        )
        stored = raw.execute("SELECT length(body) FROM log WHERE seq = 2").fetchone()[0]
    finally:
        raw.close()
    assert kinds == {0: "text", 1: "text", 2: "blob"}  # small bodies stay text
    assert stored < len(BIG) // 5
    reopened = Session.open(store, session.session_id)
    assert reopened.messages == session.messages
    assert store.read_log(session.session_id)[2].body.startswith("{")
    hits = store.search("handler process", session_id=session.session_id)
    assert [h.seq for h in hits] == [2]
    fork = session.fork("the-fork")
    assert fork.transcript() == session.transcript()
    assert [h.seq for h in store.search("process", session_id="the-fork")] == [2]


def test_pruning_a_compressed_body_takes_its_words_out_of_the_index(store: SqliteStore) -> None:
    session = _session(store)
    answer = _finish(session)
    session.messages += [CanonicalMessage.request(answer), CanonicalMessage.response(TextPart("read it"))]
    session.checkpoint()
    cleared = session.messages[2].replace(
        parts=(ToolReturnPart(tool_call_id="c1", tool_name="read", content="[cleared]", timestamp=STAMP),)
    )
    session.messages[2] = cleared
    session.note_overlays([cleared])
    session.checkpoint()
    result = store.prune(keep_last=0, drop_log=True)
    assert result.log_messages_dropped == 1
    assert store.path is not None
    raw = sqlite3.connect(store.path)
    try:
        indexed = raw.execute("SELECT count(*) FROM log_text WHERE log_text MATCH 'process'").fetchone()[0]
    finally:
        raw.close()
    assert indexed == 0
    assert Session.open(store, session.session_id).messages == session.messages


def test_a_corrupt_compressed_body_is_reported_naming_store_and_session(store: SqliteStore) -> None:
    session = _session(store)
    session.messages.append(CanonicalMessage.request(_finish(session)))
    session.checkpoint()
    assert store.path is not None
    raw = sqlite3.connect(store.path)
    try:
        raw.execute("UPDATE log SET body = ? WHERE seq = 2", (b"\x00z" + b"not zlib at all",))
        raw.commit()
    finally:
        raw.close()
    with pytest.raises(SessionStoreError) as caught:
        Session.open(store, session.session_id)
    assert caught.value.session_id == session.session_id
    assert caught.value.store == store.url
    with pytest.raises(SessionStoreError):
        store.read_log(session.session_id)
