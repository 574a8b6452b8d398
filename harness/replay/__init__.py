"""Replay a recorded history through the loop: an application of the agent run."""

from __future__ import annotations

from harness.replay.model import ReplayModel, ReplayTools, replay_history, user_turns
from harness.replay.offline import recorded_system_prompt, use_structural_digest

__all__ = [
    "replay_history",
    "ReplayModel",
    "ReplayTools",
    "recorded_system_prompt",
    "use_structural_digest",
    "user_turns",
]
