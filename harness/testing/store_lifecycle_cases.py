"""The conformance cases about a session's life: fork, delete, list, prune, search."""

from __future__ import annotations

__all__ = ["LifecycleCases"]

import time

import pytest

from harness.core.messages import CanonicalMessage, ToolReturnPart, UserPromptPart
from harness.errors import SessionConflictError, SessionNotFoundError
from harness.session import LedgerEntry, Session, SessionStore
from harness.testing.store_kit import (
    STAMP,
    ConformanceBase,
    StoreFactory,
    new_session,
    sample_messages,
    store_state,
)
from harness.testing.store_workers import assert_store_consistent


class LifecycleCases(ConformanceBase):
    """The conformance cases about a session's life: fork, delete, list, prune, search."""

    # ------------------------------------------------------------------ fork, delete, list

    def test_fork_copies_everything_and_is_independent(self, make_store: StoreFactory) -> None:
        """A fork copies view, log, edits, thoughts and ledger; the two then diverge freely."""
        store = make_store()
        parent = new_session(store, sample_messages(), thoughts=["t"], metadata={"m": 1})
        parent.record_tool(LedgerEntry("call_a", "grep", "completed", STAMP, STAMP, result="{}"))
        parent.checkpoint()
        cleared = parent.messages[2].replace(
            parts=(ToolReturnPart(tool_call_id="call_a", tool_name="grep", content="[cleared]"),)
        )
        parent.messages[2] = cleared
        parent.note_overlays([cleared], [{"strategy": "c"}])
        parent.checkpoint()
        head = store.fork(parent.session_id, "the-fork")
        assert (head.session_id, head.forked_from, head.forked_at, head.revision) == (
            "the-fork",
            parent.session_id,
            8,
            1,
        )
        child = Session.open(make_store(same=True), "the-fork")
        assert child.messages == parent.messages
        assert child.transcript() == parent.transcript()
        assert (child.thoughts, child.metadata, child.ledger) == (
            parent.thoughts,
            parent.metadata,
            parent.ledger,
        )
        assert child.forked_from == parent.session_id
        assert store.edits("the-fork") == store.edits(parent.session_id)
        child.messages.append(CanonicalMessage.request(UserPromptPart("only in the fork")))
        child.checkpoint()
        parent.messages.append(CanonicalMessage.request(UserPromptPart("only in the parent")))
        parent.checkpoint()
        assert Session.open(store, parent.session_id).messages[-1].parts[0] == UserPromptPart(
            "only in the parent"
        )
        assert Session.open(store, "the-fork").messages[-1].parts[0] == UserPromptPart("only in the fork")
        assert len(store.read_log("the-fork")) == len(store.read_log(parent.session_id)) == 9
        before = store_state(store, [parent.session_id, "the-fork"])
        with pytest.raises(SessionConflictError):
            store.fork(parent.session_id, "the-fork")
        assert store_state(store, [parent.session_id, "the-fork"]) == before

    def test_session_fork_opens_the_copy(self, make_store: StoreFactory) -> None:
        """Session.fork forks in the store and opens the copy."""
        store = make_store()
        parent = new_session(store, sample_messages())
        parent.checkpoint()
        child = parent.fork()
        assert child.session_id != parent.session_id
        assert (child.messages, child.revision, child.forked_from) == (parent.messages, 1, parent.session_id)

    def test_delete_removes_one_session_only(self, make_store: StoreFactory) -> None:
        """Delete removes a session, its log and its search entries, and nothing else."""
        store = make_store()
        keep = new_session(store, sample_messages("keep"))
        gone = new_session(store, sample_messages("gone"))
        keep.checkpoint()
        gone.checkpoint()
        kept_before = store_state(store, [keep.session_id], listing=False)
        assert store.delete(gone.session_id) is True
        assert store.delete(gone.session_id) is False
        other = make_store(same=True)
        with pytest.raises(SessionNotFoundError):
            other.load(gone.session_id)
        assert [h.session_id for h in other.list_sessions()] == [keep.session_id]
        assert other.search("gone") == []
        assert store_state(other, [keep.session_id], listing=False) == kept_before
        again = new_session(other, sample_messages()[:2], session_id=gone.session_id)
        assert again.checkpoint() == 1  # the id is free again
        assert other.read_log(gone.session_id)[0].seq == 0
        assert len(other.read_log(gone.session_id)) == 2

    def test_list_is_most_recently_modified_first(self, make_store: StoreFactory) -> None:
        """list_sessions is ordered by last modification, newest first."""
        store = make_store()
        assert store.list_sessions() == []
        sessions = [new_session(store, sample_messages(str(i))) for i in range(3)]
        for session in sessions:
            session.checkpoint()
            time.sleep(0.002)
        sessions[0].messages.append(CanonicalMessage.request(UserPromptPart("touch")))
        sessions[0].checkpoint()
        heads = make_store(same=True).list_sessions()
        assert [h.session_id for h in heads] == [sessions[i].session_id for i in (0, 2, 1)]
        assert heads[0] == store.head(sessions[0].session_id)

    # ------------------------------------------------------------------ prune

    def _three(self, store: SessionStore) -> list[Session]:
        sessions = [new_session(store, sample_messages(str(i))) for i in range(3)]
        for session in sessions:
            session.checkpoint()
            time.sleep(0.002)
        return sessions

    def test_prune_keep_last_and_newer_than(self, make_store: StoreFactory) -> None:
        """Prune keeps the newest N and those modified after a date, and deletes the rest."""
        store = make_store()
        old, middle, new = (s.session_id for s in self._three(store))
        assert store.prune().deleted == ()
        result = store.prune(keep_last=2)
        assert (result.deleted, result.trimmed, result.dry_run) == ((old,), (), False)
        assert {h.session_id for h in store.list_sessions()} == {middle, new}
        result = store.prune(newer_than=store.head(middle).last_modified)
        assert result.deleted == (middle,)
        assert [h.session_id for h in make_store(same=True).list_sessions()] == [new]
        with pytest.raises(ValueError, match="keep_last"):
            store.prune(keep_last=-1)

    def test_prune_dry_run_changes_nothing(self, make_store: StoreFactory) -> None:
        """prune(dry_run=True) reports what it would do and changes nothing."""
        store = make_store()
        ids = [s.session_id for s in self._three(store)]
        before = store_state(store, ids)
        for drop_log in (False, True):
            result = store.prune(keep_last=1, drop_log=drop_log, dry_run=True)
            assert result.dry_run is True
            assert set(result.trimmed if drop_log else result.deleted) == set(ids[:2])
            assert store_state(store, ids) == before

    def test_prune_drop_log_keeps_the_view_loadable(self, make_store: StoreFactory) -> None:
        """prune(drop_log=True) keeps the view and the messages it shows; numbering goes on."""
        store = make_store()
        session = new_session(store, sample_messages())
        session.checkpoint()
        summary = CanonicalMessage.request(UserPromptPart("summary"))
        session.messages = [summary, *session.messages[5:]]
        session.note_overlays([summary])
        session.checkpoint()
        recent = new_session(store, sample_messages("recent"))
        recent.checkpoint()
        recent_before = store_state(store, [recent.session_id], listing=False)
        view_before = Session.open(store, session.session_id).messages
        result = store.prune(keep_last=1, drop_log=True)
        assert (result.deleted, result.trimmed, result.log_messages_dropped) == ((), (session.session_id,), 5)
        other = make_store(same=True)
        head = other.head(session.session_id)
        assert head.log_pruned is True
        assert head.log_length == 8  # numbering never restarts
        assert [e.seq for e in other.read_log(session.session_id)] == [5, 6, 7]
        reopened = Session.open(other, session.session_id)
        assert reopened.messages == view_before
        assert_store_consistent(other, session.session_id, history=False)
        assert store_state(other, [recent.session_id], listing=False) == recent_before
        reopened.messages.append(CanonicalMessage.request(UserPromptPart("after the prune")))
        reopened.checkpoint()
        assert [e.seq for e in other.read_log(session.session_id)] == [5, 6, 7, 8]

    # ------------------------------------------------------------------ search

    def test_search_finds_prompts_and_tool_results_in_the_raw_log(self, make_store: StoreFactory) -> None:
        """Search finds words of prompts and tool results in the raw log, per session or all."""
        store = make_store()
        first = new_session(store, sample_messages("alpha"))
        second = new_session(store, sample_messages("beta"))
        first.checkpoint()
        second.checkpoint()
        cleared = first.messages[2].replace(
            parts=(ToolReturnPart(tool_call_id="call_a", tool_name="grep", content="[cleared]"),)
        )
        first.messages[2] = cleared
        first.note_overlays([cleared])
        first.checkpoint()
        reader = make_store(same=True)
        hits = reader.search("quokka", session_id=first.session_id)  # only in the log now, not the view
        assert [(h.session_id, h.seq) for h in hits] == [(first.session_id, 2)]
        assert "quokka" in hits[0].snippet
        assert {(h.session_id, h.seq) for h in reader.search("zebra")} >= {
            (first.session_id, 0),
            (second.session_id, 0),
        }
        assert [h.seq for h in reader.search("ZEBRA", session_id=second.session_id) if h.seq == 0] == [0]
        assert all(
            h.session_id == second.session_id for h in reader.search("zebra", session_id=second.session_id)
        )
        assert [h.seq for h in reader.search("marmot", session_id=second.session_id)] == [4]
        assert [h.session_id for h in reader.search("alpha")] == [first.session_id]
        assert reader.search("wombat") == []
        assert reader.search("") == []
        assert len(reader.search("zebra", limit=1)) == 1
        for hit in reader.search("zebra"):
            assert "zebra" in reader.read_log(hit.session_id, hit.seq, hit.seq + 1)[0].body
