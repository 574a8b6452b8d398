"""Read-only JSON containers: what the frozen message classes hold in ``extra``, ``metadata`` and ``data``.

:class:`FrozenDict` and :class:`FrozenList` are subclasses of ``dict`` and ``list`` whose
mutating methods raise ``TypeError``. Being real dicts and lists, they compare equal to
plain ones, pass ``isinstance(value, dict)`` checks, and ``json`` writes them as objects
and arrays at C speed; only the in-place changes are gone. :func:`freeze` builds them,
copying what it is given, so no caller keeps a handle that could change a part in place.

Both are deeply frozen: every mapping inside is a :class:`FrozenDict`, every list a
:class:`FrozenList`, every set a ``frozenset``; tuples keep their type with frozen items.
Strings, numbers, ``bool``, ``None`` and other objects (a ``datetime``...) are kept as they
are. Neither is hashable (their contents are arbitrary JSON): key a cache by ``id()`` with
a ``weakref``, as :mod:`harness.tokens` does. To edit one, build a new value and a new
part: ``replace(part, extra={**part.extra, "id": "x"})``, or :func:`thaw` for nested edits.

Like ``object.__setattr__`` on a frozen ``attrs`` instance, calling ``dict`` or ``list``
methods on the base class directly (``dict.__setitem__(d, k, v)``) bypasses the guard;
nothing in harness does, and nothing else should.
"""

from __future__ import annotations

__all__ = [
    "EMPTY",
    "FrozenDict",
    "FrozenList",
    "content_items",
    "freeze",
    "freeze_mapping",
    "frozen_update_at",
    "refuse_hash",
    "thaw",
]

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, NoReturn, cast


def _read_only(self: object, *_args: object, **_kwargs: object) -> NoReturn:
    raise TypeError(
        f"{type(self).__name__} is read-only: messages and parts are frozen; build a new value "
        "and a new part with replace()"
    )


def refuse_hash(self: object) -> int:
    """The ``__hash__`` of the message classes: they compare by value but are not hashable.

    Raises:
        TypeError: Always, naming the class and what to do instead.
    """
    raise TypeError(
        f"{type(self).__name__} is not hashable: messages, parts and usage compare by value and hold "
        "arbitrary JSON; key a cache by id() with a weakref, as harness.tokens does"
    )


class FrozenDict(dict[str, Any]):
    """A read-only ``dict`` whose values are deeply frozen (see the module docstring).

    ``FrozenDict(mapping_or_pairs, **kwargs)`` accepts what ``dict()`` accepts and freezes a
    copy. ``copy()`` and ``|`` return plain, mutable dicts.
    """

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> FrozenDict:  # noqa: D102 - the class docstring
        return _freeze_dict(dict(*args, **kwargs))

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # filled by __new__; dict.__init__ would refill
        pass

    __setitem__ = _read_only
    __delitem__ = _read_only
    __ior__ = _read_only  # pyright: ignore[reportAssignmentType]
    clear = _read_only
    pop = _read_only  # pyright: ignore[reportAssignmentType]
    popitem = _read_only
    setdefault = _read_only  # pyright: ignore[reportAssignmentType]
    update = _read_only  # pyright: ignore[reportAssignmentType]

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, _memo: object) -> FrozenDict:
        return self


class FrozenList(list[Any]):
    """A read-only ``list`` whose items are deeply frozen (see the module docstring).

    ``FrozenList(iterable)`` freezes a copy. ``copy()``, ``+`` and ``*`` return plain lists.
    """

    __slots__ = ()

    def __new__(cls, iterable: Iterable[Any] = ()) -> FrozenList:  # noqa: D102 - the class docstring
        return _freeze_list(list(iterable))

    def __init__(self, iterable: Iterable[Any] = ()) -> None:  # filled by __new__
        pass

    __setitem__ = _read_only  # pyright: ignore[reportAssignmentType]
    __delitem__ = _read_only  # pyright: ignore[reportAssignmentType]
    __iadd__ = _read_only  # pyright: ignore[reportAssignmentType]
    __imul__ = _read_only  # pyright: ignore[reportAssignmentType]
    append = _read_only
    extend = _read_only
    insert = _read_only
    pop = _read_only
    remove = _read_only
    clear = _read_only
    sort = _read_only  # pyright: ignore[reportAssignmentType]
    reverse = _read_only

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, _memo: object) -> FrozenList:
        return self


