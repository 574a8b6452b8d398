"""JsonFileStore passes the store conformance kit (harness.testing.store_conformance)."""

from __future__ import annotations

from pathlib import Path

from harness.stores import store_url
from harness.testing.store_conformance import StoreConformance


class TestJsonFileConformance(StoreConformance):
    opener = "harness.stores:open_store"

    def store_spec(self, tmp_path: Path, name: str) -> str:
        return store_url(tmp_path / name, "file")
