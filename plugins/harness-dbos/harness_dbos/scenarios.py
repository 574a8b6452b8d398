"""Helpers on the durable scenario (:mod:`harness.testing.durable`): plain runs, stored sessions."""

from __future__ import annotations

__all__ = ["AGENT", "PROMPT", "plain_run", "stored_session", "without_blocking"]

from pathlib import Path

import attrs

from harness import Session, open_store
from harness.history import check_invariants
from harness.testing.durable import (
    BLOCKED_FILE,
    Scenario,
    canonical_history,
    request_bodies,
    scenario_agent,
)

AGENT = "harness.testing.durable:make_agent"
"""The scenario agent's reference (it reads the scenario from ``$HARNESS_DURABLE_SCENARIO``)."""
PROMPT = "Do the scenario's task."
"""The prompt of every scenario run."""


def without_blocking(record_dir: Path) -> None:
    """Take the scenario's block point in advance, so no run blocks."""
    (record_dir / BLOCKED_FILE).write_text('{"what": "none"}\n')


async def plain_run(scenario: Scenario, session_id: str, folder: Path) -> tuple[bytes, bytes, list[bytes]]:
    """The same scenario run by ``Agent.run`` in process on its own SQLite store.

    Returns:
        The stored view's and transcript's canonical bytes, and the request bodies.
    """
    records = folder / "plain-records"
    records.mkdir(parents=True)
    without_blocking(records)
    plain = attrs.evolve(scenario, record_dir=str(records))
    store = open_store(f"sqlite:///{folder / 'plain.db'}")
    try:
        session = Session.create(store=store, session_id=session_id)
        await scenario_agent(plain).run(PROMPT, session)
        return (*stored_session(f"sqlite:///{folder / 'plain.db'}", session_id), request_bodies(records))
    finally:
        store.close()


def stored_session(store_url: str, session_id: str) -> tuple[bytes, bytes]:
    """The stored session's view and transcript as canonical bytes (checked for invariants)."""
    store = open_store(store_url)
    try:
        session = Session.open(store, session_id)
        problems = check_invariants(session.messages)
        assert not problems, problems
        return canonical_history(session.messages), canonical_history(session.transcript())
    finally:
        store.close()
