"""Fast copies of frozen harness objects (``attrs.evolve`` costs several microseconds a call).

Clearing thousands of results at once rebuilds thousands of parts and messages; these
helpers do the same as ``attrs.evolve`` / :func:`harness.messages.with_harness_mark`
through the classes' own constructors (so their validators still run), with the
per-class field lists computed once.
"""

from __future__ import annotations

__all__ = ["evolve", "marked_metadata"]

from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

import attrs

from harness.errors import MessageError
from harness.messages import HARNESS_KEY

_T = TypeVar("_T")
_MAKERS: dict[tuple[type, tuple[str, ...]], Callable[..., Any]] = {}
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
    cls = type(obj)
    names = tuple(sorted(changes))
    maker = _MAKERS.get((cls, names))
    if maker is None:
        maker = _MAKERS[(cls, names)] = _compile(cls, names)
    return maker(obj, **changes)


def marked_metadata(metadata: Any, **mark: Any) -> dict[str, Any]:
    """The metadata :func:`harness.messages.with_harness_mark` would give a part with ``metadata``.

    Raises:
        MessageError: ``metadata`` is set and is not a mapping.
    """
    if metadata is None:
        return {HARNESS_KEY: dict(mark)}
    if not isinstance(metadata, Mapping):
        raise MessageError("cannot mark a part whose metadata is not a mapping")
    existing = cast("Mapping[str, Any]", metadata)
    current: Any = existing.get(HARNESS_KEY)
    merged: dict[str, Any] = dict(existing)
    merged[HARNESS_KEY] = {**current, **mark} if isinstance(current, Mapping) else dict(mark)
    return merged
