"""Fixtures of the harness-compact-on-request tests: a real SQLite session store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.session import SessionStore
from harness.stores import open_store


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SessionStore]:
    """A SQLite store in a file of the test's temporary folder."""
    store = open_store(f"sqlite:///{tmp_path / 'sessions.db'}")
    yield store
    store.close()
