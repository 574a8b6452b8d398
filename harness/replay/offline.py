"""Preparing a replay that runs offline: the recording's system prompt, summaries without a model.

Shared by ``harness replay`` (:mod:`harness.cli.demo.runner`) and ``harness eval``
(:mod:`harness.eval`), so both replay a transcript the same way.
"""

from __future__ import annotations

__all__ = ["recorded_system_prompt", "use_structural_digest"]

from collections.abc import Sequence
from typing import Any

from harness.core.messages import CanonicalMessage, SystemPromptPart


def use_structural_digest(capabilities: Sequence[object]) -> int:
    """Make summarizing capabilities write their summaries with their structural digest.

    A summarizing capability without its own ``summarizer`` or ``model`` asks the agent's
    model for a summary. A replayed or scripted model cannot write one (a replayed model
    would even hand out a recorded response meant for the agent), so for those runs each
    such capability (tiers of a tiered capability included) uses its ``digest``.

    Returns:
        How many capabilities were switched.
    """
    switched = 0
    for capability in capabilities:
        tiers: Any = getattr(capability, "tiers", ())
        if isinstance(tiers, list | tuple):
            switched += use_structural_digest(tiers)  # pyright: ignore[reportUnknownArgumentType]
        digest = getattr(capability, "digest", None)
        if (
            digest is not None
            and hasattr(capability, "summarizer")
            and getattr(capability, "summarizer", None) is None
            and getattr(capability, "model", None) is None
        ):
            capability.summarizer = digest  # pyright: ignore[reportAttributeAccessIssue]
            switched += 1
    return switched


def recorded_system_prompt(history: Sequence[CanonicalMessage]) -> str | None:
    """The system prompt stored in the first message of a recording (the loop strips stored ones)."""
    parts = [p.content for m in history[:1] for p in m.parts if isinstance(p, SystemPromptPart)]
    return "\n\n".join(parts) or None
