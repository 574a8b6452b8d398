"""The runs behind ``harness demo`` and ``harness replay``, measured with and without a stack.

``harness demo`` runs the example coding agent (the ``harness-coding-agent``
distribution) over a real folder, driven by its deterministic scripted model; its tools
execute for real. ``harness replay`` re-runs a recorded transcript through the loop with
:class:`~harness.replay.model.ReplayModel` answering with the recorded responses and
:class:`~harness.replay.model.ReplayTools` with the recorded tool results.

Each conversation runs twice, without the stack and with it, and every model request of
both runs is measured as sent (see :mod:`harness.cli.demo.measure`).
"""

from __future__ import annotations

from harness.errors import CodingAgentMissingError

__all__ = [
    "DEMO_BUDGET",
    "DEMO_PROMPT",
    "DemoReport",
    "ReplayReport",
    "default_root",
    "load_coding_agent",
    "recorded_system_prompt",
    "run_demo",
    "run_replay",
    "use_structural_digest",
]

import importlib
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs

from harness.capabilities.context import CompactionEvent
from harness.cli.demo.measure import Comparison, RequestMeasure, RequestMeter, compare
from harness.cli.sessions.files import session_file
from harness.core.messages import CanonicalMessage
from harness.history import check_invariants
from harness.hooks.defaults import default_plugin_manager
from harness.hooks.manager import PluginManager
from harness.replay.offline import recorded_system_prompt, use_structural_digest
from harness.session import Session
from harness.session.store import SessionStore
from harness.tokens import TokenCounter

DEMO_BUDGET = 8_000
"""The demo's context window (tokens) given to the stack."""

DEMO_PROMPT = "Explore this project: what is it made of, and which are its largest modules?"
"""The task the demo gives the scripted agent."""

CODING_AGENT_DISTRIBUTION = "harness-coding-agent"


def load_coding_agent() -> ModuleType:
    """Import ``harness_coding_agent``.

    Raises:
        CodingAgentMissingError: It is not installed; the message says how to install it.
    """
    try:
        return importlib.import_module("harness_coding_agent")
    except ImportError as exc:
        raise CodingAgentMissingError(
            f"this command runs the example agent ({CODING_AGENT_DISTRIBUTION}), which is not "
            "installed: from a clone of harness, pip install ./examples/coding-agent ./plugins/harness-* "
            "(the agent and the capability plugins of its stack; harness-loop is not on PyPI yet; "
            "in a checkout: uv sync --all-packages)"
        ) from exc


def default_root() -> Path:
    """The folder the demo explores: the installed ``harness`` package's own source files.

    From a checkout (an editable install) that is ``<repo>/harness``; from a wheel it is
    ``site-packages/harness``. Either way it is real source code that ships with the
    command, so the demo works anywhere.
    """
    return Path(__file__).resolve().parents[2]


def _manager(meter: RequestMeter) -> PluginManager:
    manager = default_plugin_manager()  # installed observers (harness-otel) see the demo's runs too
    manager.register(meter, name="request_meter")
    return manager


@attrs.frozen
class DemoReport:
    """What ``harness demo`` measured.

    Attributes:
        root: The folder explored.
        prompt: The task.
        comparison: Tokens per request with and without the stack.
        output: The agent's final answer (run with the stack).
        output_without: The final answer of the run without the stack.
        tool_calls: Tool calls the agent made (counted in the uncompacted run).
        invariants_clean: The saved history breaks no invariant.
        session_id: The stored session of the run with the stack.
        store: The URL of the store it is in.
        session_path: Its JSON file, when the store is a folder of files (``file:``).
        session_roundtrip: The stored session reloads with identical messages.
        log_length: Messages in its raw log (every message as first written).
        edits: Compaction edits recorded over that log.
    """

    root: Path
    prompt: str
    comparison: Comparison
    output: str | None
    output_without: str | None
    tool_calls: int
    invariants_clean: bool
    session_id: str
    store: str
    session_path: Path | None
    session_roundtrip: bool
    log_length: int
    edits: int

    @property
    def ok(self) -> bool:
        """Every check passed: within budget, invariants clean, session round trip, same runs."""
        return (
            not self.comparison.over_budget
            and self.invariants_clean
            and self.session_roundtrip
            and self.comparison.unpaired == 0
            and self.output == self.output_without
        )

    def as_json(self) -> dict[str, Any]:
        """A JSON-ready dict of the figures."""
        return {
            "root": str(self.root),
            "prompt": self.prompt,
            **self.comparison.as_json(),
            "output": self.output,
            "same_answer_without_stack": self.output == self.output_without,
            "tool_calls": self.tool_calls,
            "invariants_clean": self.invariants_clean,
            "session_id": self.session_id,
            "store": self.store,
            "session_path": None if self.session_path is None else str(self.session_path),
            "session_roundtrip": self.session_roundtrip,
            "log_length": self.log_length,
            "edits": self.edits,
            "ok": self.ok,
        }