# The base classes' own methods, bound once: they fill a new frozen container in place.
_new_dict: Final = dict.__new__
_fill_dict: Final = cast("Callable[[dict[str, Any], Mapping[str, Any]], None]", dict.update)  # pyright: ignore[reportUnknownMemberType]
_set_item: Final = cast("Callable[[dict[str, Any], str, Any], None]", dict.__setitem__)  # pyright: ignore[reportUnknownMemberType]
_new_list: Final = list.__new__
_fill_list: Final = cast("Callable[[list[Any], Iterable[Any]], None]", list.extend)  # pyright: ignore[reportUnknownMemberType]

_KEPT: Final = frozenset({str, int, float, bool, type(None), FrozenDict, FrozenList, frozenset})
"""Types :func:`freeze` returns as they are: immutable scalars and values already frozen."""

EMPTY: Final = _new_dict(FrozenDict)
"""The shared empty :class:`FrozenDict`: the default ``extra`` of every part and message."""


def _freeze_dict(value: Mapping[str, Any]) -> FrozenDict:
    if not value:
        return EMPTY
    out = _new_dict(FrozenDict)
    _fill_dict(out, value)
    kept = _KEPT
    for key, item in out.items():
        if type(item) not in kept:  # same keys: setting them is allowed while iterating
            _set_item(
                out, key, _freeze_dict(cast("dict[str, Any]", item)) if type(item) is dict else freeze(item)
            )
    return out


def _freeze_list(value: Iterable[Any]) -> FrozenList:
    out = _new_list(FrozenList)
    kept = _KEPT
    _fill_list(out, [item if type(item) in kept else freeze(item) for item in value])
    return out


def freeze_mapping(value: Mapping[str, Any] | None) -> FrozenDict:
    """A deeply frozen copy of ``value`` (:data:`EMPTY` for ``None`` or an empty mapping).

    A :class:`FrozenDict` is returned as it is: it is frozen already.
    """
    if type(value) is FrozenDict:
        return value
    if value is None:
        return EMPTY
    return _freeze_dict(value)


def frozen_update_at(base: Mapping[str, Any] | None, key: str, changes: Mapping[str, Any]) -> FrozenDict:
    """A :class:`FrozenDict` of ``base`` whose mapping under ``key`` is updated with ``changes``.

    ``base[key]`` is replaced by a new mapping when it is absent or not a mapping; neither
    ``base`` nor ``changes`` is changed. Cheaper than freezing a merged plain dict (the
    hot path of marking parts): a frozen ``base`` is copied without a walk.
    """
    kept = _KEPT
    inner = _new_dict(FrozenDict)
    if base:
        current = base.get(key)
        if isinstance(current, Mapping) and current:
            mapping = cast("Mapping[str, Any]", current)
            _fill_dict(inner, mapping if type(mapping) is FrozenDict else _freeze_dict(mapping))
    _fill_dict(inner, changes)
    for name, item in changes.items():
        if type(item) not in kept:
            _set_item(inner, name, freeze(item))
    out = _new_dict(FrozenDict)
    if base:
        _fill_dict(out, base if type(base) is FrozenDict else _freeze_dict(base))
    _set_item(out, key, inner)
    return out


def freeze(value: Any) -> Any:
    """A deeply frozen copy of a JSON-like value (see the module docstring for what becomes what)."""
    if type(value) in _KEPT:
        return value
    if type(value) is dict or isinstance(value, Mapping):
        return _freeze_dict(cast("Mapping[str, Any]", value))
    if isinstance(value, list):
        return _freeze_list(cast("list[Any]", value))
    if isinstance(value, tuple):
        items = cast("tuple[Any, ...]", value)
        frozen = tuple(freeze(item) for item in items)
        if all(new is old for new, old in zip(frozen, items, strict=True)):
            return items
        named: Any = type(items)
        return frozen if named is tuple else named(*frozen)  # a named tuple
    if isinstance(value, (set, frozenset)):
        return frozenset(cast("Iterable[Any]", value))
    return value


def thaw(value: Any) -> Any:
    """A deep, mutable copy: every mapping becomes a ``dict``, every list a ``list``.

    Tuples, sets and scalars are kept; use it to edit nested ``metadata`` before building
    a new part.
    """
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in cast("Mapping[str, Any]", value).items()}
    if isinstance(value, list):
        return [thaw(item) for item in cast("list[Any]", value)]
    return value


def content_items(value: Any) -> Any:
    """Prompt content as the wire loader gives it back: a list of items becomes a tuple."""
    return tuple(cast("list[Any]", value)) if type(value) is list else value
