"""The session store backends, and opening a store by URL.

* :class:`~harness.stores.sqlite.SqliteStore` (``sqlite:///sessions.db``), the embedded default;
* :class:`~harness.stores.jsonfile.JsonFileStore` (``file:///dir``): one JSON session file per
  session with an append-only JSON Lines log beside it;
* :func:`open_store`: the store a URL names, asking a plugin's ``resolve_store`` hook first
  (``postgresql://`` comes from the ``harness-postgres`` distribution that way);
* :mod:`harness.stores.rows`: the row encoding SQL backends share (the PostgreSQL plugin too).

The protocol every backend implements, and the records it keeps, are in :mod:`harness.session`.
"""

from __future__ import annotations

__all__ = [
    "STORE_ENV",
    "JsonFileStore",
    "SqliteStore",
    "default_store_url",
    "open_store",
    "store_path",
    "store_url",
]

from harness.stores.jsonfile import JsonFileStore
from harness.stores.opening import open_store
from harness.stores.sqlite import SqliteStore
from harness.stores.urls import STORE_ENV, default_store_url, store_path, store_url
