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
from typing import Any, cast

_ALLOWED_ROOTS = ("harness", "harness_")


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


def failure_to_json(exc: BaseException) -> dict[str, Any] | None:
    """``{"type", "args", "notes"}`` to rebuild ``exc`` from, or ``None`` when it cannot travel as JSON.

    Only errors of harness's own modules travel (``None`` otherwise), and only when the
    arguments their ``__reduce__`` names are JSON values.
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
    rebuild: object = reduced[0]
    args = list(cast(tuple[Any, ...], reduced[1]))
    if not _jsonable(args):
        return None
    data: dict[str, Any] = {"type": f"{module}:{kind.__qualname__}", "args": args}
    if rebuild is not kind:  # a module-level rebuilder of harness's own (``__reduce__``)
        owner = getattr(rebuild, "__module__", None) or ""
        name = getattr(rebuild, "__qualname__", None)
        if not callable(rebuild) or not _allowed(owner) or not isinstance(name, str):
            return None
        data["call"] = f"{owner}:{name}"
    state: object = reduced[2] if len(reduced) > 2 else None
    if isinstance(state, dict):
        kept = {
            str(k): v
            for k, v in cast(dict[object, object], state).items()
            if k != "__notes__" and _jsonable(v)
        }
        if kept:
            data["state"] = kept
    notes: object = getattr(exc, "__notes__", None)
    if isinstance(notes, list):
        texts = [str(note) for note in cast(list[object], notes)]
        if texts:
            data["notes"] = texts
    return data


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
    call = fields.get("call")
    maker: object = target if call is None else (_resolve(call) if isinstance(call, str) else None)
    if not callable(maker):
        return None
    values = [tuple(cast(list[Any], a)) if isinstance(a, list) else a for a in cast(list[Any], args)]
    try:
        error = maker(*values)
    except TypeError:
        # A class whose __init__ takes other arguments than the ones it keeps in ``args``
        # (what pickle itself would trip on): rebuild it without calling __init__, as its
        # arguments and attributes say it was.
        if call is not None:
            return None
        error = target.__new__(target, *values)
        error.args = tuple(values)
    except Exception:
        return None
    if not isinstance(error, target):
        return None
    state = fields.get("state")
    if isinstance(state, Mapping):
        for key, value in cast(Mapping[str, Any], state).items():
            restored: Any = tuple(cast(list[Any], value)) if isinstance(value, list) else value
            try:
                setattr(error, key, restored)
            except (AttributeError, TypeError):
                continue
    for note in fields.get("notes") or ():
        if isinstance(note, str):
            error.add_note(note)
    return error
