"""A hypothesis property every session store must satisfy: rewrites never lose or duplicate history.

Random sequences of operations on one stored session: appends, overlay rewrites (a
placeholder over one message, a summary over a range), raw rewrites (a new message in
place of an old one, as a merge writes), drops (a sliding window), value-equal copies of
a shown message, and reopening the session from the store. After every checkpoint:

* the session reloads (through a second handle) to exactly the in-memory view;
* the transcript is every message ever appended raw, each exactly once, in order.

Used by :class:`harness.testing.store_conformance.StoreConformance`; it needs the
``testing`` extra (``hypothesis``).
"""

from __future__ import annotations

__all__ = ["rewrite_operations", "run_rewrite_property"]

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from harness.core.messages import CanonicalMessage, TextPart, UserPromptPart
from harness.session import Session, SessionStore

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

Operation = tuple[Any, ...]


def rewrite_operations(max_size: int = 12) -> SearchStrategy[list[Operation]]:
    """Lists of operations: append, overlay, summarize, raw, drop, copy and reopen."""
    from hypothesis import strategies as st

    index = st.integers(0, 40)
    return st.lists(
        st.one_of(
            st.tuples(st.just("append"), st.integers(1, 3)),
            st.tuples(st.just("overlay"), index),
            st.tuples(st.just("summarize"), index, st.integers(1, 4)),
            st.tuples(st.just("raw"), index),
            st.tuples(st.just("drop"), index),
            st.tuples(st.just("copy"), index),
            st.tuples(st.just("reopen"), st.booleans()),
        ),
        max_size=max_size,
    )


def _message(number: int) -> CanonicalMessage:
    if number % 2:
        return CanonicalMessage.response(TextPart(f"answer {number}"))
    return CanonicalMessage.request(UserPromptPart(f"prompt {number}"))


def _apply(
    session: Session, operation: Operation, counter: itertools.count[int], raw: list[CanonicalMessage]
) -> Session | None:
    """Apply one operation; return a session to continue with when it reopens."""
    view = session.messages
    kind = operation[0]
    if kind == "append":
        for _ in range(operation[1]):
            message = _message(next(counter))
            view.append(message)
            raw.append(message)
        return None
    if kind == "reopen":
        return session
    if not view:
        return None
    at = int(operation[1]) % len(view)
    if kind == "overlay":
        placeholder = CanonicalMessage.request(UserPromptPart(f"[placeholder {next(counter)}]"))
        view[at] = placeholder
        session.note_overlays([placeholder], [{"strategy": "property", "at": at}])
    elif kind == "summarize":
        summary = CanonicalMessage.request(UserPromptPart(f"[summary {next(counter)}]"))
        view[at : at + operation[2]] = [summary]
        session.note_overlays([summary], [{"strategy": "property-summary"}])
    elif kind == "raw":
        message = _message(next(counter))
        view[at] = message
        raw.append(message)
    elif kind == "drop":
        del view[at]
    elif kind == "copy":
        view[at] = attrs.evolve(view[at])
    return None


def run_rewrite_property(make_store: Callable[..., SessionStore], *, max_examples: int = 25) -> None:
    """Run the property against stores from ``make_store`` (``make_store()``, ``make_store(same=True)``).

    Raises:
        AssertionError: A reloaded view differs, or the log lost, duplicated or reordered
            a raw message (hypothesis reports the shrunk operations).
    """
    from hypothesis import HealthCheck, given, settings

    store = make_store()
    reader = make_store(same=True)

    @settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(rewrite_operations())
    def check(operations: list[Operation]) -> None:
        counter = itertools.count()
        raw = [_message(next(counter))]
        session = Session.create(
            store=store, project_id="0123456789abcdef", working_directory="/w", messages=list(raw)
        )
        session.checkpoint()
        for step, operation in enumerate(operations):
            reopen = _apply(session, operation, counter, raw)
            if reopen is not None:
                session = Session.open(reader if operation[1] else store, session.session_id)
                continue
            session.checkpoint()
            loaded = Session.open(reader, session.session_id)
            assert loaded.messages == session.messages, f"step {step} {operation}: the reloaded view differs"
            transcript = loaded.transcript()
            assert transcript == raw, (
                f"step {step} {operation}: the log is not every raw message once, in order "
                f"({len(transcript)} logged, {len(raw)} expected)"
            )

    check()
