"""``resolve_store`` failures: a store's own errors pass through open_store, others name the plugin."""

from __future__ import annotations

import pytest

from harness.errors import CapabilityError, SessionStoreError, StoreResolutionError
from harness.hooks import PluginManager, hookimpl
from harness.stores import open_store


class Raises:
    """A store plugin whose ``resolve_store`` raises ``error`` for ``demo://`` URLs."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    @hookimpl
    def resolve_store(self, url: str) -> object:
        if url.startswith("demo://"):
            raise self.error
        return None


@pytest.mark.parametrize(
    "error",
    [
        SessionStoreError("demo://db", "cannot connect: refused"),
        StoreResolutionError("demo://db", "bad schema"),
    ],
)
def test_a_store_error_propagates_unchanged(error: Exception) -> None:
    pm = PluginManager()
    pm.register(Raises(error), name="demo_store")
    with pytest.raises(type(error)) as caught:
        open_store("demo://db", plugin_manager=pm)
    assert caught.value is error


def test_any_other_exception_names_the_plugin() -> None:
    pm = PluginManager()
    pm.register(Raises(RuntimeError("boom")), name="demo_store")
    with pytest.raises(
        CapabilityError, match="'demo_store': resolve_store raised RuntimeError: boom"
    ) as caught:
        open_store("demo://db", plugin_manager=pm)
    assert isinstance(caught.value.__cause__, RuntimeError)


def test_other_urls_still_reach_the_built_in_stores() -> None:
    pm = PluginManager()
    pm.register(Raises(RuntimeError("never")), name="demo_store")
    store = open_store("sqlite:///:memory:", plugin_manager=pm)
    try:
        assert store.list_sessions() == []
    finally:
        store.close()
