"""A harness error as JSON, so it crosses an engine's process boundary as the same type.

An activity that fails with a :class:`~harness.errors.ModelAuthenticationError` must fail
the workflow, and the client waiting on it, with a ``ModelAuthenticationError`` (a
fallback wrapper in the workflow catches model errors by kind; a caller catches them by
class). Engines carry failures as JSON (Temporal's ``ApplicationError`` details), never
pickle, so :func:`failure_to_json` writes the error's class and the arguments it is
rebuilt from (its ``__reduce__``), and :func:`failure_from_json` rebuilds it, only for
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
    if module.split(".")[0] != "harness" and not module.startswith(_ALLOWED_ROOTS[1]):
        return None
    try:
        reduced = exc.__reduce__()
    except Exception:
        return None
    if not isinstance(reduced, tuple) or len(reduced) < 2 or reduced[0] is not kind:
        return None
    args = list(cast(tuple[Any, ...], reduced[1]))
    if not _jsonable(args):
        return None
    data: dict[str, Any] = {"type": f"{module}:{kind.__qualname__}", "args": args}
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
    module_name, _, qualname = name.partition(":")
    if module_name.split(".")[0] != "harness" and not module_name.startswith(_ALLOWED_ROOTS[1]):
        return None
    try:
        target: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError):
        return None
    if not isinstance(target, type) or not issubclass(target, BaseException):
        return None
    try:
        error = target(*cast(list[Any], args))
    except Exception:
        return None
    for note in fields.get("notes") or ():
        if isinstance(note, str):
            error.add_note(note)
    return error
