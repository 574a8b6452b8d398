"""Build what is sent: the system prompt and instructions in front, request-scoped parts last.

Neither the system prompt nor the dynamic instructions are ever stored in the history;
they are rebuilt for every request from the run's settings.
"""

from __future__ import annotations

__all__ = ["build_outgoing", "system_parts"]

import inspect
from collections.abc import Sequence

from harness.core.messages import CanonicalMessage, Part, SystemPromptPart
from harness.run.settings import RunSettings
from harness.tools.context import RunContext


def build_outgoing(
    history: Sequence[CanonicalMessage],
    system: Sequence[SystemPromptPart],
    request_scoped: Sequence[Part],
) -> list[CanonicalMessage]:
    """Return the message list to send: system parts up front, request-scoped parts last.

    Only the first and the last message are rebuilt; every other message is the same
    object as in ``history`` (one O(n) list copy of references).
    """
    out = list(history)
    if system:
        if out and out[0].kind == "request":
            out[0] = out[0].replace(parts=(*system, *out[0].parts))
        else:
            out.insert(0, CanonicalMessage.request(*system))
    if request_scoped and out:
        last = out[-1]
        out[-1] = last.replace(parts=(*last.parts, *request_scoped))
    return out


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
