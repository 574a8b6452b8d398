"""agent_fingerprint / check_fingerprint: a durable run refuses an agent that would send other requests."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from harness_clear_tool_results import ClearToolResults
from harness_summarizing import SummarizingCompaction

from harness.core.model import ModelSettings
from harness.durable.fingerprint import FINGERPRINT_COMPONENTS, agent_fingerprint, check_fingerprint
from harness.errors import HarnessError, WorkflowIncompatibleError
from harness.models.function import FunctionModel
from harness.run import Agent
from harness.testing import scripted_model, tool_call
from harness.testing.durable import SCENARIO_ENV, Scenario, scenario_agent
from harness.tools.context import RunContext
from harness.tools.tool import Tool


def probe(n: int) -> str:
    """Return a numbered result.

    Args:
        n: The number.
    """
    return f"result {n}"


def other(path: str) -> str:
    """Read a path.

    Args:
        path: The path.
    """
    return path


def _instructions(ctx: RunContext) -> str:
    return f"iteration {ctx.run.current_iteration}"


def _other_instructions(ctx: RunContext) -> str:
    return f"step {ctx.run.current_iteration}"


def build(**changes: Any) -> Agent:
    """The agent under test; ``changes`` replace one of its ingredients."""
    options: dict[str, Any] = {
        "model_name": "scripted-a",
        "tools": [probe],
        "capabilities": [ClearToolResults(max_messages=6, keep_pairs=2)],
        "system_prompt": "be brief",
        "instructions": _instructions,
        "max_iterations": 25,
        "settings": ModelSettings(temperature=0.2),
        "tool_max_retries": 3,
        "calls": 1,
    }
    options.update(changes)
    steps = [tool_call("probe", {"n": n}) for n in range(options.pop("calls"))]
    model = scripted_model(*steps, "done", model_name=options.pop("model_name"))
    return Agent(model, **options)


def test_components_are_the_documented_ones_and_digests_are_hex() -> None:
    fingerprint = agent_fingerprint(build())
    assert tuple(fingerprint) == FINGERPRINT_COMPONENTS
    assert all(len(d) == 16 and int(d, 16) >= 0 for d in fingerprint.values())
    assert len(set(fingerprint.values())) == len(fingerprint)  # the components are digested apart


def test_two_builds_of_one_agent_have_one_fingerprint() -> None:
    first, second = build(), build()
    assert first is not second
    assert agent_fingerprint(first) == agent_fingerprint(second)
    check_fingerprint(agent_fingerprint(first), second)  # no error


async def test_the_fingerprint_does_not_change_when_the_agent_runs() -> None:
    summarizer = FunctionModel(lambda m, i: "A summary of the work done so far, long enough.", model_name="s")
    agent = build(
        capabilities=[SummarizingCompaction(max_messages=4, keep_messages=2, model=summarizer)], calls=6
    )
    before = agent_fingerprint(agent)
    await agent.run("go")
    assert summarizer.requests, "the summarizer never ran"
    assert agent_fingerprint(agent) == before  # a worker replaying a run it ran itself is not refused


CHANGES: dict[str, tuple[Callable[[], Agent], str]] = {
    "a tool added": (lambda: build(tools=[probe, other]), "tools"),
    "a tool removed": (lambda: build(tools=[]), "tools"),
    "a tool no longer idempotent": (
        lambda: build(tools=[Tool.from_function(probe, idempotent=False)]),
        "tools",
    ),
    "a tool's description": (
        lambda: build(tools=[Tool.from_function(probe, description="Return a result.")]),
        "tools",
    ),
    "a capability parameter": (
        lambda: build(capabilities=[ClearToolResults(max_messages=6, keep_pairs=3)]),
        "capabilities",
    ),
    "a capability's placeholder": (
        lambda: build(capabilities=[ClearToolResults(max_messages=6, keep_pairs=2, placeholder="[gone]")]),
        "capabilities",
    ),
    "a capability added": (
        lambda: build(
            capabilities=[
                ClearToolResults(max_messages=6, keep_pairs=2),
                SummarizingCompaction(max_messages=40, keep_messages=4),
            ]
        ),
        "capabilities",
    ),
    "the system prompt": (lambda: build(system_prompt="be thorough"), "prompts"),
    "no system prompt": (lambda: build(system_prompt=None), "prompts"),
    "the instructions": (lambda: build(instructions=_other_instructions), "prompts"),
    "max_iterations": (lambda: build(max_iterations=26), "settings"),
    "tool_max_retries": (lambda: build(tool_max_retries=4), "settings"),
    "the model settings": (lambda: build(settings=ModelSettings(temperature=0.3)), "settings"),
    "the model name": (lambda: build(model_name="scripted-b"), "model"),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_changed_component_is_refused_naming_exactly_it(change: str) -> None:
    factory, component = CHANGES[change]
    recorded = agent_fingerprint(build())
    changed = factory()
    current = agent_fingerprint(changed)
    assert {name for name in FINGERPRINT_COMPONENTS if current[name] != recorded[name]} == {component}
    with pytest.raises(WorkflowIncompatibleError) as caught:
        check_fingerprint(recorded, changed, run_id="wf-42")
    error = caught.value
    assert error.changed == (component,)
    assert error.run_id == "wf-42"
    assert isinstance(error, HarnessError)
    message = str(error)
    assert "run 'wf-42'" in message
    assert f"its {component} changed" in message
    assert "the session was not touched" in message


def test_several_changes_and_missing_components_are_all_named() -> None:
    recorded = agent_fingerprint(build())
    with pytest.raises(WorkflowIncompatibleError) as caught:
        check_fingerprint(recorded, build(model_name="scripted-b", max_iterations=3))
    assert caught.value.changed == ("model", "settings")
    assert caught.value.run_id is None
    assert "the run started with another agent" in str(caught.value)
    partial = {k: v for k, v in recorded.items() if k != "prompts"}
    with pytest.raises(WorkflowIncompatibleError) as missing:
        check_fingerprint(partial, build())
    assert missing.value.changed == ("prompts",)


def test_the_error_pickles_with_its_fields() -> None:
    with pytest.raises(WorkflowIncompatibleError) as caught:
        check_fingerprint(agent_fingerprint(build()), build(tools=[]), run_id="wf-9")
    copy = pickle.loads(pickle.dumps(caught.value))
    assert type(copy) is WorkflowIncompatibleError
    assert str(copy) == str(caught.value)
    assert copy.changed == ("tools",)
    assert copy.run_id == "wf-9"
    plain = pickle.loads(pickle.dumps(WorkflowIncompatibleError("journal entry 4 does not fit")))
    assert (str(plain), plain.run_id, plain.changed) == ("journal entry 4 does not fit", None, ())


def test_a_worker_process_builds_an_agent_with_the_same_fingerprint(tmp_path: Path) -> None:
    scenario = Scenario(record_dir=str(tmp_path), steps=4)
    here = agent_fingerprint(scenario_agent(scenario))
    code = (
        "import json, warnings; warnings.simplefilter('ignore')\n"
        "from harness.config import load_agent\n"
        "from harness.durable.fingerprint import agent_fingerprint\n"
        "print(json.dumps(agent_fingerprint(load_agent('harness.testing.durable:make_agent'))))\n"
    )
    env = {
        **os.environ,
        SCENARIO_ENV: scenario.to_json(),
        "PYTHONHASHSEED": "12345",  # another hash seed than this process's: sets must not leak their order
    }
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == here
