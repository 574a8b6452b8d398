"""The scenario's recording model and tools: answers that are a pure function of the request.

Part of :mod:`harness.testing.durable` (import the public names from there).

* :class:`ScenarioModel` finds the run key (``scenario-run=<session id>``, written by the
  scenario's dynamic instructions, its responses and its tool outputs) and the last step
  (the ``call_<n>`` tool-call ids and the ``scenario-step=<n>`` markers) in the request,
  records the arrival, and answers: the next tool call, a final text naming how many tool
  results it saw, or, for a capability's call (no tools offered: the summarizer), a summary.
  The same request gives the same answer in any process.
* :func:`scenario_tools`: ``work(n)`` (idempotent, ``output_bytes`` of text seeded by ``n``)
  and ``send_email(to)`` (``idempotent=False``), both recording their start and end.
"""

from __future__ import annotations

__all__ = [
    "RUN_MARK",
    "STEP_MARK",
    "ScenarioModel",
    "block_forever",
    "run_key_of",
    "scenario_tools",
    "work_output",
]

import asyncio
import hashlib
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from harness.core.messages import (
    CanonicalMessage,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    Usage,
)
from harness.core.model import ModelSettings, ToolDefinition
from harness.testing.durable_record import (
    BLOCKED_FILE,
    REQUESTS_FILE,
    TOOLS_FILE,
    append_record,
    canonical_json,
    next_index,
    request_body,
)
from harness.tools.context import RunContext
from harness.tools.tool import Tool

if TYPE_CHECKING:
    from harness.testing.durable_scenario import Scenario

RUN_MARK: Final = "scenario-run="
"""Prefix of the run key in the scenario's instructions, responses and tool outputs."""
STEP_MARK: Final = "scenario-step="
"""Prefix of the step number in the scenario's responses and summaries."""

_RUN = re.compile(re.escape(RUN_MARK) + r"([A-Za-z0-9_.:-]+)")
_STEP = re.compile(r'"id":"call_(\d+)"|' + re.escape(STEP_MARK) + r"(\d+)")
_WORDS: Final = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
]


def run_key_of(body_text: str) -> str | None:
    """The first run key named in a request body, or ``None``."""
    found = _RUN.search(body_text)
    return found.group(1) if found else None


def _last_step(body_text: str) -> int:
    steps = [int(a or b) for a, b in _STEP.findall(body_text)]
    return max(steps, default=0)


def _tool_results(messages: Sequence[CanonicalMessage]) -> int:
    return sum(
        isinstance(p, ToolReturnPart) or (isinstance(p, RetryPromptPart) and p.answers_tool_call)
        for m in messages
        for p in m.parts
    )


