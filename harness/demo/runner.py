"""Replays a recorded session through :class:`~harness.agent.Agent` with a capability stack.

The recorded responses come back from :class:`~harness.models.replay.ReplayModel` and the
recorded tool results from :class:`~harness.models.replay.ReplayTools`, so the loop, its
history preparation, the capabilities and the session file all run for real, offline.
"""

from __future__ import annotations

__all__ = ["DemoReport", "RequestRow", "run_demo"]

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from harness.agent import Agent
from harness.context import CompactionEvent, RequestContext
from harness.history import check_invariants
from harness.markers import hookimpl
from harness.messages import CanonicalMessage, SystemPromptPart
from harness.models.replay import ReplayExhausted, ReplayModel
from harness.session import Session
from harness.tokens import get_token_counter


@attrs.frozen
class RequestRow:
    """What one model request looked like after the capabilities ran."""

    index: int
    messages: int
    tokens: int
    events: tuple[str, ...]


@attrs.frozen
class DemoReport:
    """Figures of one demo run."""

    transcript_tokens: int
    requests: tuple[RequestRow, ...]
    event_count: int
    tokens_saved: int
    invariants_clean: bool
    output: str | None
    session_path: Path
    session_roundtrip: bool

    @property
    def peak_tokens(self) -> int:
        """The largest history sent."""
        return max((row.tokens for row in self.requests), default=0)

    def as_json(self) -> dict[str, Any]:
        """A JSON-ready dict of the figures."""
        data = attrs.asdict(self)
        data["session_path"] = str(self.session_path)
        data["peak_tokens"] = self.peak_tokens
        return data


class _Recorder:
    """Observer plugin: records each request's size and the compaction events before it."""

    def __init__(self) -> None:
        self.rows: list[RequestRow] = []
        self.pending: list[CompactionEvent] = []
        self.events: list[CompactionEvent] = []

    @hookimpl
    def before_model_request(self, ctx: RequestContext) -> None:
        described = tuple(f"{e.strategy}: {e.tokens_before:,}→{e.tokens_after:,}" for e in self.pending)
        self.rows.append(RequestRow(len(self.rows) + 1, len(ctx.messages), ctx.count_tokens(), described))
        self.pending.clear()

    @hookimpl
    def on_compaction(self, ctx: RequestContext, event: CompactionEvent) -> None:
        self.pending.append(event)
        self.events.append(event)


def _system_prompt(history: Sequence[CanonicalMessage]) -> str | None:
    parts = [p.content for m in history[:1] for p in m.parts if isinstance(p, SystemPromptPart)]
    return "\n\n".join(parts) or None


async def run_demo(
    history: Sequence[CanonicalMessage],
    capabilities: Sequence[object],
    *,
    window: int,
    session_dir: Path,
) -> DemoReport:
    """Replay ``history`` through an agent with ``capabilities`` and save the session.

    Every user prompt of the recording starts a run, in order, in one session.
    """
    model = ReplayModel(history, context_window=window)
    recorder = _Recorder()
    agent = Agent(
        model,
        tools=ReplayModel.replay_tools(history),
        capabilities=capabilities,
        system_prompt=_system_prompt(history),
        max_iterations=max(1, len(model.responses) + 1),
    )
    agent.plugin_manager.register(recorder, name="demo_recorder")
    session = Session.create(session_dir, current_model=model.model_name)
    output: str | None = None
    for prompt in ReplayModel.user_prompts(history):
        if model.remaining == 0:
            break
        try:
            result = await agent.run(prompt, session=session)
        except ReplayExhausted:
            # Recordings may stop mid-turn (e.g. right after a final tool result); the loop
            # has already written the history back to the session.
            break
        output = result.output
    path = session.save()
    reloaded = Session.load(path)
    return DemoReport(
        transcript_tokens=get_token_counter().count_messages(history),
        requests=tuple(recorder.rows),
        event_count=len(recorder.events),
        tokens_saved=sum(e.tokens_saved for e in recorder.events),
        invariants_clean=not check_invariants(session.messages, persisted=True),
        output=output,
        session_path=path,
        session_roundtrip=reloaded.messages == session.messages,
    )
