"""The conformance cases about records: the round trip, append-only logs, revisions, imports."""

from __future__ import annotations

__all__ = ["RecordCases"]

from datetime import timedelta

import attrs
import pytest

from harness.core.messages import CanonicalMessage, TextPart, ToolReturnPart, Usage, UserPromptPart
from harness.errors import SessionConflictError, SessionNotFoundError, SessionStoreError
from harness.session import Checkpoint, EditRecord, LedgerEntry, LogEntry, Session, SessionHead, ViewEntry
from harness.testing.store_kit import (
    PROJECT,
    STAMP,
    ConformanceBase,
    StoreFactory,
    new_session,
    sample_messages,
    store_state,
)
from harness.testing.store_workers import assert_store_consistent


class RecordCases(ConformanceBase):
    """The conformance cases about records: the round trip, append-only logs, revisions, imports."""

    # ------------------------------------------------------------------ round trip

    def test_round_trip_keeps_everything(self, make_store: StoreFactory) -> None:
        """Every part kind, usage, thoughts, ledger, metadata and the original query reload as written."""
        store = make_store()
        session = new_session(
            store,
            sample_messages(),
            current_model="model-1",
            total_tokens=1234,
            usage=Usage(
                request_tokens=10,
                response_tokens=3,
                cached_tokens=4,
                cache_write_tokens=1,
                extra={"cost": 0.5},
            ),
            thoughts=["first thought", "second \U0001f4ad"],
            original_query="find the zebra",
            metadata={"plugin": {"nested": [1, "two", None]}},
        )
        session.record_tool(LedgerEntry("call_a", "grep", "completed", STAMP, STAMP, result='{"r":1}'))
        session.record_tool(LedgerEntry("call_b", "read", "failed", STAMP, STAMP, error="no such file"))
        assert session.checkpoint() == 1
        other = make_store(same=True)
        loaded = Session.open(other, session.session_id)
        assert loaded.messages == sample_messages()
        assert loaded.transcript() == sample_messages()
        assert loaded.revision == 1
        for name in ("session_id", "project_id", "created_at", "last_modified", "working_directory"):
            assert getattr(loaded, name) == getattr(session, name), name
        for name in (
            "current_model",
            "total_tokens",
            "usage",
            "thoughts",
            "original_query",
            "metadata",
            "ledger",
        ):
            assert getattr(loaded, name) == getattr(session, name), name
        assert list(loaded.ledger) == ["call_a", "call_b"]
        head = other.head(session.session_id)
        assert head == session.head_record()
        assert (head.log_length, head.view_length, head.revision) == (8, 8, 1)
        assert [e.seq for e in other.read_log(session.session_id)] == list(range(8))
        assert other.edits(session.session_id) == []

    def test_missing_session_is_not_found(self, make_store: StoreFactory) -> None:
        """Reading, forking or deleting an unknown id: SessionNotFoundError (a KeyError), or False."""
        store = make_store()
        new_session(store, sample_messages()).checkpoint()
        for call in (store.load, store.head, store.read_log, store.edits):
            with pytest.raises(SessionNotFoundError) as caught:
                call("no-such-session")
            assert caught.value.session_id == "no-such-session"
        with pytest.raises(KeyError):
            store.load("no-such-session")
        with pytest.raises(SessionNotFoundError):
            store.fork("no-such-session", "copy")
        assert store.delete("no-such-session") is False

    def test_revision_counts_commits_and_an_unchanged_session_writes_nothing(
        self, make_store: StoreFactory
    ) -> None:
        """Each checkpoint adds one revision; one with nothing new writes nothing."""
        store = make_store()
        session = new_session(store, sample_messages()[:2])
        revisions = [session.checkpoint()]
        for message in sample_messages()[2:5]:
            session.messages.append(message)
            revisions.append(session.checkpoint())
        assert revisions == [1, 2, 3, 4]
        before = store_state(store, [session.session_id])
        assert session.checkpoint() == 4
        assert store_state(store, [session.session_id]) == before
        session.thoughts.append("a thought")
        assert session.checkpoint() == 5
        assert Session.open(store, session.session_id).thoughts == ["a thought"]

    def test_ledger_entries_update_in_place_in_start_order(self, make_store: StoreFactory) -> None:
        """A ledger entry is updated by its call id and keeps the order calls started in."""
        store = make_store()
        session = new_session(store, sample_messages()[:2])
        session.record_tool(LedgerEntry("call_a", "grep", "started", STAMP))
        session.record_tool(LedgerEntry("call_z", "bash", "started", STAMP))
        session.checkpoint()
        later = STAMP + timedelta(seconds=3)
        session.record_tool(LedgerEntry("call_a", "grep", "completed", STAMP, later, result='{"ok":1}'))
        session.record_tool(
            LedgerEntry("call_z", "bash", "unknown_after_crash", STAMP, error="process stopped")
        )
        session.checkpoint()
        ledger = store.load(session.session_id).ledger
        assert [(e.tool_call_id, e.status) for e in ledger] == [
            ("call_a", "completed"),
            ("call_z", "unknown_after_crash"),
        ]
        assert ledger[0] == LedgerEntry("call_a", "grep", "completed", STAMP, later, result='{"ok":1}')

    def test_lone_surrogates_in_text_round_trip(self, make_store: StoreFactory) -> None:
        """Text with lone surrogates (a non-UTF-8 folder name, via os.fsdecode) is kept exactly."""
        store = make_store()
        odd = "caf\udce9 \udcff"
        session = new_session(
            store,
            [
                CanonicalMessage.request(UserPromptPart(f"prompt {odd}")),
                CanonicalMessage.response(TextPart(odd)),
            ],
            working_directory=f"/work/{odd}",
            current_model=f"model {odd}",
            thoughts=[f"thought {odd}"],
            original_query=f"query {odd}",
            metadata={"path": odd, odd: [odd]},
            usage=Usage(request_tokens=1, extra={"note": odd}),
        )
        session.record_tool(LedgerEntry("call_s", f"tool {odd}", "failed", STAMP, STAMP, error=f"no {odd}"))
        session.checkpoint()
        loaded = Session.open(make_store(same=True), session.session_id)
        for name in ("working_directory", "current_model", "thoughts", "original_query", "metadata", "usage"):
            assert getattr(loaded, name) == getattr(session, name), name
        assert loaded.ledger == session.ledger
        assert loaded.messages == session.messages
        assert loaded.transcript() == session.messages

    def test_a_closed_store_refuses_work(self, make_store: StoreFactory) -> None:
        """After close(), every call raises SessionStoreError (closing twice is fine)."""
        store = make_store()
        session = new_session(store, sample_messages()[:2])
        session.checkpoint()
        store.close()
        store.close()
        with pytest.raises(SessionStoreError):
            store.load(session.session_id)
        session.messages.append(sample_messages()[2])
        with pytest.raises(SessionStoreError):
            session.checkpoint()
        assert make_store(same=True).head(session.session_id).revision == 1

    def test_writing_to_a_deleted_session_conflicts(self, make_store: StoreFactory) -> None:
        """A handle whose session was deleted meanwhile gets SessionConflictError; nothing is written."""
        store = make_store()
        session = new_session(store, sample_messages()[:2])
        session.checkpoint()
        assert make_store(same=True).delete(session.session_id)
        session.messages.append(sample_messages()[2])
        with pytest.raises(SessionConflictError) as caught:
            session.checkpoint()
        assert (caught.value.expected, caught.value.actual) == (1, None)
        assert store.list_sessions() == []

    # ------------------------------------------------------------------ append-only

    def test_appends_only_add_to_the_log(self, make_store: StoreFactory) -> None:
        """An append adds log entries after the old ones, which stay byte for byte."""
        store = make_store()
        session = new_session(store, sample_messages()[:4])
        session.checkpoint()
        first = store.read_log(session.session_id)
        session.messages.extend(sample_messages()[4:])
        session.checkpoint()
        log = store.read_log(session.session_id)
        assert [e.seq for e in log] == list(range(8))
        assert log[:4] == first
        assert store.read_log(session.session_id, 2, 5) == log[2:5]
        assert store.read_log(session.session_id, 6) == log[6:]
        assert store.edits(session.session_id) == []

    def test_rewrites_are_edits_over_an_untouched_log(self, make_store: StoreFactory) -> None:
        """Overlay rewrites change the view and record edits; the log keeps every original."""
        store = make_store()
        session = new_session(store, sample_messages())
        session.checkpoint()
        original_log = store.read_log(session.session_id)
        view = session.messages
        cleared = view[2].replace(
            parts=(ToolReturnPart(tool_call_id="call_a", tool_name="grep", content="[cleared]"),)
        )
        session.messages = [*view[:2], cleared, *view[3:]]
        session.note_overlays([cleared], [{"strategy": "clear_tool_results", "tokens_saved": 12}])
        assert session.checkpoint() == 2
        assert session.log_seq_of(cleared) == 2
        summary = CanonicalMessage.request(UserPromptPart("summary of the first four messages"))
        session.messages = [summary, *session.messages[4:]]
        session.note_overlays([summary], [{"strategy": "summarizing"}])
        assert session.checkpoint() == 3
        other = make_store(same=True)
        reopened = Session.open(other, session.session_id)
        assert reopened.messages == session.messages
        assert reopened.transcript() == sample_messages()
        assert other.read_log(session.session_id) == original_log
        edits = other.edits(session.session_id)
        assert [(e.index, e.revision) for e in edits] == [(0, 2), (1, 3)]
        assert (edits[0].view_start, edits[0].replaced, edits[0].overlays) == (2, (2,), ((2, 2),))
        assert edits[0].events == ({"strategy": "clear_tool_results", "tokens_saved": 12},)
        assert edits[1].view_start == 0
        assert set(edits[1].replaced) == {0, 1, 3}
        assert edits[1].overlays[0][0] == 0
        view_entries = [entry for entry, _ in other.load(session.session_id).view]
        assert view_entries[0].seq is None
        assert [e.seq for e in view_entries[1:]] == [4, 5, 6, 7]
        head = other.head(session.session_id)
        assert (head.log_length, head.view_length, head.revision) == (8, 5, 3)
        assert_store_consistent(other, session.session_id, history=False)

    def test_raw_history_after_a_rewrite_is_appended_once(self, make_store: StoreFactory) -> None:
        """New raw messages in a rewritten view go to the log once; dropped ones are recorded."""
        store = make_store()
        session = new_session(store, sample_messages()[:4])
        session.checkpoint()
        merged = CanonicalMessage.request(UserPromptPart("merged prompt"))
        session.messages = [*session.messages[:2], merged]  # drops 2 and 3, adds raw history
        session.checkpoint()
        session.messages.append(CanonicalMessage.response(TextPart("after")))
        session.checkpoint()
        transcript = Session.open(make_store(same=True), session.session_id).transcript()
        assert transcript == [*sample_messages()[:4], merged, CanonicalMessage.response(TextPart("after"))]
        edit = store.edits(session.session_id)[0]
        assert (edit.view_start, edit.replaced, edit.events) == (2, (2, 3), ())

    # ------------------------------------------------------------------ revisions

    def test_a_stale_handle_conflicts_and_writes_nothing(self, make_store: StoreFactory) -> None:
        """A write based on an old revision raises SessionConflictError and changes nothing."""
        store = make_store()
        session = new_session(store, sample_messages()[:2])
        session.checkpoint()
        sid = session.session_id
        other = make_store(same=True)
        stale = Session.open(other, sid)
        session.messages.extend(sample_messages()[2:4])
        session.checkpoint()
        stale.messages.extend(sample_messages()[4:])
        stale.thoughts.append("lost?")
        stale.record_tool(LedgerEntry("call_x", "bash", "started", STAMP))
        cleared = stale.messages[0].replace(parts=(UserPromptPart("[cleared]"),))
        stale.messages[0] = cleared
        stale.note_overlays([cleared], [{"strategy": "x"}])
        before = store_state(store, [sid])
        with pytest.raises(SessionConflictError) as caught:
            stale.checkpoint()
        assert (caught.value.expected, caught.value.actual, caught.value.session_id) == (1, 2, sid)
        assert store_state(store, [sid]) == before
        assert store_state(other, [sid]) == before
        fresh = Session.open(other, sid)
        fresh.messages.append(CanonicalMessage.response(TextPart("retry works")))
        assert fresh.checkpoint() == 3

    def test_creating_an_existing_session_conflicts(self, make_store: StoreFactory) -> None:
        """Creating a session whose id exists raises SessionConflictError and changes nothing.

        ``Session.create`` refuses it at once; a session built without that check (a writer
        that took the id after it was checked) is refused by its first checkpoint.
        """
        store = make_store()
        first = new_session(store, sample_messages())
        first.checkpoint()
        before = store_state(store, [first.session_id])
        with pytest.raises(SessionConflictError) as refused:
            new_session(make_store(same=True), sample_messages()[:2], session_id=first.session_id)
        assert refused.value.expected == 0
        second = Session(
            store=make_store(same=True),
            messages=sample_messages()[:2],
            session_id=first.session_id,
            project_id=PROJECT,
            working_directory="/work/conformance",
        )
        with pytest.raises(SessionConflictError) as caught:
            second.checkpoint()
        assert caught.value.expected == 0
        assert store_state(store, [first.session_id]) == before

    def test_a_raw_stale_checkpoint_writes_nothing(self, make_store: StoreFactory) -> None:
        """A Checkpoint whose base revision is not the stored one writes none of its parts."""
        store = make_store()
        session = new_session(store, sample_messages()[:2])
        session.checkpoint()
        session.messages.append(sample_messages()[2])
        session.checkpoint()
        head = store.head(session.session_id)
        before = store_state(store, [session.session_id])
        for base in (1, 3, 7):
            stale = Checkpoint(
                head=attrs.evolve(head, revision=base + 1, log_length=head.log_length + 1),
                base_revision=base,
                appended=(LogEntry(head.log_length, '{"kind":"response","parts":[]}'),),
                view_start=head.view_length,
                view_tail=(ViewEntry(head.log_length),),
                thoughts=("nope",),
                ledger=(LedgerEntry("c", "t", "started", STAMP),),
            )
            with pytest.raises(SessionConflictError):
                store.commit(stale)
        assert store_state(store, [session.session_id]) == before

    def test_a_malformed_checkpoint_is_refused_and_writes_nothing(self, make_store: StoreFactory) -> None:
        """A checkpoint that breaks the Checkpoint rules is refused before anything is written."""
        store = make_store()
        session = new_session(store, sample_messages()[:2])
        session.checkpoint()
        head = store.head(session.session_id)
        before = store_state(store, [session.session_id])
        body = '{"kind":"response","parts":[]}'
        bad = [
            Checkpoint(head=attrs.evolve(head, revision=5), base_revision=1),  # revision must be base + 1
            Checkpoint(  # a seq that rewrites the log
                head=attrs.evolve(head, revision=2, log_length=3),
                base_revision=1,
                appended=(LogEntry(1, body),),
                view_start=2,
            ),
        ]
        for checkpoint in bad:
            with pytest.raises((ValueError, SessionStoreError)):
                store.commit(checkpoint)
        assert store_state(store, [session.session_id]) == before

    def test_an_import_keeps_its_revision_and_log_gaps(self, make_store: StoreFactory) -> None:
        """Creating with a revision above 1 and a gapped log (an import) keeps both."""
        store = make_store()
        bodies = {
            seq: f'{{"kind":"request","parts":[{{"part_kind":"user-prompt","content":"m{seq}"}}]}}'
            for seq in (0, 3, 4)
        }
        head = SessionHead(
            "imported", PROJECT, STAMP, STAMP, "/w", revision=9, log_length=6, view_length=2, log_pruned=True
        )
        edit = EditRecord(0, 4, STAMP, 0, replaced=(1, 2, 5), overlays=((0, 1),), events=({"strategy": "s"},))
        overlay = '{"kind":"request","parts":[{"part_kind":"user-prompt","content":"summary"}]}'
        store.commit(
            Checkpoint(
                head=head,
                base_revision=0,
                appended=tuple(LogEntry(seq, body) for seq, body in bodies.items()),
                view_tail=(ViewEntry(None, overlay, 1), ViewEntry(4)),
                thoughts=("t1",),
                ledger=(LedgerEntry("c1", "tool", "completed", STAMP, STAMP, result="{}"),),
                edits=(edit,),
            )
        )
        other = make_store(same=True)
        assert other.head("imported") == head
        assert [(e.seq, e.body) for e in other.read_log("imported")] == list(bodies.items())
        assert other.edits("imported") == [edit]
        stored = other.load("imported")
        assert stored.view == ((ViewEntry(None, overlay, 1), overlay), (ViewEntry(4), bodies[4]))
        assert (stored.thoughts, stored.ledger[0].tool_call_id) == (("t1",), "c1")
        session = Session.open(other, "imported")
        session.messages.append(CanonicalMessage.response(TextPart("next")))
        assert session.checkpoint() == 10
        assert [e.seq for e in other.read_log("imported")] == [0, 3, 4, 6]