def _claim_block(record_dir: Path, what: dict[str, object]) -> bool:
    """Create the ``blocked`` file; ``False`` when another process (or an earlier one) already did."""
    record_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(record_dir / BLOCKED_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    try:
        os.write(fd, canonical_json({**what, "pid": os.getpid()}) + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


async def block_forever() -> None:
    """Sleep until the process is killed (or the task cancelled)."""
    while True:
        await asyncio.sleep(3600)


class ScenarioModel:
    """The deterministic, recording model of a :class:`~harness.testing.durable.Scenario`.

    Args:
        scenario: The scenario (steps, block points, where to record).
    """

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self._dir = Path(scenario.record_dir)

    @property
    def model_name(self) -> str:
        """``"scenario"``."""
        return "scenario"

    @property
    def context_window(self) -> int | None:
        """A small window (the compaction budgets are absolute token counts)."""
        return 32_000

    def answer(
        self, messages: Sequence[CanonicalMessage], tools: Sequence[ToolDefinition]
    ) -> CanonicalMessage:
        """The response to a request (pure: no recording, no blocking)."""
        body = request_body(messages, tools).decode("ascii")
        run = run_key_of(body)
        step = _last_step(body)
        results = _tool_results(messages)
        if not tools:  # a capability's call: the summarizer
            digest = hashlib.sha256(body.encode("ascii")).hexdigest()[:16]
            text = (
                f"Summary {digest} ({RUN_MARK}{run} {STEP_MARK}{step}): the run called work() "
                f"up to step {step}; {results} tool results were shown to the summarizer."
            )
            return CanonicalMessage.response(TextPart(text))
        nxt = step + 1
        if nxt > self.scenario.steps:
            return CanonicalMessage.response(
                TextPart(f"Done after {self.scenario.steps} steps: saw {results} tool results.")
            )
        if nxt == self.scenario.block_tool and not self.scenario.idempotent:
            call = ToolCallPart(
                tool_call_id=f"call_{nxt}", tool_name="send_email", args={"to": f"user{nxt}@example.com"}
            )
        else:
            call = ToolCallPart(tool_call_id=f"call_{nxt}", tool_name="work", args={"n": nxt})
        return CanonicalMessage.response(TextPart(f"{STEP_MARK}{nxt} {RUN_MARK}{run}"), call)

    async def request(
        self,
        messages: Sequence[CanonicalMessage],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings,
    ) -> CanonicalMessage:
        """Record the arrival (one fsynced JSON line), block at the block point, then answer."""
        body = request_body(messages, tools, settings)
        run = run_key_of(body.decode("ascii"))
        capability = not tools
        index = next_index(self._dir, "requests", run)
        recorded: object = (
            json.loads(body) if self.scenario.record_bodies else {"sha256": hashlib.sha256(body).hexdigest()}
        )
        append_record(
            self._dir,
            REQUESTS_FILE,
            {"run": run, "index": index, "body": recorded, "capability": capability, "pid": os.getpid()},
        )
        if index == self.scenario.block_request and _claim_block(
            self._dir, {"what": "request", "run": run, "index": index}
        ):
            await block_forever()
        response = self.answer(messages, tools)
        return response.replace(
            model_name=self.model_name,
            usage=Usage(request_tokens=len(body) // 4, response_tokens=len(request_body([response])) // 4),
        )


def work_output(run: str | None, n: int, size: int) -> str:
    """The text ``work(n)`` returns: exactly ``size`` ASCII characters, a pure function of its inputs."""
    head = f"{RUN_MARK}{run} work {n}:"
    words: list[str] = [head]
    length = len(head)
    counter = 0
    while length < size:
        digest = hashlib.sha256(f"{n}:{counter}".encode()).digest()
        counter += 1
        for byte in digest:
            word = _WORDS[byte % len(_WORDS)]
            words.append(word)
            length += len(word) + 1
            if length >= size:
                break
    return " ".join(words)[:size]


def scenario_tools(scenario: Scenario) -> list[Tool]:
    """``work`` and ``send_email`` for ``scenario`` (recording, blocking at ``block_tool``)."""
    record_dir = Path(scenario.record_dir)

    async def run_tool(ctx: RunContext, tool: str, result: str) -> str:
        run = ctx.session.session_id if ctx.session is not None else None  # pyright: ignore[reportUnnecessaryComparison]
        call_id = ctx.tool_call_id or ""
        start = {"run": run, "call_id": call_id, "tool": tool, "pid": os.getpid()}
        append_record(record_dir, TOOLS_FILE, {**start, "event": "start"})
        found = re.fullmatch(r"call_(\d+)", call_id)
        if (
            found is not None
            and int(found.group(1)) == scenario.block_tool
            and _claim_block(record_dir, {"what": "tool", "run": run, "call_id": call_id})
        ):
            await block_forever()
        append_record(record_dir, TOOLS_FILE, {**start, "event": "end"})
        return result

    async def work(ctx: RunContext, n: int) -> str:
        """Do step ``n`` of the scenario's work (idempotent).

        Args:
            ctx: The run context (the run key is its session's id).
            n: The step number.
        """
        run = ctx.session.session_id if ctx.session is not None else None  # pyright: ignore[reportUnnecessaryComparison]
        return await run_tool(ctx, "work", work_output(run, n, scenario.output_bytes))

    async def send_email(ctx: RunContext, to: str) -> str:
        """Send an email (not idempotent: never re-run automatically).

        Args:
            ctx: The run context (the run key is its session's id).
            to: The recipient.
        """
        run = ctx.session.session_id if ctx.session is not None else None  # pyright: ignore[reportUnnecessaryComparison]
        return await run_tool(ctx, "send_email", f"{RUN_MARK}{run} sent an email to {to}")

    return [Tool.from_function(work), Tool.from_function(send_email, idempotent=False)]
