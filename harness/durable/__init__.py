"""Durable execution: what every engine (``harness-dbos``, ``harness-temporal``) shares.

A durable engine replays a run's orchestration from its journal after a crash. What makes
that sound lives here, so the engine plugins only adapt their steps and activities:

* :mod:`harness.durable.fingerprint`: the agent fingerprint a run checks before it replays;
* :mod:`harness.durable.resume`: answering the calls a stopped run left unanswered, from the
  tool-effect ledger;
* :mod:`harness.durable.replay_safe`: the store wrapper that skips the commits an earlier
  execution already applied;
* :mod:`harness.durable.snapshot`: the session a run starts from, as one journaled text;
* :mod:`harness.durable.spec`: the run's journaled input (:class:`RunSpec`) and result
  (:class:`RunSummary`), naming the store by a :class:`StoreReference` that is never a
  credential;
* :mod:`harness.durable.records`: the store's records as JSON, for an engine that ships a
  checkpoint or a read between processes;
* :mod:`harness.durable.failures`: a harness error as JSON, rebuilt as the same type on the
  other side;
* :mod:`harness.durable.stores`: the stores a worker knows (:class:`StoreDirectory`), which
  resolve a run's store reference.

The effect seam every engine replaces is :mod:`harness.core.effects`.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_STORE_NAME",
    "DURABLE_MARK",
    "FINGERPRINT_COMPONENTS",
    "SPEC_VERSION",
    "Fingerprinted",
    "RunSpec",
    "RunStarter",
    "RunSummary",
    "StoreDirectory",
    "StoreReference",
    "OUTCOME_UNKNOWN_CONTENT",
    "ReplaySafeStore",
    "ResumePlan",
    "agent_fingerprint",
    "already_applied",
    "mark_checkpoint",
    "check_fingerprint",
    "checkpoint_from_json",
    "checkpoint_to_json",
    "edits_from_json",
    "edits_to_json",
    "head_from_json",
    "head_to_json",
    "hits_from_json",
    "hits_to_json",
    "log_from_json",
    "log_to_json",
    "stored_from_json",
    "stored_to_json",
    "failure_from_json",
    "failure_to_json",
    "known_models",
    "pending_calls",
    "plan_resume",
    "session_from_snapshot",
    "snapshot_session",
    "store_reference",
]

from harness.durable.failures import failure_from_json, failure_to_json
from harness.durable.fingerprint import (
    FINGERPRINT_COMPONENTS,
    Fingerprinted,
    agent_fingerprint,
    check_fingerprint,
    known_models,
)
from harness.durable.records import (
    checkpoint_from_json,
    checkpoint_to_json,
    edits_from_json,
    edits_to_json,
    head_from_json,
    head_to_json,
    hits_from_json,
    hits_to_json,
    log_from_json,
    log_to_json,
    stored_from_json,
    stored_to_json,
)
from harness.durable.replay_safe import DURABLE_MARK, ReplaySafeStore, already_applied, mark_checkpoint
from harness.durable.resume import OUTCOME_UNKNOWN_CONTENT, ResumePlan, pending_calls, plan_resume
from harness.durable.snapshot import session_from_snapshot, snapshot_session
from harness.durable.spec import (
    SPEC_VERSION,
    RunSpec,
    RunStarter,
    RunSummary,
    StoreReference,
    store_reference,
)
from harness.durable.stores import DEFAULT_STORE_NAME, StoreDirectory
