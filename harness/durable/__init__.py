"""Durable execution: what every engine (``harness-dbos``, ``harness-temporal``) shares.

A durable engine replays a run's orchestration from its journal after a crash. What makes
that sound lives here, so the engine plugins only adapt their steps and activities:

* :mod:`harness.durable.fingerprint`: the agent fingerprint a run checks before it replays;
* :mod:`harness.durable.resume`: answering the calls a stopped run left unanswered, from the
  tool-effect ledger;
* :mod:`harness.durable.replay_safe`: the store wrapper that skips the commits an earlier
  execution already applied;
* :mod:`harness.durable.snapshot`: the session a run starts from, as one journaled text.

The effect seam every engine replaces is :mod:`harness.core.effects`.
"""

from __future__ import annotations

__all__ = [
    "DURABLE_MARK",
    "FINGERPRINT_COMPONENTS",
    "OUTCOME_UNKNOWN_CONTENT",
    "ReplaySafeStore",
    "ResumePlan",
    "agent_fingerprint",
    "check_fingerprint",
    "pending_calls",
    "plan_resume",
    "session_from_snapshot",
    "snapshot_session",
]

from harness.durable.fingerprint import FINGERPRINT_COMPONENTS, agent_fingerprint, check_fingerprint
from harness.durable.replay_safe import DURABLE_MARK, ReplaySafeStore
from harness.durable.resume import OUTCOME_UNKNOWN_CONTENT, ResumePlan, pending_calls, plan_resume
from harness.durable.snapshot import session_from_snapshot, snapshot_session
