"""The plugin author's kit: fixtures, builders, scripted models, assertions and checks.

Everything here works without pytest. Installing ``harness-loop[testing]`` also makes the
pytest fixtures of :mod:`harness.testing.pytest_plugin` available in every test
(``harness_plugin_manager``, ``harness_register``, ``harness_hook_recorder``,
``harness_scripted_model``, ``harness_history``, ``harness_context``); disable them with
``pytest -p no:harness``.

* :class:`HistoryBuilder`: histories with parallel calls, retries and thinking in a few lines.
* :func:`scripted_model` / :func:`tool_call`: a model that plays a list of responses.
* :class:`HookRecorder`: every hook call a :class:`~harness.hooks.manager.PluginManager` makes.
* :func:`assert_invariants`, :func:`assert_no_split_tool_pairs`, :func:`assert_request_kept`,
  :func:`assert_user_prompts_kept`, :func:`assert_pins_kept`: assertions about what a
  transformation did (:func:`pin_parts` pins parts of a history for a property).
* :func:`check_plugin` / :func:`assert_plugin_valid`: a plugin against the hook
  specifications and the ordering rules.
* :func:`check_capability_invariants`: a ready-made hypothesis property test.
* :func:`corpus_dir` / :func:`corpus_files`: the transcript corpus, when present.
* :mod:`harness.testing.durable`: the durable-engine kit (loaded on first use):
  :class:`Scenario` / :func:`scenario_agent` / :func:`make_agent`, a recording agent whose
  model answers as a pure function of the request and blocks where a test kills its
  worker; :func:`recorded_requests` / :func:`recorded_tool_calls` / :func:`wait_for`; and
  :func:`assert_replay_identical` with :class:`JournalEffects`, the check that a capability
  behaves identically when a run is replayed after a crash.
* :func:`longest_stall`: the longest gap of a heartbeat beside some work (does it block the
  event loop?).
* :class:`StoreConformance`: the pytest suite a session store runs against its own factory
  (:mod:`harness.testing.store_conformance`; loaded on first use, it needs pytest), and
  :func:`store_problems` / :func:`assert_store_consistent`, the consistency check of a
  stored session it applies after every crash.

``harness.testing.strategies`` (hypothesis strategies) and
:func:`check_capability_invariants` need the ``testing`` extra (``hypothesis``).
"""

from __future__ import annotations

__all__ = [
    "KNOWN_CAPABILITY_NAMES",
    "OTHER_STRATEGY_MARK",
    "HistoryBuilder",
    "HookCall",
    "HookRecorder",
    "JournalEffects",
    "Problem",
    "Registrar",
    "SCENARIO_ENV",
    "Scenario",
    "ScriptedCall",
    "StoreConformance",
    "StoreFactory",
    "assert_history_unchanged",
    "longest_stall",
    "assert_invariants",
    "assert_memo_matches_fresh",
    "assert_no_split_tool_pairs",
    "assert_pins_kept",
    "assert_plugin_valid",
    "assert_replay_identical",
    "assert_request_kept",
    "assert_store_consistent",
    "assert_transformation_safe",
    "assert_user_prompts_kept",
    "check_capability_invariants",
    "check_plugin",
    "clearable_returns",
    "corpus_dir",
    "corpus_files",
    "make_agent",
    "make_context",
    "pin_parts",
    "recorded_requests",
    "recorded_tool_calls",
    "scenario_agent",
    "scripted_model",
    "store_problems",
    "tool_call",
    "wait_for",
]

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.testing.assertions import (
    assert_history_unchanged,
    assert_invariants,
    assert_no_split_tool_pairs,
    assert_pins_kept,
    assert_request_kept,
    assert_transformation_safe,
    assert_user_prompts_kept,
)
from harness.testing.builders import HistoryBuilder, make_context
from harness.testing.checks import KNOWN_CAPABILITY_NAMES, Problem, assert_plugin_valid, check_plugin
from harness.testing.loop import longest_stall
from harness.testing.models import ScriptedCall, scripted_model, tool_call
from harness.testing.properties import check_capability_invariants, pin_parts
from harness.testing.recording import HookCall, HookRecorder, Registrar
from harness.testing.replay import OTHER_STRATEGY_MARK, assert_memo_matches_fresh, clearable_returns
from harness.testing.store_workers import assert_store_consistent, store_problems

if TYPE_CHECKING:
    from harness.testing.durable import (
        SCENARIO_ENV,
        JournalEffects,
        Scenario,
        assert_replay_identical,
        make_agent,
        recorded_requests,
        recorded_tool_calls,
        scenario_agent,
        wait_for,
    )
    from harness.testing.store_conformance import StoreConformance, StoreFactory

_DURABLE = frozenset(
    {
        "SCENARIO_ENV",
        "JournalEffects",
        "Scenario",
        "assert_replay_identical",
        "make_agent",
        "recorded_requests",
        "recorded_tool_calls",
        "scenario_agent",
        "wait_for",
    }
)


def __getattr__(name: str) -> Any:
    """Names loaded on first use.

    ``StoreConformance`` and ``StoreFactory`` import pytest; the durable kit
    (:mod:`harness.testing.durable`) is only needed by engine tests.
    """
    if name in ("StoreConformance", "StoreFactory"):
        from harness.testing import store_conformance

        return getattr(store_conformance, name)
    if name in _DURABLE:
        from harness.testing import durable

        return getattr(durable, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def corpus_dir() -> Path | None:
    """Locate the transcript corpus, or return ``None`` when it is absent.

    ``HARNESS_CORPUS`` wins when set; otherwise ``shared/corpus`` beside the checkout
    (``<repo>/../shared/corpus``) is used.
    """
    configured = os.environ.get("HARNESS_CORPUS")
    candidates = [Path(configured)] if configured else []
    candidates.append(Path(__file__).resolve().parents[2].parent / "shared" / "corpus")
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return None


def corpus_files() -> list[Path]:
    """Every transcript file of the corpus (``manifest.json`` excluded), sorted; ``[]`` if absent."""
    directory = corpus_dir()
    if directory is None:
        return []
    return sorted(p for p in directory.glob("*.json") if p.name != "manifest.json")
