"""Build what is sent: the system prompt and instructions in front, request-scoped parts last.

Neither the system prompt nor the dynamic instructions are ever stored in the history;
they are rebuilt for every request from the run's settings.
"""

from __future__ import annotations

__all__ = ["build_outgoing", "system_parts"]

import inspect

from harness.core.effects import build_outgoing
from harness.core.messages import SystemPromptPart
from harness.run.settings import RunSettings
from harness.tools.context import RunContext


async def system_parts(settings: RunSettings, run: RunContext) -> list[SystemPromptPart]:
    """The static system prompt, then the dynamic instructions evaluated for this request."""
    parts: list[SystemPromptPart] = []
    if settings.system_prompt:
        parts.append(SystemPromptPart(settings.system_prompt))
    if settings.instructions is not None:
        text = settings.instructions(run)
        if inspect.isawaitable(text):
            text = await text
        if text:
            parts.append(SystemPromptPart(str(text), dynamic_ref="instructions"))
    return parts
