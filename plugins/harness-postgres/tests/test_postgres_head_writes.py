"""A checkpoint updates only the head columns that changed: a large metadata is not rewritten every step."""

from __future__ import annotations

import secrets

import psycopg
from harness_postgres import PostgresStore

from harness.core.messages import CanonicalMessage, TextPart, UserPromptPart
from harness.session import Session
from harness.testing.store_kit import new_session

STEPS = 10


def steps(session: Session, count: int) -> None:
    """``count`` checkpoints, each adding a prompt and an answer (what a run's step writes)."""
    for index in range(count):
        session.messages.append(CanonicalMessage.request(UserPromptPart(content=f"step {index}")))
        session.messages.append(CanonicalMessage.response(TextPart(content=f"answer {index}")))
        session.checkpoint()


def wal_bytes_per_step(store: PostgresStore, dsn: str, session_id: str, metadata: dict[str, object]) -> float:
    """WAL bytes the server writes for one step's checkpoint, ``metadata`` unchanged (best of three runs)."""
    session = new_session(store, [], session_id=session_id, metadata=metadata)
    steps(session, 1)
    best = float("inf")
    with psycopg.connect(dsn, autocommit=True) as admin:
        for _ in range(3):
            start = admin.execute("SELECT pg_current_wal_insert_lsn()").fetchone()
            steps(session, STEPS)
            row = admin.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s)", start).fetchone()
            assert row is not None
            best = min(best, float(row[0]) / STEPS)
    return best


def test_a_step_does_not_rewrite_a_large_unchanged_metadata(pg_store: PostgresStore, pg_dsn: str) -> None:
    """A step's WAL with a 256 kB metadata is about that of one with none; a changed one is written."""
    blob = secrets.token_hex(128 * 1024)  # incompressible: what a pasted log costs
    small = wal_bytes_per_step(pg_store, pg_dsn, "small", {})
    large = wal_bytes_per_step(pg_store, pg_dsn, "large", {"pasted": blob})
    assert large < small + 16 * 1024, f"{large:.0f} WAL bytes per checkpoint, {small:.0f} without metadata"
    reopened = Session.open(pg_store, "large")
    assert reopened.metadata == {"pasted": blob}
    reopened.metadata["pasted"] = "short now"
    steps(reopened, 1)
    assert pg_store.head("large").metadata == {"pasted": "short now"}
