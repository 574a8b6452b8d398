"""The durable-engine test kit: a recording scenario agent, its records, and the replay check.

Engine plugins (``harness-dbos``, ``harness-temporal``) prove crash safety with it: a worker
process builds the scenario agent from an environment variable, the test SIGKILLs it at the
scenario's block point, a new worker resumes the run, and the records show what reached the
model and which tools ran, in which process::

    import os, signal, subprocess
    from harness.testing.durable import (
        SCENARIO_ENV, Scenario, assert_exactly_once, recorded_requests, recorded_tool_calls, wait_for,
    )

    scenario = Scenario(record_dir=str(tmp_path), steps=12, block_tool=5, idempotent=False)
    env = {**os.environ, SCENARIO_ENV: scenario.to_json()}
    worker = subprocess.Popen([..., "harness.testing.durable:make_agent"], env=env)
    wait_for(tmp_path / "blocked", timeout=60, process=worker)   # the 5th tool call is running
    worker.send_signal(signal.SIGKILL)
    # ... start a second worker, wait for the run to finish ...
    assert_exactly_once(tmp_path)    # no request sent twice, no completed tool run twice...
    starts = [c for c in recorded_tool_calls(tmp_path) if c.event == "start"]
    bodies = [r.body for r in recorded_requests(tmp_path)]

The scenario (:class:`Scenario`, :func:`scenario_agent`, :func:`make_agent`):

* the model (:class:`~harness.testing.durable_model.ScenarioModel`) answers as a pure
  function of the request it receives, so a new process answers exactly as the killed one
  would have: ``steps`` tool calls with ids ``call_1``, ``call_2``... (``work(n)``, or, at
  ``block_tool`` with ``idempotent=False``, ``send_email(to)``, declared
  ``idempotent=False``), then a text naming how many tool results it saw. A request offering
  no tools (the summarizer's call) gets a summary;
* the run key is the session id: the scenario's dynamic instructions send
  ``scenario-run=<session id>`` with every request, and tools read it from their
  :class:`~harness.tools.context.RunContext`;
* every arrival at the model is one line of ``record_dir/requests.jsonl``
  (``{"run", "index", "body", "capability", "pid"}``, ``body`` the canonical provider-facing
  JSON of :func:`~harness.testing.durable_record.request_body`), every tool start and end one
  line of ``record_dir/tools.jsonl`` (``{"run", "call_id", "tool", "event", "pid"}``), each
  appended with ``flush`` + ``fsync`` under a lock, so the counts survive ``SIGKILL``;
* at ``block_request`` (the run's n-th arrival at the model) or ``block_tool`` (the tool call
  ``call_<n>``) the first process to get there writes ``record_dir/blocked`` and sleeps until
  it is killed; later processes (the resumed worker) find the file and run through;
* ``compaction=True`` adds a tiered compaction (clear tool results, a summarizer that asks
  the same model, a sliding window) and a ``LimitWarner`` with budgets small enough that a
  ``steps=12`` run compacts several times. They come from the ``harness-tiered``,
  ``harness-clear-tool-results``, ``harness-summarizing``, ``harness-sliding-window`` and
  ``harness-limit-warner`` distributions, imported only when the agent is built.

The replay check (:func:`assert_replay_identical`, :class:`JournalEffects`): a capability
must behave identically when a run is replayed after a crash. It needs no engine::

    from harness.testing.durable import assert_replay_identical

    async def test_my_capability_is_replay_safe(tmp_path):
        def factory():
            return Agent(model, tools=[...], capabilities=[MyCapability(max_tokens=500)])
        await assert_replay_identical(factory, "Do the task.")

It runs the agent once uninterrupted, then, for each crash point, crashes a run at that unit
and replays it with a fresh agent from the factory and with the agent that crashed (a worker
that replays a run it ran before), and compares every model request, byte for byte, and the
final history (and the stored session, with ``store_url``).
"""

from __future__ import annotations

__all__ = [
    "BLOCKED_FILE",
    "REQUESTS_FILE",
    "SCENARIO_ENV",
    "TOOLS_FILE",
    "JournalEffects",
    "JournalEntry",
    "RecordedRequest",
    "RecordedToolCall",
    "Scenario",
    "ScenarioModel",
    "assert_exactly_once",
    "assert_replay_identical",
    "canonical_history",
    "exactly_once_problems",
    "make_agent",
    "recorded_requests",
    "recorded_tool_calls",
    "reference_run",
    "request_bodies",
    "request_body",
    "scenario_agent",
    "scenario_capabilities",
    "wait_for",
]

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

import attrs

from harness.hooks.stacks import installed_capability_classes
from harness.testing.durable_model import RUN_MARK, ScenarioModel, scenario_tools
from harness.testing.durable_record import (
    BLOCKED_FILE,
    REQUESTS_FILE,
    TOOLS_FILE,
    RecordedRequest,
    RecordedToolCall,
    assert_exactly_once,
    canonical_history,
    exactly_once_problems,
    recorded_requests,
    recorded_tool_calls,
    request_body,
    wait_for,
)
from harness.testing.durable_replay import JournalEffects, JournalEntry, assert_replay_identical
from harness.testing.durable_scenario import SCENARIO_ENV, Scenario

