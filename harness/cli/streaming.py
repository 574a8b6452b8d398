"""``harness run`` prints the model's text as it streams (``Agent.run_stream``)."""

from __future__ import annotations

__all__ = ["StreamedRun", "stream_run"]

from collections.abc import Mapping
from typing import TYPE_CHECKING

import attrs

from harness.cli._app import console
from harness.core.streaming import TextDelta
from harness.run.events import RequestFinished

if TYPE_CHECKING:
    from harness.run.agent import Agent
    from harness.run.result import RunResult
    from harness.session import Session


@attrs.frozen
class StreamedRun:
    """A run whose text was printed as it arrived.

    Attributes:
        result: What ``Agent.run`` would have returned.
        printed: Whether any text was printed (the caller then does not print the output again).
    """

    result: RunResult
    printed: bool


async def stream_run(
    agent: Agent,
    prompt: str | None,
    session: Session,
    approvals: Mapping[str, object] | None,
    *,
    label: str,
) -> StreamedRun:
    """Run ``prompt``, printing each response's text as it streams, after ``label:``.

    Tool calls and compactions are printed by the command's observer plugin as they
    happen, between the responses' lines.
    """
    out = console()
    printed = False
    open_line = False
    async with agent.run_stream(prompt, session=session, approvals=approvals) as stream:
        async for event in stream:
            if isinstance(event, TextDelta) and event.text:
                if not open_line:
                    out.print(f"[bold]{label}:[/bold] ", end="", markup=True, highlight=False)
                    open_line = True
                out.print(event.text, end="", markup=False, highlight=False, soft_wrap=True)
                printed = True
            elif isinstance(event, RequestFinished) and open_line:
                out.print()
                open_line = False
    if open_line:  # pragma: no cover - a run always ends with RequestFinished before RunFinished
        out.print()
    return StreamedRun(stream.result, printed)
