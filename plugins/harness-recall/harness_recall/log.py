"""Reading a session's append-only log: messages by seq, tool results by call id.

The log is read through the session's store (:meth:`SessionStore.read_log
<harness.session.SessionStore.read_log>`), never through the view: what a capability
cleared, superseded or summarized is still there, exactly as it was first written.

The reader needs a synchronous store. A session whose store is asynchronous only (a run
inside a Temporal workflow, whose store operations are activities) gets references by log
position and call id, without reading the log (:meth:`LogReader.message` answers
``None``); the ``recall`` tool itself runs on a worker, where the store is the worker's own
synchronous one.
"""

from __future__ import annotations

__all__ = ["LogReader"]

import json
from collections.abc import Iterator
from typing import cast

from harness import (
    CanonicalMessage,
    RetryPromptPart,
    Session,
    ToolRetry,
    ToolReturnPart,
    WireFormatError,
    load_messages,
)
from harness.session import LogEntry, SessionStore, is_async_store

_CHUNK = 128  # log messages read at once when scanning


class LogReader:
    """Decoded messages of one stored session's log, with a small cache.

    Args:
        session: A session with a :attr:`~harness.Session.store`.
        cache_size: Decoded messages kept (the log never changes, so they stay valid).

    Raises:
        ValueError: The session has no store.
    """

    def __init__(self, session: Session, *, cache_size: int = 64) -> None:
        store = session.store
        if store is None:
            raise ValueError(f"session {session.session_id} has no store, so it keeps no log")
        self.session = session
        self.source = store
        """The session's store, as given (synchronous or not)."""
        self.store: SessionStore | None = None if is_async_store(store) else cast(SessionStore, store)
        """The synchronous store read from (``None``: the store is asynchronous only)."""
        self._cache: dict[int, CanonicalMessage] = {}
        self._cache_size = cache_size

    @property
    def session_id(self) -> str:
        """The session whose log is read."""
        return self.session.session_id

    def sync_store(self) -> SessionStore:
        """The synchronous store read from.

        Raises:
            ToolRetry: The session's store is asynchronous only.
        """
        if self.store is None:
            raise ToolRetry(
                "this session's log is in an asynchronous store that cannot be read from here", hint=False
            )
        return self.store

    def log_length(self) -> int:
        """Messages written to the log so far (the next seq)."""
        return self.sync_store().head(self.session_id).log_length

    def _decode(self, entry: LogEntry) -> CanonicalMessage:
        cached = self._cache.get(entry.seq)
        if cached is not None:
            return cached
        try:
            (message,) = load_messages("[" + entry.body + "]")
        except (WireFormatError, ValueError) as exc:
            raise ToolRetry(f"r{entry.seq} is in the log but cannot be read: {exc}", hint=False) from exc
        if len(self._cache) >= self._cache_size:
            del self._cache[next(iter(self._cache))]
        self._cache[entry.seq] = message
        return message

    def message(self, seq: int) -> CanonicalMessage | None:
        """Log message ``seq``, or ``None`` when the log does not hold it (not yet written, or pruned)."""
        cached = self._cache.get(seq)
        if cached is not None:
            return cached
        if self.store is None:
            return None
        entries = self.store.read_log(self.session_id, seq, seq + 1)
        return self._decode(entries[0]) if entries else None

    def messages(self, start: int, stop: int) -> Iterator[tuple[int, CanonicalMessage]]:
        """Log messages ``start`` to ``stop`` (inclusive) that the log holds, read in chunks."""
        at = start
        while at <= stop:
            end = min(at + _CHUNK, stop + 1)
            for entry in self.sync_store().read_log(self.session_id, at, end):
                yield entry.seq, self._decode(entry)
            at = end

    def missing(self, seq: int) -> str:
        """Why log message ``seq`` cannot be read, for the model."""
        head = self.sync_store().head(self.session_id)
        if seq >= head.log_length:
            last = f"r0 to r{head.log_length - 1}" if head.log_length else "nothing yet"
            return f"r{seq} is not in this session's log (it holds {head.log_length} messages: {last})"
        if head.log_pruned:
            return f"r{seq} was pruned from this session's log (`harness sessions prune --drop-log`)"
        return f"r{seq} is not in this session's log"

    def find_result(self, call_id: str) -> tuple[int, int] | None:
        """``(seq, part index)`` of the newest logged result (tool return, else retry prompt) of ``call_id``.

        Scans the log backwards in chunks, decoding only messages whose text holds the id.
        """
        needle = json.dumps(call_id, ensure_ascii=False)[1:-1]
        at = self.log_length()
        retry: tuple[int, int] | None = None
        while at > 0:
            start = max(at - _CHUNK, 0)
            for entry in reversed(self.sync_store().read_log(self.session_id, start, at)):
                if needle not in entry.body:
                    continue
                message = self._decode(entry)
                for index, part in enumerate(message.parts):
                    if isinstance(part, ToolReturnPart) and part.tool_call_id == call_id:
                        return entry.seq, index
                    if retry is None and isinstance(part, RetryPromptPart) and part.tool_call_id == call_id:
                        retry = (entry.seq, index)
            if retry is not None:
                return retry
            at = start
        return None
