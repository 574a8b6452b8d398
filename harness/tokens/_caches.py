"""Bounded caches of a token counter (private: use :mod:`harness.tokens`).

:class:`IdentityCache` remembers a number per object, keyed by identity and holding the
object only weakly: an entry goes when its object dies (which also keeps the ``id`` key
valid), and past its limit the oldest entry goes first. :class:`LruCache` remembers a
number per string, least recently used first out.
"""

from __future__ import annotations

__all__ = ["CacheEntry", "IdentityCache", "LruCache"]

import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

_T = TypeVar("_T")


class CacheEntry(weakref.ref[_T]):
    """A weak reference to a counted object, with its ``id`` (the cache key) and its count."""

    __slots__ = ("key", "value")

    key: int
    value: int

    def __new__(cls, obj: _T, callback: Callable[[CacheEntry[_T]], None], value: int) -> CacheEntry[_T]:
        entry = super().__new__(cls, obj, callback)
        entry.key = id(obj)
        entry.value = value
        return entry

    def __init__(self, obj: _T, callback: Callable[[CacheEntry[_T]], None], value: int) -> None:
        super().__init__(obj, callback)  # pyright: ignore[reportCallIssue]


class IdentityCache(Generic[_T]):
    """A count per object, by identity; weak in its objects and at most ``limit`` entries.

    Hot loops may read :attr:`entries` directly: an entry ``e`` found under ``id(obj)`` is
    valid when ``e() is obj``.

    Args:
        limit: The most entries kept; the oldest stored goes first.
    """

    __slots__ = ("__weakref__", "_forget", "entries", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.entries: OrderedDict[int, CacheEntry[_T]] = OrderedDict()
        this = weakref.ref(self)  # the callback must not keep the cache alive

        def forget(entry: CacheEntry[_T]) -> None:
            cache = this()
            if cache is not None and cache.entries.get(entry.key) is entry:
                cache.entries.pop(entry.key, None)

        self._forget = forget

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, obj: _T) -> int | None:
        """Return the count stored for ``obj`` (this very object), or ``None``."""
        entry = self.entries.get(id(obj))
        if entry is not None and entry() is obj:
            return entry.value
        return None

    def put(self, obj: _T, value: int) -> None:
        """Store ``value`` for ``obj``, evicting the oldest entry past the limit."""
        entries = self.entries
        entries[id(obj)] = CacheEntry(obj, self._forget, value)
        while len(entries) > self.limit:
            try:
                entries.popitem(last=False)
            except KeyError:  # pragma: no cover - emptied by another thread
                break

    def clear(self) -> None:
        """Forget every entry."""
        self.entries.clear()


class LruCache:
    """A count per string, at most ``limit`` entries, least recently used first out.

    Args:
        limit: The most entries kept.
    """

    __slots__ = ("entries", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.entries: OrderedDict[str, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, key: str) -> int | None:
        """Return the count stored for ``key`` (marking it recently used), or ``None``."""
        entries = self.entries
        value = entries.pop(key, None)
        if value is not None:
            entries[key] = value  # re-inserted last: the most recently used
        return value

    def put(self, key: str, value: int) -> None:
        """Store ``value`` for ``key``, evicting the least recently used entry past the limit."""
        entries = self.entries
        entries[key] = value
        while len(entries) > self.limit:
            try:
                entries.popitem(last=False)
            except KeyError:  # pragma: no cover - emptied by another thread
                break

    def clear(self) -> None:
        """Forget every entry."""
        self.entries.clear()
