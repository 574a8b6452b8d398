"""The searchable text of a wire-format message (what ``search`` and ``recall`` look at)."""

from __future__ import annotations

__all__ = ["searchable_text"]

import contextlib
import json
from collections.abc import Mapping
from typing import Any

_TEXT_KEYS = ("content", "args")


def _flatten(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, Mapping):
        for item in value.values():  # pyright: ignore[reportUnknownVariableType]
            _flatten(item, out)
    elif isinstance(value, list | tuple):
        for item in value:  # pyright: ignore[reportUnknownVariableType]
            _flatten(item, out)
    elif value is not None and not isinstance(value, bool):
        out.append(str(value))


def searchable_text(message: Mapping[str, Any]) -> str:
    """Prompts, answers, thinking, tool names, arguments and results of one wire message.

    A deterministic function of the message's JSON object: stores index this text and can
    recompute it from a stored body.
    """
    out: list[str] = []
    parts = message.get("parts")
    if not isinstance(parts, list):
        return ""
    for part in parts:  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(part, Mapping):
            continue
        data: Mapping[str, Any] = part  # pyright: ignore[reportUnknownVariableType]
        name = data.get("tool_name")
        if isinstance(name, str):
            out.append(name)
        for key in _TEXT_KEYS:
            value = data.get(key)
            if isinstance(value, str) and key == "args":
                with contextlib.suppress(ValueError):
                    value = json.loads(value)
            _flatten(value, out)
    return "\n".join(out)
