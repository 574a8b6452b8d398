"""The stores a worker knows, and the store a journaled run's reference names.

A run's input names its store by a :class:`~harness.durable.spec.StoreReference`, never by
a credential. A worker resolves it from its own configuration, a :class:`StoreDirectory`:

* ``--store NAME=URL`` (repeatable) names a store; ``--store URL`` and ``HARNESS_STORE``
  give the default store, named ``default``;
* a reference by name is looked up; a reference by URL (credentials stripped) is matched
  against the configured stores with the same URL once stripped, so the worker's own
  password is used, and otherwise opened as it is (libpq then reads ``PGPASSWORD`` or
  ``~/.pgpass``).

The directory returns a :class:`~harness.redaction.MaskedURL`: the engine opens it
(``harness.open_store(url.reveal())``) and shows it only masked.
"""

from __future__ import annotations

__all__ = ["DEFAULT_STORE_NAME", "StoreDirectory"]

import os
from collections.abc import Iterable, Iterator, Mapping

from harness.durable.spec import StoreReference
from harness.errors import StoreResolutionError
from harness.redaction import MaskedURL

DEFAULT_STORE_NAME = "default"
"""The name of the store ``--store URL`` (no name) and ``HARNESS_STORE`` configure."""

_STORE_ENV = "HARNESS_STORE"


class StoreDirectory:
    """A worker's stores by name (see the module).

    Args:
        stores: Store URLs by name.
    """

    def __init__(self, stores: Mapping[str, str | MaskedURL] | None = None) -> None:
        self._stores: dict[str, MaskedURL] = {name: MaskedURL(url) for name, url in (stores or {}).items()}

    @classmethod
    def from_options(
        cls, options: Iterable[str] = (), *, environ: Mapping[str, str] | None = None
    ) -> StoreDirectory:
        """The directory a worker's ``--store [NAME=]URL`` options and ``HARNESS_STORE`` give.

        Raises:
            StoreResolutionError: An option names no URL, or one name twice.
        """
        env = os.environ if environ is None else environ
        stores: dict[str, str] = {}
        configured = env.get(_STORE_ENV, "").strip()
        if configured:
            stores[DEFAULT_STORE_NAME] = configured
        seen: set[str] = set()
        for option in options:
            name, url = _split_option(option)
            if name in seen:
                raise StoreResolutionError(MaskedURL(url), f"the store name {name!r} is given twice")
            seen.add(name)
            stores[name] = url
        return cls(stores)

    def with_store(self, name: str, url: str | MaskedURL) -> StoreDirectory:
        """A copy of this directory with ``name`` (re)defined as ``url``."""
        return StoreDirectory({**self._stores, name: url})

    def __contains__(self, name: object) -> bool:
        return name in self._stores

    def __iter__(self) -> Iterator[str]:
        return iter(self._stores)

    def __len__(self) -> int:
        return len(self._stores)

    def url(self, name: str) -> MaskedURL | None:
        """The URL configured for ``name``."""
        return self._stores.get(name)

    def resolve(self, reference: StoreReference) -> MaskedURL:
        """The URL to open for a run's store reference.

        Raises:
            StoreResolutionError: The reference names a store this worker does not know.
        """
        if reference.name is not None:
            found = self._stores.get(reference.name)
            if found is None:
                known = ", ".join(sorted(self._stores)) or "none"
                raise StoreResolutionError(
                    f"@{reference.name}",
                    f"this worker knows no store named {reference.name!r} (it knows: {known}); start it "
                    f"with --store {reference.name}=URL",
                )
            return found
        url = reference.url or ""
        for configured in self._stores.values():
            if configured.stripped() == url:
                return configured
        return MaskedURL(url)

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={url.masked}" for name, url in self._stores.items())
        return f"StoreDirectory({inner})"


def _split_option(option: str) -> tuple[str, str]:
    """``(name, url)`` of a ``--store [NAME=]URL`` option."""
    text = option.strip()
    head, sep, tail = text.partition("=")
    tail = tail.strip()
    looks_like_url = "://" in tail or tail.startswith(("sqlite:", "file:", "/", "."))
    if sep and head.isidentifier() and looks_like_url:  # "host=db user=app" is a libpq string, not a name
        name, url = head, tail
    else:
        name, url = DEFAULT_STORE_NAME, text
    if not url:
        raise StoreResolutionError(text, "the --store option names no URL")
    return name, url
