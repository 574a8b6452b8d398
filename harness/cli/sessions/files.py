"""What a folder store (``file:``) adds to the commands: each session's file, and files it cannot read."""

from __future__ import annotations

__all__ = ["session_file", "store_problems"]

import glob
from pathlib import Path

from harness.errors import SessionStoreError
from harness.session.store import SessionStore
from harness.stores.jsonfile import JsonFileStore


def session_file(store: SessionStore, session_id: str) -> Path | None:
    """A folder store session's JSON file (``<project_id>_<session_id>.json``); other stores: ``None``."""
    if not isinstance(store, JsonFileStore):
        return None
    try:
        head = store.head(session_id)
    except SessionStoreError:
        return None
    named = store.path / f"{head.project_id}_{session_id}.json"
    if named.is_file():
        return named
    found = sorted(store.path.glob(f"*_{glob.escape(session_id)}.json"))
    return found[0] if found else None


def store_problems(store: SessionStore) -> list[tuple[Path, str]]:
    """The files a folder store's last listing could not read, with the reason; other stores: none."""
    return list(store.problems) if isinstance(store, JsonFileStore) else []
