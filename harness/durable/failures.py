"""A harness error as JSON, so it crosses an engine's process boundary as the same type.

An activity that fails with a :class:`~harness.errors.ModelAuthenticationError` must fail
the workflow, and the client waiting on it, with a ``ModelAuthenticationError`` (a
fallback wrapper in the workflow catches model errors by kind; a caller catches them by
class). Engines carry failures as JSON (Temporal's ``ApplicationError`` details), never
pickle, so :func:`failure_to_json` writes the error's class, the arguments it is rebuilt
from and its JSON-ready attributes (its ``__reduce__``), and :func:`failure_from_json`
rebuilds it (a JSON list comes back as a tuple; a class whose constructor does not take
its own ``args`` back is rebuilt without calling it, from its arguments and attributes), only for
classes defined in ``harness`` modules or harness plugins (``harness_*``), never an
arbitrary class named by a journal.
"""

from __future__ import annotations

__all__ = ["failure_from_json", "failure_to_json"]

import importlib
import json
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any, Final, cast

_ALLOWED_ROOTS = ("harness", "harness_")
_FORM: Final = "state"
"""The payload's ``"form"``: rebuilt from ``args`` and ``state`` without calling the constructor."""
_PATH_KEY: Final = "$path"


def _allowed(module: str) -> bool:
    """Whether ``module`` is harness's own or a harness plugin's."""
    return module.split(".")[0] == "harness" or module.startswith(_ALLOWED_ROOTS[1])


def _resolve(path: str) -> object:
    module_name, _, qualname = path.partition(":")
    if not _allowed(module_name):
        return None
    try:
        target: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError):
        return None
    return cast(object, target)


def _jsonable(value: object) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def _to_json_value(value: object) -> tuple[bool, object]:
    """``(True, encoded)`` for a JSON value or a path (``{"$path": text}``), else ``(False, None)``."""
    if isinstance(value, PurePath):
        return True, {_PATH_KEY: str(value)}
    if isinstance(value, tuple | list):
        items: tuple[object, ...] = tuple(cast(tuple[object, ...], value))
        if items and all(isinstance(v, PurePath) for v in items):
            return True, [{_PATH_KEY: str(v)} for v in items]
    return (True, cast(object, value)) if _jsonable(cast(object, value)) else (False, None)


def _from_json_value(value: object) -> object:
    if isinstance(value, list):
        return tuple(_from_json_value(v) for v in cast(list[object], value))
    if isinstance(value, Mapping):
        mapping = cast(Mapping[str, object], value)
        if set(mapping) == {_PATH_KEY}:
            text = mapping[_PATH_KEY]
            return Path(text) if isinstance(text, str) else cast(object, mapping)
    return cast(object, value)


def failure_to_json(exc: BaseException) -> dict[str, Any] | None:
    """``{"type", "args", "state", "notes"}`` to rebuild ``exc`` from, or ``None`` if it cannot travel.

    Only errors of harness's own modules travel (``None`` otherwise), and only when their
    ``args`` (the message, for a harness error) are JSON values. ``state`` holds the
    attributes its ``__reduce__`` keeps that are JSON values or paths; the others are left out.
    """
    kind = type(exc)
    module = kind.__module__
    if not _allowed(module):
        return None
    try:
        reduced = exc.__reduce__()
    except Exception:
        return None
    if not isinstance(reduced, tuple) or len(reduced) < 2:
        return None
    args = list(exc.args)
    if not _jsonable(args):
        return None
    data: dict[str, Any] = {"type": f"{module}:{kind.__qualname__}", "args": args, "form": _FORM}
    state: object = reduced[2] if len(reduced) > 2 else None
    if state is None:  # a class with its own __reduce__ (constructor arguments): its attributes
        local: object = getattr(exc, "_process_local", None)
        skip = cast(frozenset[str], local) if isinstance(local, frozenset) else frozenset[str]()
        state = {k: v for k, v in vars(exc).items() if k not in skip}
    if isinstance(state, dict):
        kept: dict[str, object] = {}
        for key, value in cast(dict[object, object], state).items():
            if key == "__notes__":
                continue
            ok, encoded = _to_json_value(value)
            if ok:
                kept[str(key)] = encoded
        if kept:
            data["state"] = kept
    notes: object = getattr(exc, "__notes__", None)
    if isinstance(notes, list):
        texts = [str(note) for note in cast(list[object], notes)]
        if texts:
            data["notes"] = texts
    return data


def _made(target: type[BaseException], fields: Mapping[str, Any], values: list[Any]) -> BaseException | None:
    """``target`` as the payload says it was: its ``args`` set, its ``__init__`` not called."""
    if fields.get("form") == _FORM:
        error = target.__new__(target, *values)
        error.args = tuple(values)
        return error
    # A payload of an earlier release: its "args" are the constructor's arguments.
    call = fields.get("call")
    maker: object = target if call is None else (_resolve(call) if isinstance(call, str) else None)
    if not callable(maker):
        return None
    try:
        made = maker(*values)
    except TypeError:
        if call is not None:
            return None
        made = target.__new__(target, *values)
        made.args = tuple(values)
    except Exception:
        return None
    return made if isinstance(made, target) else None


def failure_from_json(data: object) -> BaseException | None:
    """The error :func:`failure_to_json` wrote, or ``None`` when it cannot be rebuilt here."""
    if not isinstance(data, Mapping):
        return None
    fields = cast(Mapping[str, Any], data)
    name, args = fields.get("type"), fields.get("args")
    if not isinstance(name, str) or not isinstance(args, list):
        return None
    target = _resolve(name)
    if not isinstance(target, type) or not issubclass(target, BaseException):
        return None
    values = [tuple(cast(list[Any], a)) if isinstance(a, list) else a for a in cast(list[Any], args)]
    error = _made(target, fields, values)
    if error is None:
        return None
    state = fields.get("state")
    if isinstance(state, Mapping):
        for key, value in cast(Mapping[str, Any], state).items():
            try:
                setattr(error, key, _from_json_value(value))
            except (AttributeError, TypeError):
                continue
    for note in fields.get("notes") or ():
        if isinstance(note, str):
            error.add_note(note)
    return error