if TYPE_CHECKING:
    from harness.run.agent import Agent, RunResult
    from harness.tools.context import RunContext

SYSTEM_PROMPT: Final = "You are the durable-execution test scenario. Call the tools you are asked to call."


def _instructions(ctx: RunContext) -> str:
    return f"{RUN_MARK}{ctx.session.session_id}"


def scenario_capabilities(scenario: Scenario) -> list[object]:
    """The compaction stack of ``compaction=True``: tiered compaction, then ``LimitWarner``.

    Budgets scale with ``output_bytes`` (about ``output_bytes / 4 + 60`` tokens per step):
    the tiered stack acts above five steps' worth of tokens and compacts down to two (a
    ``steps=12`` run with the default 500-byte outputs compacts 5 times, 4 of them with a
    summarizer call); the warner warns from half of eight steps' worth.

    The classes are found through the ``harness`` entry points (the core never imports a
    plugin by name).

    Raises:
        ImportError: A plugin distribution is not installed (the message names it).
    """
    wanted = ("tiered", "clear_tool_results", "summarizing", "sliding_window", "limit_warner")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the plugins are experimental and say so on import
        installed = installed_capability_classes()
    missing = [name for name in wanted if name not in installed]
    if missing:
        raise ImportError(
            "Scenario(compaction=True) needs harness-tiered, harness-clear-tool-results, "
            "harness-summarizing, harness-sliding-window and harness-limit-warner installed "
            f"(missing: {', '.join(missing)}); pass compaction=False to run without them"
        )
    TieredCompaction, ClearToolResults, SummarizingCompaction, SlidingWindow, LimitWarner = (  # noqa: N806
        cast(Any, installed[name]) for name in wanted
    )
    step_tokens = scenario.output_bytes // 4 + 60
    tiered = TieredCompaction(
        [
            ClearToolResults(max_messages=1, keep_pairs=2),
            SummarizingCompaction(keep_messages=4, summarizer="model", fallback="digest"),
            SlidingWindow(max_messages=10**6, keep_messages=4),
        ],
        target_tokens=2 * step_tokens,
        max_tokens=5 * step_tokens,
    )
    warner = LimitWarner(max_context_tokens=8 * step_tokens, warning_threshold=0.5)
    return [tiered, warner]


def scenario_agent(scenario: Scenario) -> Agent:
    """The scenario's agent: the recording model, ``work`` and ``send_email``, and the stack.

    Raises:
        ImportError: ``compaction=True`` and a plugin distribution is missing.
    """
    from harness.run.agent import Agent

    return Agent(
        ScenarioModel(scenario),
        tools=scenario_tools(scenario),
        capabilities=scenario_capabilities(scenario) if scenario.compaction else (),
        system_prompt=SYSTEM_PROMPT,
        instructions=_instructions,
        max_iterations=scenario.steps + 20,
        tool_retry_base_delay=0.01,
    )


def make_agent() -> Agent:
    """The scenario agent of the scenario in :data:`SCENARIO_ENV` (``harness.testing.durable:make_agent``).

    Raises:
        RuntimeError: The variable is not set.
        ValueError: It does not hold a scenario.
    """
    text = os.environ.get(SCENARIO_ENV)
    if not text:
        raise RuntimeError(f"{SCENARIO_ENV} is not set: put a Scenario(...).to_json() in it")
    return scenario_agent(Scenario.from_json(text))


async def reference_run(
    scenario: Scenario, prompt: str, session_id: str, record_dir: str | os.PathLike[str]
) -> RunResult:
    """Run ``scenario`` uninterrupted, in this process, recording to ``record_dir``.

    The run never blocks (``record_dir/blocked`` is written first, so the block points are
    taken, and the model still picks the same tools); the session is an in-memory one with
    ``session_id`` (the run key is in every request body: use the id of the run to compare
    with). Compare
    :func:`request_bodies` and :func:`canonical_history` of the result with a killed and
    resumed run's.
    """
    from harness.session import Session

    folder = Path(record_dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / BLOCKED_FILE).write_text('{"what": "reference"}\n')
    plain = attrs.evolve(scenario, record_dir=str(folder))
    return await scenario_agent(plain).run(prompt, Session(session_id=session_id))


def request_bodies(record_dir: str | os.PathLike[str], run: str | None = None) -> list[bytes]:
    """The distinct request bodies that reached the model, in first-arrival order.

    A body sent again (the request in flight when a worker was killed) appears once, so a
    resumed run's list equals an uninterrupted run's when no request was lost or changed
    (:func:`assert_exactly_once` checks that nothing was sent more than that).
    """
    seen: set[bytes] = set()
    bodies: list[bytes] = []
    for record in recorded_requests(record_dir):
        if (run is None or record.run == run) and record.body not in seen:
            seen.add(record.body)
            bodies.append(record.body)
    return bodies
