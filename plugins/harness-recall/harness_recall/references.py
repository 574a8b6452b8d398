"""The ``RequestContext.references`` callable a recall capability installs.

For a message of the view, :meth:`Session.log_seq_of <harness.Session.log_seq_of>` gives
its place in the log (an overlay: the log message it was made from). A part's index in
that log message is checked against the log itself, because an overlay's parts need not
sit where they sat in the original (a summary merged in front of them, for example).
When no seq is known, a tool result is named by its call id, which ``recall`` looks up
in the log.
"""

from __future__ import annotations

__all__ = ["SessionReferences"]

from harness import CanonicalMessage, Part, RetryPromptPart, Session, ToolCallPart, ToolRetry, ToolReturnPart
from harness_recall.log import LogReader
from harness_recall.refs import call_ref


def _call_id(part: Part) -> str | None:
    if isinstance(part, ToolCallPart | ToolReturnPart):
        return part.tool_call_id
    if isinstance(part, RetryPromptPart):
        return part.tool_call_id
    return None


def _same_part(logged: Part, part: Part) -> bool:
    """Whether ``logged`` is ``part`` as first written (tool parts: the same kind and call id)."""
    if type(logged) is not type(part):
        return False
    call_id = _call_id(part)
    if call_id is not None:
        return _call_id(logged) == call_id
    return logged == part


class SessionReferences:
    """Names content of a stored session's view by its place in the log (``r12``, ``r12.3``).

    Called as ``references(message, part=None)``, the signature of
    ``RequestContext.references``. One instance serves a session for its whole life: log
    seqs never change, so what it learns stays true.

    Args:
        session: A session with a store.

    Raises:
        ValueError: The session has no store.
    """

    def __init__(self, session: Session) -> None:
        self.session = session
        self.reader = LogReader(session)
        self._seq_of_call: dict[str, int] = {}

    def __call__(self, message: CanonicalMessage, part: Part | None = None) -> str | None:
        """The reference of ``message`` (``r12``) or of one of its parts (``r12.3``), or ``None``.

        ``None`` for a message the log does not hold yet. A tool result whose message has
        no seq (a message another capability rewrote in this request) is named by its call
        id when the log position of that call is unknown too.
        """
        seq = self.session.log_seq_of(message)
        if seq is not None:
            self._learn(message, seq)
        if part is None:
            return None if seq is None else f"r{seq}"
        call_id = _call_id(part)
        if seq is None and call_id is not None:
            seq = self._seq_of_call.get(call_id)
        if seq is not None:
            index = self._index_in_log(seq, message, part)
            if index is not None:
                return f"r{seq}.{index}"
        if call_id is not None and isinstance(part, ToolReturnPart | RetryPromptPart):
            return call_ref(call_id)
        return None if seq is None else f"r{seq}"

    def _learn(self, message: CanonicalMessage, seq: int) -> None:
        """Remember the seq of the calls a logged message holds (for rewrites of it later in a request)."""
        for part in message.parts:
            call_id = _call_id(part)
            if call_id is not None:
                self._seq_of_call[call_id] = seq

    def _index_in_log(self, seq: int, message: CanonicalMessage, part: Part) -> int | None:
        try:
            logged = self.reader.message(seq)
        except ToolRetry:
            return None  # an undecodable log message: fall back to the call id
        if logged is None:
            return None
        parts = logged.parts
        position = next((i for i, p in enumerate(message.parts) if p is part), None)
        if position is not None and position < len(parts) and _same_part(parts[position], part):
            return position
        return next((i for i, p in enumerate(parts) if _same_part(p, part)), None)
