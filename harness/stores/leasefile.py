"""Session leases of the ``file:`` store: one small JSON file per session, ``.<session_id>.lease``.

Read and written under the folder's exclusive lock (like a commit), so the check and the
write are one step for every process. See :mod:`harness.session.lease` for the rules.
"""

from __future__ import annotations

__all__ = ["drop_lease", "lease_name", "take_lease"]

import json
from typing import Any, cast

from harness.errors import SessionLeaseError
from harness.session.lease import LeaseHolder, can_take
from harness.stores.folder import StoreFolder


def lease_name(session_id: str) -> str:
    """The lease file of a session (hidden, so no listing mistakes it for a session)."""
    return f".{session_id}.lease"


def _current(folder: StoreFolder, session_id: str) -> LeaseHolder | None:
    path = folder.path / lease_name(session_id)
    try:
        data = cast(dict[str, Any], json.loads(path.read_bytes()))
        return LeaseHolder(str(data["token"]), str(data["host"]), int(data["pid"]), float(data["expires_at"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return None  # a torn or foreign file holds nothing: the revision check still guards writes


def take_lease(folder: StoreFolder, url: str, session_id: str, holder: LeaseHolder) -> None:
    """Check and record ``holder`` (the caller holds the folder's exclusive lock)."""
    current = _current(folder, session_id)
    if not can_take(current, holder):
        assert current is not None
        raise SessionLeaseError(url, session_id, current.describe())
    data = {"token": holder.token, "host": holder.host, "pid": holder.pid, "expires_at": holder.expires_at}
    folder.replace(lease_name(session_id), json.dumps(data).encode())


def drop_lease(folder: StoreFolder, session_id: str, token: str) -> None:
    """Remove the lease file if ``token`` holds it (the caller holds the exclusive lock)."""
    current = _current(folder, session_id)
    if current is not None and current.token == token:
        folder.remove([lease_name(session_id)])
