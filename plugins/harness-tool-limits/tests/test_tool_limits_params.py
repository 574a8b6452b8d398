"""ToolLimits' parameters, its error, and the package surface."""

from __future__ import annotations

import importlib.metadata
from typing import Any

import harness_tool_limits
import pytest
from harness_tool_limits import LimitHit, ToolLimitExceeded, ToolLimits

from harness.errors import RunError, RunStopped
from harness.hooks import PluginManager


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({}, ValueError, r"ToolLimits needs a limit: set per_tool=\{'tool': n\} and/or per_run=n"),
        ({"per_tool": {}}, ValueError, "ToolLimits needs a limit"),
        ({"per_run": -1}, ValueError, r"per_run must be >= 0 \(0 forbids every call\), got -1"),
        ({"per_run": 2.5}, TypeError, "per_run must be an int"),
        ({"per_run": True}, TypeError, "per_run must be an int"),
        ({"per_tool": ["search"]}, TypeError, "per_tool must be a mapping of tool names to call limits"),
        ({"per_tool": {"search": -2}}, ValueError, r"per_tool\['search'\] must be >= 0"),
        ({"per_tool": {"search": "5"}}, TypeError, r"per_tool\['search'\] must be an int"),
        ({"per_tool": {"": 1}}, TypeError, "per_tool keys must be tool names"),
        ({"per_tool": {3: 1}}, TypeError, "per_tool keys must be tool names"),
        ({"per_run": 1, "on_limit": "raise"}, ValueError, "on_limit must be 'block' or 'stop', got 'raise'"),
        ({"per_run": 1, "count_failed": "no"}, TypeError, "count_failed must be True or False"),
        ({"per_run": 1, "message": "refused"}, TypeError, "message must be a function"),
    ],
)
def test_bad_parameters_are_refused_with_a_message_naming_them(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        ToolLimits(**kwargs)


def test_good_parameters_are_kept() -> None:
    limits = ToolLimits(per_tool={"search": 5, "fetch": 0}, per_run=20, on_limit="stop", count_failed=False)
    assert dict(limits.per_tool) == {"search": 5, "fetch": 0}
    assert (limits.per_run, limits.on_limit, limits.count_failed) == (20, "stop", False)
    assert ToolLimits(per_run=0).per_run == 0


def test_the_error_is_a_run_stopped_naming_tool_limit_and_count() -> None:
    error = ToolLimitExceeded(LimitHit("search", "call_7", "tool", 5, 5))
    assert isinstance(error, RunStopped)
    assert isinstance(error, RunError)
    assert str(error) == (
        "tool_limits stopped the run at call 'call_7' to 'search': tool 'search' may be called at most "
        "5 times per run, and it was already called 5 times in this run (per_tool['search']=5, "
        "on_limit='stop'); the call was not run and the history was saved"
    )
    run = ToolLimitExceeded(LimitHit("fetch", "c1", "run", 1, 1))
    assert "this run may make at most 1 tool call in all, and 1 tool call was already made (per_run=1" in str(
        run
    )


def test_the_default_block_messages() -> None:
    assert LimitHit("search", "c", "tool", 1, 1).message() == (
        "call refused by the tool-call limits: tool 'search' may be called at most once per run, and it was "
        "already called once in this run. This call was not run. Do not call 'search' again in this run; "
        "continue with the results you have."
    )
    assert LimitHit("search", "c", "run", 3, 3).message() == (
        "call refused by the tool-call limits: this run may make at most 3 tool calls in all, and 3 tool "
        "calls were already made. This call was not run. Do not call any tool again in this run; answer "
        "with the results you have."
    )


def test_the_entry_point_loads_the_plugin() -> None:
    (entry,) = [ep for ep in importlib.metadata.entry_points(group="harness") if ep.name == "tool_limits"]
    assert entry.value == "harness_tool_limits:ToolLimits"
    assert entry.load() is ToolLimits
    manager = PluginManager()
    manager.load_entrypoint_plugins()
    assert manager.available_capabilities()["tool_limits"] is ToolLimits
    assert ToolLimits.name == "tool_limits"


def test_the_package_exports_what_it_documents() -> None:
    for name in harness_tool_limits.__all__:
        assert getattr(harness_tool_limits, name) is not None
