"""Fixtures of the harness-recall tests: a real SQLite session store and stored sessions."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from harness import CanonicalMessage, Session
from harness.session import SessionStore
from harness.stores import open_store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    """A SQLite store in a file of the test's temporary folder."""
    opened = open_store(f"sqlite:///{tmp_path}/s.db")
    yield opened
    opened.close()


@pytest.fixture
def stored(store: SessionStore) -> Callable[[Sequence[CanonicalMessage]], Session]:
    """``stored(messages)``: a session in ``store`` holding ``messages``, checkpointed."""

    def make(messages: Sequence[CanonicalMessage]) -> Session:
        session = Session.create(store=store)
        session.messages = list(messages)
        session.checkpoint()
        return session

    return make


@pytest.fixture(params=["sqlite", "file"])
def each_stored(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[[Sequence[CanonicalMessage]], Session]]:
    """Like ``stored``, once per built-in store: SQLite (FTS5 search) and the file store (a plain scan)."""
    url = f"sqlite:///{tmp_path}/s.db" if request.param == "sqlite" else f"file://{tmp_path}/sessions"
    opened = open_store(url)

    def make(messages: Sequence[CanonicalMessage]) -> Session:
        session = Session.create(store=opened)
        session.messages = list(messages)
        session.checkpoint()
        return session

    yield make
    opened.close()
