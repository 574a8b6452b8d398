"""The three server-side edits, validated and written as the Messages API expects them.

Each edit is configured by a mapping of its fields (Python, a TOML table), ``True`` for the
server's defaults, or a JSON object as text (a ``--stack`` string). Shorthands are accepted
where the API wants a small object: a token count for ``trigger`` / ``clear_at_least``
(``{"type": "input_tokens", "value": n}``), a number of tool uses for ``keep``
(``{"type": "tool_uses", "value": n}``), a number of turns or ``"all"`` for the thinking
``keep`` (``{"type": "thinking_turns", "value": n}``). The API's own objects are accepted
too and sent as given. Field names, types and values follow the ``anthropic`` SDK's
``BetaClearToolUses20250919EditParam``, ``BetaClearThinking20251015EditParam`` and
``BetaCompact20260112EditParam``.
"""

from __future__ import annotations

__all__ = [
    "CLEAR_THINKING",
    "CLEAR_TOOL_USES",
    "COMPACT",
    "COMPACTION_BETA",
    "CONTEXT_MANAGEMENT_BETA",
    "EDIT_FIELDS",
    "EditConfig",
    "build_edit",
]

import difflib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeAlias, cast

CONTEXT_MANAGEMENT_BETA: Final = "context-management-2025-06-27"
"""The ``anthropic-beta`` value context editing (``clear_tool_uses``, ``clear_thinking``) needs."""

COMPACTION_BETA: Final = "compact-2026-01-12"
"""The ``anthropic-beta`` value server-side compaction (``compact_20260112``) needs."""

CLEAR_TOOL_USES: Final = "clear_tool_uses_20250919"
CLEAR_THINKING: Final = "clear_thinking_20251015"
COMPACT: Final = "compact_20260112"

EditConfig: TypeAlias = "Mapping[str, Any] | bool | str | None"
"""How one edit is configured: its fields, ``True`` (server defaults), JSON text, or off."""

_Check = Callable[[str, object], object]


def _count(where: str, value: object, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{where} must be an integer, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{where} must be at least {minimum}, got {value}")
    return value


def _counter(kinds: tuple[str, ...], *, minimum: int) -> _Check:
    """A field that is ``{"type": kind, "value": n}``, or ``n`` for the first kind."""

    def check(where: str, value: object) -> object:
        if not isinstance(value, Mapping):
            return {"type": kinds[0], "value": _count(where, value, minimum=minimum)}
        given = cast(Mapping[str, object], value)
        kind = given.get("type")
        if kind not in kinds:
            expected = " or ".join(repr(k) for k in kinds)
            raise ValueError(f"{where}.type must be {expected}, got {kind!r}")
        extra = sorted(set(given) - {"type", "value"})
        if extra:
            raise ValueError(f"{where}: unknown field {extra[0]!r}; expected 'type' and 'value'")
        return {"type": kind, "value": _count(f"{where}.value", given.get("value"), minimum=minimum)}

    return check


def _names(where: str, value: object) -> list[str]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise TypeError(f"{where} must be a list of tool names, got {type(value).__name__} {value!r}")
    names = list(cast(Sequence[object], value))
    for index, name in enumerate(names):
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"{where}[{index}] must be a tool name, got {name!r}")
    return cast(list[str], names)


def _tool_inputs(where: str, value: object) -> object:
    if isinstance(value, bool):
        return value
    return _names(where, value)


def _thinking_keep(where: str, value: object) -> object:
    if value == "all":
        return "all"
    given = cast(Mapping[str, object], value) if isinstance(value, Mapping) else None
    if given is not None and given.get("type") == "all":
        if len(given) != 1:
            raise ValueError(f"{where}: {{'type': 'all'}} takes no other field")
        return {"type": "all"}
    return _counter(("thinking_turns",), minimum=1)(where, cast(object, value))


def _flag(where: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{where} must be true or false, got {type(value).__name__} {value!r}")
    return value


def _instructions(where: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where} must be a non-blank string, got {value!r}")
    return value


EDIT_FIELDS: Final[Mapping[str, Mapping[str, _Check]]] = {
    "clear_tool_uses": {
        "trigger": _counter(("input_tokens", "tool_uses"), minimum=1),
        "keep": _counter(("tool_uses",), minimum=0),
        "clear_at_least": _counter(("input_tokens",), minimum=1),
        "exclude_tools": _names,
        "clear_tool_inputs": _tool_inputs,
    },
    "clear_thinking": {"keep": _thinking_keep},
    "compaction": {
        "trigger": _counter(("input_tokens",), minimum=1),
        "instructions": _instructions,
        "pause_after_compaction": _flag,
    },
}
"""By parameter, the fields of its edit and how each is checked and written."""

_TYPES: Final = {"clear_tool_uses": CLEAR_TOOL_USES, "clear_thinking": CLEAR_THINKING, "compaction": COMPACT}


def _fields(parameter: str, config: EditConfig) -> Mapping[str, object] | None:
    if config is None or config is False:
        return None
    if config is True:
        return {}
    if isinstance(config, str):
        try:
            parsed: object = json.loads(config)
        except ValueError as exc:
            raise ValueError(f"{parameter} must be a JSON object, got {config!r}: {exc}") from None
        if not isinstance(parsed, dict):
            raise ValueError(f"{parameter} must be a JSON object, got {config!r}")
        return cast(dict[str, object], parsed)
    if not isinstance(config, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(
            f"{parameter} must be a mapping of its fields, true, or a JSON object, "
            f"got {type(config).__name__}"
        )
    return cast(Mapping[str, object], config)


def build_edit(parameter: str, config: EditConfig) -> dict[str, Any] | None:
    """The edit object for parameter ``parameter`` (``"clear_tool_uses"``...), or ``None`` when off.

    Raises:
        ValueError: An unknown field (with the closest known one) or a value out of range;
            the message names the parameter and the field, e.g. ``clear_tool_uses.keep``.
        TypeError: A field or the configuration has the wrong type.
    """
    fields = _fields(parameter, config)
    if fields is None:
        return None
    checks = EDIT_FIELDS[parameter]
    edit: dict[str, Any] = {"type": _TYPES[parameter]}
    for key, value in fields.items():
        if key == "type" and value == _TYPES[parameter]:
            continue
        check = checks.get(key) if isinstance(key, str) else None  # pyright: ignore[reportUnnecessaryIsInstance]
        if check is None:
            close = difflib.get_close_matches(str(key), list(checks), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            known = ", ".join(repr(name) for name in checks)
            raise ValueError(f"{parameter}: unknown field {key!r}{hint} (known fields: {known})")
        if value is None:
            continue
        edit[key] = check(f"{parameter}.{key}", value)
    return edit
