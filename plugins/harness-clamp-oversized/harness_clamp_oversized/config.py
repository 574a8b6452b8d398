"""Validating :class:`~harness_clamp_oversized.ClampOversizedMessages` parameters.

Every check raises :class:`ValueError` whose message starts with the parameter's name, so
a stack built from configuration (``--stack``, ``harness.toml``) names it too.
"""

from __future__ import annotations

__all__ = [
    "MIN_LIMIT",
    "check_bool",
    "check_fraction",
    "check_limit",
    "check_non_negative",
    "per_tool_limits",
]

from collections.abc import Iterable, Mapping
from typing import Final, cast

from harness.core import FrozenDict

MIN_LIMIT: Final = 64
"""The smallest token limit accepted: room for the marker and a little text on each side."""

_NONE_WORDS: Final = frozenset({"none", "null", "never", "off"})


def check_limit(name: str, value: object) -> int:
    """``value`` as a token limit (an integer of at least :data:`MIN_LIMIT`).

    Raises:
        ValueError: It is not an integer, or is below the minimum.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer number of tokens, got {value!r}.")
    if value < MIN_LIMIT:
        raise ValueError(f"{name} must be at least {MIN_LIMIT} tokens (the marker needs room), got {value}.")
    return value


def check_non_negative(name: str, value: object) -> int:
    """``value`` as a non-negative integer.

    Raises:
        ValueError: It is not an integer, or is negative.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}.")
    if value < 0:
        raise ValueError(f"{name} must be 0 or more, got {value}.")
    return value


def check_fraction(name: str, value: object) -> float:
    """``value`` as a fraction in ``[0, 1]``.

    Raises:
        ValueError: It is not a number, or is outside ``[0, 1]``.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number between 0 and 1, got {value!r}.")
    number = float(value)
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"{name} must be between 0 and 1, got {value!r}.")
    return number


def check_bool(name: str, value: object) -> bool:
    """``value`` when it is ``True`` or ``False``.

    Raises:
        ValueError: It is anything else.
    """
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}.")
    return value


def _limit_from_text(tool: str, text: str) -> int | None:
    stripped = text.strip()
    if stripped.lower() in _NONE_WORDS:
        return None
    try:
        number = int(stripped.replace("_", ""))
    except ValueError:
        raise ValueError(f"per_tool[{tool!r}] must be a token limit or none, got {text!r}.") from None
    return check_limit(f"per_tool[{tool!r}]", number)


def per_tool_limits(value: Mapping[str, int | None] | Iterable[str] | str) -> Mapping[str, int | None]:
    """Per-tool limits from a mapping (``{"bash": 4000, "read_file": None}``) or stack-string items.

    A stack string cannot hold a mapping, so ``per_tool=bash:4000|read_file:none`` (items
    ``"tool:limit"``, ``none`` meaning never clamp) is accepted too.

    Raises:
        ValueError: A malformed item, an empty tool name, or a limit that is neither
            ``None`` nor a valid token limit; the message names ``per_tool`` and the tool.
    """
    given = cast(object, value)
    limits: dict[str, int | None] = {}
    if isinstance(given, Mapping):
        for tool, limit in cast(Mapping[object, object], given).items():
            if not isinstance(tool, str) or not tool:
                raise ValueError(f"per_tool keys must be tool names (non-empty strings), got {tool!r}.")
            if isinstance(limit, str):
                limits[tool] = _limit_from_text(tool, limit)
            else:
                limits[tool] = None if limit is None else check_limit(f"per_tool[{tool!r}]", limit)
        return FrozenDict(limits)
    items: Iterable[object] = [given] if isinstance(given, str) else cast(Iterable[object], given)
    if not isinstance(items, Iterable):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ValueError(
            f"per_tool must map tool names to token limits, e.g. {{'bash': 4000, 'read_file': None}}, "
            f"got {given!r}."
        )
    for item in items:
        tool, colon, limit_text = item.rpartition(":") if isinstance(item, str) else ("", "", "")
        if not colon or not tool.strip():
            raise ValueError(
                f"per_tool items must be 'tool:limit' (e.g. bash:4000 or read_file:none), got {item!r}."
            )
        limits[tool.strip()] = _limit_from_text(tool.strip(), limit_text)
    return FrozenDict(limits)
