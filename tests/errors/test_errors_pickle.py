"""Every public exception and warning of ``harness.errors`` crosses a process boundary as itself.

A process pool, a DBOS journal and a worker all pickle errors; Temporal carries them as JSON
(:func:`harness.durable.failure_to_json`). Each class is built here with representative
arguments (a new class fails :func:`test_every_public_class_is_covered` until it is added)
and comes back with the same type, message and attributes both ways.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest

import harness.errors as errors_module
from harness.durable import failure_from_json, failure_to_json
from harness.errors import (
    HarnessError,
    HarnessWarning,
    MaxIterationsExceeded,
    ModelAuthenticationError,
)

_P = Path("/tmp/history.json")

EXAMPLES: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "AgentLoadError": (("app:agent", "no attribute 'agent'"), {}),
    "ApprovalError": (("call 'c1' is not waiting",), {}),
    "ApprovalPendingError": (("2 calls wait",), {"tool_call_ids": ["c1", "c2"]}),
    "ApproximateTokenCountWarning": (("approximate counts",), {}),
    "CapabilityError": (("tiered", "it raised ValueError"), {}),
    "CapabilityOrderError": (("a cycle: a -> b -> a",), {}),
    "CodingAgentMissingError": (("install harness-coding-agent",), {}),
    "EmptyResponseError": ((3, 2), {}),
    "EngineBoundaryError": (("harness-temporal", "RunContext.messages"), {}),
    "EngineConnectionError": (("harness-dbos", "postgresql://app:secret@db:1/x", "connection refused"), {}),
    "EvalRunError": (("a.json", "tiered", 8000, "ValueError: x"), {}),
    "HarnessError": (("plain",), {}),
    "HarnessExperimentalWarning": (("x is experimental",), {}),
    "HarnessWarning": (("a warning",), {}),
    "HistoryBuildError": (("cannot build",), {}),
    "HistoryFileError": ((_P, "the file is empty"), {}),
    "IllegalTransition": (("c1", "running", "pending", "cannot go back"), {}),
    "InteropError": (("cannot convert",), {}),
    "MaxIterationsExceeded": ((7,), {}),
    "MessageError": (("bad part",), {}),
    "PartFieldError": (("ToolCallPart", "tool_name", "must be a string, got object"), {}),
    "ModelAuthenticationError": (
        ("openai", "bad key"),
        {"status_code": 401, "model_name": "gpt", "attempts": 1},
    ),
    "ModelBadRequestError": (("openai", "bad request"), {"status_code": 400}),
    "ModelContextLengthError": (("anthropic", "too long"), {"status_code": 400, "model_name": "claude"}),
    "ModelError": (("openai", "failed"), {"attempts": 3}),
    "ModelRateLimitError": (("openai", "slow down"), {"status_code": 429, "attempts": 4}),
    "ModelResolutionError": (("nope:x", "unknown provider 'nope'", ("openai", "anthropic")), {}),
    "ModelResponseError": (("not a response",), {"model_name": "m"}),
    "ModelTimeoutError": (("openai", "timed out"), {"attempts": 2}),
    "ModelUnavailableError": (("anthropic", "overloaded"), {"status_code": 529}),
    "PlotUnavailableError": (("install matplotlib",), {}),
    "PluginLoadWarning": (("plugin 'x' failed; skipped",), {"plugin_name": "plugin.x", "distribution": "x"}),
    "PluginLoadError": (
        ("cannot load x",),
        {"plugin_name": "x", "distribution": "harness-x", "reason": "boom"},
    ),
    "PricesFileError": ((_P, "providers.openai.cache_read", "not a number"), {}),
    "ProviderNotInstalledError": (("openai:gpt-4o", "openai"), {}),
    "ReplayExhausted": (("no more responses",), {"recorded": 4}),
    "RequestTimeout": ((1.5,), {}),
    "RunError": (("the run failed",), {}),
    "RunStopped": (("limit reached",), {}),
    "ScriptError": (("step 3",), {}),
    "SearchQueryError": (("sqlite:///s.db", "limit must be at least 1, got 0"), {}),
    "SessionIdError": (("../evil", "contains a path separator"), {}),
    "SessionLeaseError": (("sqlite:///s.db", "s1", "pid 42 on host"), {}),
    "EventLoopRunningError": (("run_sync", "await agent.run(...)"), {}),
    "SessionConflictError": (("sqlite:///s.db", "s1", 3, 4), {}),
    "SessionLoadError": ((_P, "not JSON"), {"backup": Path("/tmp/history.json.bak")}),
    "SessionNotFoundError": (("sqlite:///s.db", "s1"), {}),
    "SessionSaveError": (("would overwrite a corrupt file",), {}),
    "SessionStoreError": (("postgresql://app:secret@db/x", "unreachable"), {"session_id": "s1"}),
    "StackConfigError": (("unknown capability",), {"source": "--stack entry 1", "accepted": ["a", "b"]}),
    "StoreCredentialsError": (("postgresql://app:secret@db/x",), {}),
    "StoreResolutionError": (("nope://x", "no store understands it"), {}),
    "TargetNotRegularFileError": ((_P, "directory"), {}),
    "TokenizerError": (("bad encoding",), {}),
    "ToolArgumentsError": (("read", ["path: required", "n: not an int"]), {}),
    "ToolDefinitionError": (("unsupported annotation",), {"tool_name": "read"}),
    "ToolRetry": (("try again",), {"hint": False}),
    "ToolRetryBudgetExceeded": (("read", 3, "no such file"), {}),
    "UnknownPluginNameWarning": (
        ("no plugin 'x'",),
        {"variable": "HARNESS_DISABLE_PLUGINS", "entry": "x", "installed": ["a"], "suggestion": "a"},
    ),
    "UserAbort": (("aborted",), {}),
    "WireFormatError": (("expected a list",), {"message_index": 2, "field": "parts", "format": "openai"}),
    "WorkflowIncompatibleError": (("changed",), {"run_id": "w", "changed": ("tools",)}),
}


def _public_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in errors_module.__all__:
        value = getattr(errors_module, name)
        if isinstance(value, type) and issubclass(value, HarnessError | HarnessWarning):
            found[name] = value
    return found


def _build(name: str) -> BaseException:
    args, kwargs = EXAMPLES[name]
    return _public_classes()[name](*args, **kwargs)


def _attributes(error: BaseException) -> dict[str, Any]:
    return dict(vars(error))


def test_every_public_class_is_covered() -> None:
    classes = _public_classes()
    assert len(classes) > 50
    assert set(classes) == set(EXAMPLES), "add the new class to EXAMPLES"


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_public_class_pickles_as_itself(name: str) -> None:
    error = _build(name)
    error.add_note("a note")
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error)
    assert str(back) == str(error)
    assert back.args == error.args
    assert _attributes(back) == _attributes(error)
    assert "secret" not in str(back)
    assert b"secret" not in pickle.dumps(error)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_public_error_crosses_as_json_as_itself(name: str) -> None:
    error = _build(name)
    data = failure_to_json(error)
    assert data is not None
    back = failure_from_json(json.loads(json.dumps(data)))
    assert back is not None
    assert type(back) is type(error)
    assert str(back) == str(error)
    expected = {k: tuple(v) if isinstance(v, list) else v for k, v in _attributes(error).items()}
    assert _attributes(back) == expected


def test_a_run_error_leaves_its_session_and_state_behind() -> None:
    error = MaxIterationsExceeded(3)
    error.session, error.state = object(), object()  # neither pickles
    back = pickle.loads(pickle.dumps(error))
    assert (back.session, back.state, back.max_iterations) == (None, None, 3)
    assert str(back) == str(MaxIterationsExceeded(3))


def test_a_payload_of_an_earlier_release_still_rebuilds() -> None:
    old = {"type": "harness.errors:EngineBoundaryError", "args": ["harness-temporal", "RunContext.usage"]}
    back = failure_from_json(old)
    assert isinstance(back, errors_module.EngineBoundaryError)
    assert back.field == "RunContext.usage"
    keyed = {
        "type": "harness.errors:ModelAuthenticationError",
        "args": ["openai: bad key"],
        "state": {"provider": "openai"},
    }
    rebuilt = failure_from_json(keyed)
    assert isinstance(rebuilt, ModelAuthenticationError)
    assert (str(rebuilt), rebuilt.provider) == ("openai: bad key", "openai")
