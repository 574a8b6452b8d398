"""Fast copies of frozen attrs objects (``attrs.evolve`` costs several microseconds a call).

Capabilities that clear thousands of results at once rebuild thousands of parts and
messages. :func:`evolve` does what ``attrs.evolve`` does through the class's own
constructor (so validators and converters still run), with a small constructor wrapper
compiled once per class and set of changed fields. Used by :func:`harness.core.messages.replace`.
"""

from __future__ import annotations

__all__ = ["MAKERS", "evolve"]

from collections.abc import Callable
from typing import Any, TypeVar

import attrs

_T = TypeVar("_T")
MAKERS: dict[tuple[object, ...], Callable[..., Any]] = {}
"""Compiled copy functions by ``(class, *changed field names)``; read directly by hot paths."""
_FIELDS: dict[type, tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]] = {}


def _fields(cls: type) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    cached = _FIELDS.get(cls)
    if cached is None:
        positional: list[tuple[str, str]] = []
        keyword: list[tuple[str, str]] = []
        for field in attrs.fields(cls):
            if not field.init:
                continue
            alias = field.alias or field.name
            (keyword if field.kw_only else positional).append((field.name, alias))
        cached = _FIELDS[cls] = (tuple(positional), tuple(keyword))
    return cached


def _compile(cls: type, names: tuple[str, ...]) -> Callable[..., Any]:
    positional, keyword = _fields(cls)
    known = {name for name, _alias in positional + keyword}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise TypeError(f"{cls.__name__} has no init field(s) {', '.join(unknown)}")
    args = [name if name in names else f"o.{name}" for name, _alias in positional]
    args += [f"{alias}={name if name in names else 'o.' + name}" for name, alias in keyword]
    source = f"def make(o, {', '.join(names)}):\n    return cls({', '.join(args)})\n"
    namespace: dict[str, Any] = {"cls": cls}
    exec(source, namespace)  # field names are identifiers, as attrs itself generates code
    return namespace["make"]


def evolve(obj: _T, **changes: Any) -> _T:
    """Return a copy of the attrs instance ``obj`` with ``changes`` applied (like ``attrs.evolve``).

    The constructor is called with every field, so validators and converters run.

    Raises:
        TypeError: A name in ``changes`` is not an init field of ``type(obj)``.
    """
    key = (type(obj), *changes)  # keyword order is stable per call site: no sorting needed
    maker = MAKERS.get(key)
    if maker is None:
        maker = MAKERS[key] = _compile(type(obj), tuple(changes))
    return maker(obj, *changes.values())
