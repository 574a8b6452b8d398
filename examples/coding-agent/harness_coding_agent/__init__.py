"""A small read-only coding agent built only on harness's public API.

Four tools confined to one folder (:class:`CodingTools`), a system prompt and
:func:`build_agent` to assemble them around any model, and :func:`scripted_model`, a
deterministic model that explores the folder offline (what ``harness demo`` runs).
"""

from harness_coding_agent.agent import SYSTEM_PROMPT, build_agent
from harness_coding_agent.scripted import SCRIPTED_MODEL_NAME, ScriptedExplorer, scripted_model
from harness_coding_agent.tools import CodingTools

__all__ = [
    "SCRIPTED_MODEL_NAME",
    "SYSTEM_PROMPT",
    "CodingTools",
    "ScriptedExplorer",
    "build_agent",
    "scripted_model",
]
