"""The store conformance kit catches broken stores: each bug below fails the case written for it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import attrs
import pytest

from harness.errors import SessionConflictError
from harness.session import Checkpoint, LogEntry, SearchHit, SessionStore
from harness.stores import store_path, store_url
from harness.stores.sqlite import SqliteStore
from harness.testing import StoreConformance, StoreFactory, store_problems
from harness.testing.store_kit import new_session, sample_messages


class LastWriterWins(SqliteStore):
    """Ignores the revision a write is based on (the bug the issue is about)."""

    def commit(self, checkpoint: Checkpoint) -> int:
        if checkpoint.base_revision:
            actual = self.head(checkpoint.head.session_id).revision
            checkpoint = attrs.evolve(
                checkpoint, base_revision=actual, head=attrs.evolve(checkpoint.head, revision=actual + 1)
            )
        return super().commit(checkpoint)


class WritesBeforeChecking(SqliteStore):
    """Refuses a stale write, but only after writing its thoughts."""

    leaked = 1000

    def commit(self, checkpoint: Checkpoint) -> int:
        try:
            return super().commit(checkpoint)
        except SessionConflictError:
            with sqlite3.connect(self.path or "") as raw:
                WritesBeforeChecking.leaked += 1
                raw.execute(
                    "INSERT INTO thoughts (session_id, idx, text) VALUES (?, ?, 'leaked')",
                    (checkpoint.head.session_id, WritesBeforeChecking.leaked),
                )
            raise


class LogIsTheView(SqliteStore):
    """Answers read_log with the view: what was compacted away is gone."""

    def read_log(self, session_id: str, start: int = 0, stop: int | None = None) -> list[LogEntry]:
        view = [body for _, body in self.load(session_id).view]
        return [LogEntry(seq, body) for seq, body in enumerate(view)][start:stop]


class SearchesEverywhere(SqliteStore):
    """Ignores the session a search is scoped to."""

    def search(self, query: str, *, session_id: str | None = None, limit: int = 20) -> list[SearchHit]:
        return super().search(query, limit=limit)


def suite_for(store_class: type[SqliteStore]) -> StoreConformance:
    class Suite(StoreConformance):
        def store_spec(self, tmp_path: Path, name: str) -> str:
            return store_url(tmp_path / f"{name}.db")

        def open_spec(self, spec: str) -> SessionStore:
            return store_class(store_path(spec))

    return Suite()


@pytest.mark.parametrize(
    ("store_class", "case"),
    [
        (LastWriterWins, "test_a_stale_handle_conflicts_and_writes_nothing"),
        (LastWriterWins, "test_a_raw_stale_checkpoint_writes_nothing"),
        (WritesBeforeChecking, "test_a_stale_handle_conflicts_and_writes_nothing"),
        (WritesBeforeChecking, "test_a_raw_stale_checkpoint_writes_nothing"),
        (LogIsTheView, "test_rewrites_are_edits_over_an_untouched_log"),
        (LogIsTheView, "test_prune_drop_log_keeps_the_view_loadable"),
        (SearchesEverywhere, "test_search_finds_prompts_and_tool_results_in_the_raw_log"),
    ],
)
def test_a_broken_store_fails_its_case(store_class: type[SqliteStore], case: str, tmp_path: Path) -> None:
    suite = suite_for(store_class)
    factory = StoreFactory(suite, tmp_path)
    method: Any = getattr(suite, case)
    try:
        with pytest.raises((Exception, pytest.fail.Exception)):  # a failed assertion, or the store breaks
            method(factory)
    finally:
        factory.close()


def test_the_same_cases_pass_on_the_real_store(tmp_path: Path) -> None:
    suite = suite_for(SqliteStore)
    for case in (
        "test_a_stale_handle_conflicts_and_writes_nothing",
        "test_rewrites_are_edits_over_an_untouched_log",
        "test_search_finds_prompts_and_tool_results_in_the_raw_log",
    ):
        factory = StoreFactory(suite, tmp_path / case)
        try:
            getattr(suite, case)(factory)
        finally:
            factory.close()


def test_the_property_catches_a_store_that_loses_history(tmp_path: Path) -> None:
    suite = suite_for(LogIsTheView)
    factory = StoreFactory(suite, tmp_path)
    try:
        with pytest.raises(AssertionError, match="the log is not every raw message once"):
            suite.test_random_appends_and_rewrites_reload_and_keep_the_log(factory)
    finally:
        factory.close()


def test_store_problems_names_what_is_inconsistent(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "s.db") as store:
        session = new_session(store, sample_messages())
        session.checkpoint()
        assert store_problems(store, session.session_id) == []
        with sqlite3.connect(tmp_path / "s.db") as raw:
            raw.execute("UPDATE sessions SET view_length = 3, log_length = 5")
        problems = store_problems(store, session.session_id)
        assert any("head says 3" in p for p in problems)
        assert any("beyond log_length 5" in p for p in problems)
        with sqlite3.connect(tmp_path / "s.db") as raw:
            raw.execute("DELETE FROM log WHERE seq = 6")
        problems = store_problems(store, session.session_id)
    assert problems == [problems[0]]
    assert "cannot be read" in problems[0]
    assert "log message 6, which is missing" in problems[0]
