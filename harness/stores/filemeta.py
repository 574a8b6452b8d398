"""A ``file:`` store session's metadata file: the head's ``metadata``, kept out of the sidecar.

The sidecar (:mod:`harness.stores.filelog`) is rewritten by every commit; a large
``metadata`` (continuity's anchors, a plugin's state) in it would be too. It lives in
``<stem>.metadata.<id>`` instead, which the sidecar names: a commit that changes it
(:attr:`~harness.session.records.Checkpoint.head_fields`) writes a file under a new name
before the sidecar (the commit point) and deletes the old one after, so a crash leaves
either revision whole (a crash's leftover is deleted with the session). An empty metadata
has no file.
"""

from __future__ import annotations

__all__ = ["METADATA_INFIX", "drop_metadata", "read_metadata", "write_metadata"]

import contextlib
import uuid
from typing import Any, cast

import attrs

from harness.errors import SessionStoreError
from harness.session.records import Checkpoint
from harness.stores.filelog import FileState
from harness.stores.folder import StoreFolder

METADATA_INFIX = ".metadata."
"""``<stem>`` + this + a random id: a session's metadata file names."""


def read_metadata(folder: StoreFolder, state: FileState, *, session_id: str) -> FileState:
    """``state`` with its head's metadata read from the file the sidecar names (as it is without one).

    Raises:
        SessionStoreError: The file is missing, unreadable or not a JSON object (names the file).
    """
    from harness.wire import decode_json

    name = state.metadata_file
    if name is None:
        return state
    data = folder.read(name, session_id=session_id)
    try:
        doc = decode_json(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        reason = f"{name} is not valid JSON: {exc}"
        raise SessionStoreError(folder.url, reason, session_id=session_id) from None
    if not isinstance(doc, dict):
        raise SessionStoreError(folder.url, f"{name} is not a JSON object", session_id=session_id)
    return attrs.evolve(state, head=attrs.evolve(state.head, metadata=cast(dict[str, Any], doc)))


def write_metadata(folder: StoreFolder, state: FileState, checkpoint: Checkpoint) -> str | None:
    """The metadata file the sidecar of ``checkpoint`` names, written if the checkpoint changed it.

    It is rewritten when ``checkpoint.head_fields`` is ``None`` or holds ``metadata``, and
    when a format 1 sidecar held a metadata inline (``state.metadata_file`` is ``None``).

    Raises:
        OSError: It could not be written.
    """
    from harness.wire import encode_json

    metadata = checkpoint.head.metadata
    fields = checkpoint.head_fields
    if fields is not None and "metadata" not in fields and (state.metadata_file is not None or not metadata):
        return state.metadata_file
    if not metadata:
        return None
    name = f"{state.stem}{METADATA_INFIX}{uuid.uuid4().hex[:12]}"
    folder.replace(name, encode_json(dict(metadata), ascii_only=False))
    return name


def drop_metadata(folder: StoreFolder, old: str | None, *, keep: str | None) -> None:
    """Delete the metadata file ``old`` after a commit that no longer names it (``keep``)."""
    if old is not None and old != keep:
        with contextlib.suppress(OSError):
            folder.file(old).unlink()
