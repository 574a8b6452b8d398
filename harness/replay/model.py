"""``ReplayModel``: re-run a recorded history through the loop.

The model answers with the recorded responses in order; :class:`ReplayTools` (or
:meth:`ReplayModel.replay_tools`) answers each tool call with the recorded return of the
same ``tool_call_id``, so a real transcript can be replayed with capabilities enabled and
their effect on the history observed without a provider.
"""

from __future__ import annotations

from harness.errors import ReplayExhausted

__all__ = [
    "NO_RECORDED_RESULT",
    "ReplayExhausted",
    "ReplayModel",
    "ReplayTools",
    "recording_end",
    "replay_history",
    "user_turns",
]

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from harness.core.messages import (
    CanonicalMessage,
    RetryPromptPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from harness.core.model import ModelSettings, ToolDefinition
from harness.errors import ToolRetry
from harness.tools.context import RunContext
from harness.tools.tool import Tool

if TYPE_CHECKING:
    from harness.run.agent import RunResult
    from harness.session import Session


NO_RECORDED_RESULT = "[no recorded result]"
"""What :class:`ReplayTools` answers a call the recording has no answer for."""


class ReplayModel:
    """Replays the responses of a recorded history, in order.

    Args:
        history: The recorded history; only its responses are used.
        model_name: Name to report (default: the first recorded response's model name).
        context_window: The context window to report.
    """

    def __init__(
        self,
        history: Sequence[CanonicalMessage],
        *,
        model_name: str | None = None,
        context_window: int | None = None,
    ) -> None:
        self.responses = [m for m in history if m.kind == "response"]
        recorded_name = next((m.model_name for m in self.responses if m.model_name), None)
        self._model_name = model_name or recorded_name or "replay"
        self._context_window = context_window
        self.position = 0

    @property
    def model_name(self) -> str:
        """The model's name."""
        return self._model_name

    @property
    def context_window(self) -> int | None:
        """The configured context window."""
        return self._context_window

    @property
    def remaining(self) -> int:
        """Responses not yet replayed."""
        return len(self.responses) - self.position

    async def request(
        self,
        messages: Sequence[CanonicalMessage],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings,
    ) -> CanonicalMessage:
        """Return the next recorded response.

        Raises:
            ReplayExhausted: Every recorded response was already replayed.
        """
        if self.position >= len(self.responses):
            raise ReplayExhausted(
                f"ReplayModel: all {len(self.responses)} recorded responses were replayed; "
                f"request {self.position + 1} has no recorded answer"
            )
        response = self.responses[self.position]
        self.position += 1
        return response

    @staticmethod
    def replay_tools(history: Sequence[CanonicalMessage]) -> list[Tool]:
        """Tools answering each recorded call with its recorded result (see :class:`ReplayTools`)."""
        return ReplayTools(history).tools()

    @staticmethod
    def user_prompts(history: Sequence[CanonicalMessage]) -> list[str]:
        """The user prompts of a recorded history, in order (the runs to replay)."""
        return [
            part.text
            for message in history
            if message.kind == "request"
            for part in message.parts
            if isinstance(part, UserPromptPart)
        ]


class ReplayTools:
    """Answers replayed tool calls with the recorded results, matched by ``tool_call_id``.

    A recorded ``RetryPromptPart`` is replayed as :class:`~harness.errors.ToolRetry`; a
    call with no recorded answer returns :data:`NO_RECORDED_RESULT`.
    """

    def __init__(self, history: Sequence[CanonicalMessage]) -> None:
        self.answers: dict[str, ToolReturnPart | RetryPromptPart] = {}
        self.names: list[str] = []
        for message in history:
            for part in message.parts:
                if isinstance(part, ToolCallPart) and part.tool_name not in self.names:
                    self.names.append(part.tool_name)
                elif isinstance(part, ToolReturnPart) or (
                    isinstance(part, RetryPromptPart) and part.answers_tool_call and part.tool_call_id
                ):
                    assert part.tool_call_id is not None
                    self.answers.setdefault(part.tool_call_id, part)

    def answer(self, tool_call_id: str | None) -> Any:
        """Return the recorded result of ``tool_call_id``.

        Raises:
            ToolRetry: The recorded answer was a retry prompt.
        """
        recorded = self.answers.get(tool_call_id or "")
        if recorded is None:
            return NO_RECORDED_RESULT
        if isinstance(recorded, RetryPromptPart):
            content = recorded.content
            raise ToolRetry(content if isinstance(content, str) else str(content), hint=False)
        return recorded.content

    def tools(self) -> list[Tool]:
        """One permissive tool per recorded tool name."""

        def make(name: str) -> Tool:
            def replay(ctx: RunContext, **_: Any) -> Any:
                return self.answer(ctx.tool_call_id)

            return Tool(
                name=name,
                description=f"Replays recorded results of {name!r}.",
                function=replay,
                parameters_json_schema={"type": "object", "additionalProperties": True},
                takes_ctx=True,
            )

        return [make(name) for name in self.names]


def user_turns(history: Sequence[CanonicalMessage]) -> list[str]:
    """One prompt per request that holds user prompts (their texts joined by newlines)."""
    turns: list[str] = []
    for message in history:
        if message.kind != "request":
            continue
        texts = [p.text for p in message.parts if isinstance(p, UserPromptPart)]
        if texts:
            turns.append("\n".join(texts))
    return turns


def recording_end(history: Sequence[CanonicalMessage]) -> str | None:
    """Where a recording stops in the middle of a turn, in one line; ``None`` when it ends with an answer.

    A crashed or cut-off agent leaves a recording that ends with a request (a tool result
    or a prompt) no response answers, or with a response whose tool calls nothing
    answers. :func:`replay_history` replays such a recording up to its last recorded
    response, and this says where that is.
    """
    if not history:
        return None
    responses = sum(1 for m in history if m.kind == "response")
    where = f"message {len(history)} of {len(history)}"
    last = history[-1]
    if last.kind == "request":
        return (
            f"the recording ends with a request no response answers ({where}): "
            f"replayed up to its last recorded response ({responses} of {responses})"
        )
    answered = {
        p.tool_call_id
        for m in history
        for p in m.parts
        if isinstance(p, ToolReturnPart) or (isinstance(p, RetryPromptPart) and p.answers_tool_call)
    }
    unanswered = [c for c in last.tool_calls if c.tool_call_id not in answered]
    if not unanswered:
        return None
    calls = ", ".join(f"{c.tool_name} ({c.tool_call_id})" for c in unanswered)
    return (
        f"the recording ends with {len(unanswered)} unanswered tool call(s) in its last response "
        f"({where}, response {responses} of {responses}): {calls}; replayed up to that response, "
        f"the calls answered {NO_RECORDED_RESULT!r}"
    )


async def replay_history(
    history: Sequence[CanonicalMessage],
    *,
    capabilities: Sequence[object] = (),
    session: Session | None = None,
    **agent_options: Any,
) -> tuple[Session, list[RunResult]]:
    """Re-run a recorded history through the loop, one run per user turn.

    The model replays the recorded responses, the tools replay the recorded results, and
    ``capabilities`` act on the history as they would live, so their effect on a real
    transcript can be inspected. Fallback parsing is off unless ``agent_options`` turns
    it on (recorded text must not turn into new calls).

    A recording that stops in the middle of a turn (:func:`recording_end` says where: a
    request no response answers, or unanswered tool calls, what a crashed agent leaves)
    is replayed up to its last recorded response; the session then ends with the request
    the recording has no answer to, and that turn has no result.

    Returns:
        The session holding the replayed history, and the result of every run that ended.

    Raises:
        ReplayExhausted: The loop asked for more responses than were recorded before the
            recording's end (for example because a capability changed what the model
            would have been asked).
    """
    from harness.run.agent import Agent
    from harness.session import Session

    options: dict[str, Any] = {"fallback_tool_calls": False, "max_iterations": 10_000, **agent_options}
    model = ReplayModel(history)
    agent = Agent(
        model,
        tools=ReplayModel.replay_tools(history),
        capabilities=capabilities,
        **options,
    )
    target = session if session is not None else Session()
    results: list[RunResult] = []
    turns = user_turns(history)
    stops_mid_turn = recording_end(history) is not None
    for index, prompt in enumerate(turns):
        try:
            results.append(await agent.run(prompt, session=target))
        except ReplayExhausted:
            # A recording that stops mid-turn (after a tool result, or on unanswered calls)
            # ends the replay here: the loop has saved the history, ending with that request.
            if not (stops_mid_turn and index == len(turns) - 1 and model.remaining == 0):
                raise
    return target, results