async def run_demo(
    *,
    root: Path,
    capabilities: Sequence[object],
    budget: int,
    store: SessionStore,
    prompt: str = DEMO_PROMPT,
    on_request: Callable[[RequestMeasure, RequestMeasure | None], None] | None = None,
    on_event: Callable[[CompactionEvent], None] | None = None,
) -> DemoReport:
    """Run the example agent over ``root`` without the stack, then with it, and compare.

    Args:
        root: The folder the agent explores (its tools are confined to it).
        capabilities: The stack (built for ``budget``).
        budget: The context window the scripted model reports.
        store: Where the session of the run with the stack is kept (checkpointed at every
            step, then reloaded and compared).
        prompt: The task.
        on_request: Called after each request of the run with the stack, with its measure
            and the same request's measure without the stack.
        on_event: Called with each compaction event as it happens.

    Raises:
        CodingAgentMissingError: The example agent is not installed.
    """
    agent_module = load_coding_agent()
    use_structural_digest(capabilities)

    counter = TokenCounter(agent_module.SCRIPTED_MODEL_NAME)  # both meters count with it
    plain_meter = RequestMeter(counter)
    plain_agent = agent_module.build_agent(
        agent_module.scripted_model(context_window=budget), root=root, plugin_manager=_manager(plain_meter)
    )
    plain = await plain_agent.run(prompt, session=Session())

    def forward(measure: RequestMeasure) -> None:
        if on_request is not None:
            index = measure.index - 1
            on_request(measure, plain_meter.requests[index] if index < len(plain_meter.requests) else None)

    meter = RequestMeter(counter, on_request=forward, on_event=on_event)
    model = agent_module.scripted_model(context_window=budget)
    agent = agent_module.build_agent(model, root=root, stack=capabilities, plugin_manager=_manager(meter))
    session = Session.create(store=store, current_model=model.model_name, working_directory=str(root))
    result = await agent.run(prompt, session=session)
    session.checkpoint()  # the run checkpointed every step; this is a no-op unless something is left
    roundtrip = Session.open(store, session.session_id).messages == session.messages
    head = store.head(session.session_id)
    calls = sum(len(m.tool_calls) for m in plain.all_messages if m.kind == "response")
    return DemoReport(
        root=root,
        prompt=prompt,
        comparison=compare(plain_meter.requests, meter.requests, budget=budget),
        output=result.output,
        output_without=plain.output,
        tool_calls=calls,
        invariants_clean=not check_invariants(session.messages, persisted=True),
        session_id=session.session_id,
        store=store.url,
        session_path=session_file(store, session.session_id),
        session_roundtrip=roundtrip,
        log_length=head.log_length,
        edits=len(store.edits(session.session_id)),
    )


# ---------------------------------------------------------------------------- replay


@attrs.frozen
class ReplayReport:
    """What ``harness replay`` measured.

    Attributes:
        comparison: Tokens per request with and without the stack.
        recorded_responses: Responses in the recording (the requests a full replay makes).
        invariants_clean: The history replayed with the stack breaks no invariant.
        events: Compaction events of the run with the stack.
        stopped: Where the recording stops mid-turn (:func:`~harness.replay.model.recording_end`),
            or ``None`` when it ends with an answer.
    """

    comparison: Comparison
    recorded_responses: int
    invariants_clean: bool
    events: tuple[CompactionEvent, ...]
    stopped: str | None = None

    @property
    def ok(self) -> bool:
        """Within budget, invariants clean, both runs made the same requests."""
        return not self.comparison.over_budget and self.invariants_clean and self.comparison.unpaired == 0

    def as_json(self) -> dict[str, Any]:
        """A JSON-ready dict of the figures."""
        return {
            **self.comparison.as_json(),
            "recorded_responses": self.recorded_responses,
            "invariants_clean": self.invariants_clean,
            "stopped": self.stopped,
            "ok": self.ok,
        }


async def run_replay(
    history: Sequence[CanonicalMessage],
    *,
    capabilities: Sequence[object],
    budget: int | None,
    on_request: Callable[[str, RequestMeasure], None] | None = None,
    on_event: Callable[[CompactionEvent], None] | None = None,
) -> ReplayReport:
    """Replay ``history`` without the stack, then with it, and compare every request.

    The recording's own system prompt is sent as the agent's system prompt; every user
    turn of the recording is one run, in one session.

    Args:
        history: The recorded conversation.
        capabilities: The stack (built for ``budget``).
        budget: The token budget (reported; requests above it are flagged).
        on_request: Called with ``"without"`` or ``"with"`` and each request's measure.
        on_event: Called with each compaction event of the run with the stack.

    Raises:
        ReplayExhausted: The loop asked for more responses than the recording holds.
    """
    from harness.replay.model import ReplayModel, recording_end, replay_history

    use_structural_digest(capabilities)
    model_name = ReplayModel(history).model_name
    system_prompt = recorded_system_prompt(history)
    measures: dict[str, RequestMeter] = {}
    sessions: dict[str, Session] = {}
    counter = TokenCounter(model_name)  # both meters count with it
    for label, stack in (("without", ()), ("with", capabilities)):

        def report(measure: RequestMeasure, label: str = label) -> None:
            if on_request is not None:
                on_request(label, measure)

        meter = RequestMeter(
            counter,
            on_request=report,
            on_event=on_event if label == "with" else None,
        )
        session, _ = await replay_history(
            history,
            capabilities=stack,
            system_prompt=system_prompt,
            plugin_manager=_manager(meter),
        )
        measures[label] = meter
        sessions[label] = session
    stacked = measures["with"]
    return ReplayReport(
        comparison=compare(measures["without"].requests, stacked.requests, budget=budget),
        recorded_responses=len(ReplayModel(history).responses),
        invariants_clean=not check_invariants(sessions["with"].messages),
        events=tuple(stacked.events),
        stopped=recording_end(history),
    )
