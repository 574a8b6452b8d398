"""Replay a recorded history through the loop: an application of the agent run."""

from __future__ import annotations

from harness.replay.model import ReplayModel, ReplayTools, replay_history, user_turns

__all__ = [
    "replay_history",
    "ReplayModel",
    "ReplayTools",
    "user_turns",
]
