"""A process that races another on one session, driven line by line by test_postgres_concurrency.py.

Usage: ``python postgres_race_worker.py <store url> <session id>``. Commands on stdin, one
answer line each on stdout:

* ``create <label>``: prepare to create the session with one prompt ``<label>``
  -> ``ready 0``;
* ``load``: read the session -> ``ready <revision>``;
* ``commit <label>``: append the prompt ``<label>`` to what was prepared and checkpoint
  -> ``won <revision>`` or ``conflict <expected> <actual>``;
* ``quit``.
"""

from __future__ import annotations

import sys
import warnings

warnings.simplefilter("ignore")

from harness_postgres import PostgresStore  # noqa: E402

from harness import CanonicalMessage, Session, SessionConflictError  # noqa: E402


def main(url: str, session_id: str) -> int:
    """Answer commands until ``quit``; return the exit code."""
    store = PostgresStore(url)
    session: Session | None = None
    for line in sys.stdin:
        command, _, argument = line.strip().partition(" ")
        if command == "quit":
            break
        if command == "create":
            session = Session.create(
                store=store, session_id=session_id, messages=[CanonicalMessage.user(argument)]
            )
            answer = "ready 0"
        elif command == "load":
            session = Session.open(store, session_id)
            answer = f"ready {session.revision}"
        elif command == "commit" and session is not None:
            if session.revision:
                session.messages = [*session.messages, CanonicalMessage.user(argument)]
            try:
                answer = f"won {session.checkpoint()}"
            except SessionConflictError as exc:
                answer = f"conflict {exc.expected} {exc.actual}"
        else:
            answer = f"error unknown command {line.strip()!r}"
        print(answer, flush=True)
    store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1], sys.argv[2]))
