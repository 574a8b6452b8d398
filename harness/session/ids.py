"""New session ids: the rule :meth:`Session.create <harness.session.Session.create>` and the CLI share.

A new id is 1 to :data:`MAX_SESSION_ID_LENGTH` letters, digits, ``.``, ``_`` or ``-``,
starting with a letter or a digit: safe as a file name in every store (no path separator,
no ``..``, no control character), and typed as one command-line argument. A uuid4 hex (the
default id) is one. Ids already stored under other rules (session files of earlier
releases) still open; the rule applies to ids being created. :func:`check_id_free` refuses
an id a store holds already, before a run's first checkpoint would.
"""

from __future__ import annotations

__all__ = [
    "MAX_SESSION_ID_LENGTH",
    "SESSION_ID_PATTERN",
    "SESSION_ID_RULE",
    "acheck_id_free",
    "check_id_free",
    "check_session_id",
]

import re
from typing import Final

from harness.errors import SessionConflictError, SessionIdError, SessionNotFoundError
from harness.session.asyncstore import AsyncSessionStore, async_store
from harness.session.store import SessionStore

MAX_SESSION_ID_LENGTH: Final = 64
"""The longest id a new session may have."""

SESSION_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""A valid new session id (``fullmatch``)."""

SESSION_ID_RULE: Final = "use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
"""The rule, as every message about a bad id ends."""


def _problem(value: str) -> str | None:
    if SESSION_ID_PATTERN.fullmatch(value):
        return None
    if not value:
        return "it is empty"
    if len(value) > MAX_SESSION_ID_LENGTH:
        return f"it is {len(value)} characters long, over the limit of {MAX_SESSION_ID_LENGTH}"
    if "/" in value or "\\" in value:
        return "it holds a path separator"
    control = next((c for c in value if ord(c) < 32 or ord(c) == 127), None)
    if control is not None:
        return f"it holds the control character {control!r}"
    if value.startswith("."):
        return "it starts with '.'"
    other = next((c for c in value if not SESSION_ID_PATTERN.fullmatch("a" + c)), None)
    if other is not None:
        return f"it holds {other!r}"
    return "it does not start with a letter or a digit"


def check_session_id(value: object) -> str:
    """``value`` when it is a valid id for a new session (see the module docstring).

    Raises:
        SessionIdError: It is not a string, or breaks the rule; the message says how.
    """
    if not isinstance(value, str):
        raise SessionIdError(
            repr(value), f"a session id is a string, not {type(value).__name__}; {SESSION_ID_RULE}"
        )
    problem = _problem(value)
    if problem is not None:
        raise SessionIdError(value, f"{problem}; {SESSION_ID_RULE}")
    return value


def check_id_free(store: SessionStore, session_id: str) -> None:
    """Refuse an id ``store`` holds already (a read of its head).

    Raises:
        SessionConflictError: The store holds a session with this id.
    """
    try:
        head = store.head(session_id)
    except SessionNotFoundError:
        return
    raise SessionConflictError(store.url, session_id, 0, head.revision)


async def acheck_id_free(store: SessionStore | AsyncSessionStore, session_id: str) -> None:
    """:func:`check_id_free`, awaited (a synchronous store is read off the event loop)."""
    try:
        head = await async_store(store).head(session_id)
    except SessionNotFoundError:
        return
    raise SessionConflictError(store.url, session_id, 0, head.revision)
