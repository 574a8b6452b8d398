"""PostgresStore passes harness's store conformance kit (one fresh schema per store the kit makes)."""

from __future__ import annotations

from pathlib import Path

from harness_postgres.testing import drop_schema, require_server, schema_url, unique_schema

from harness.testing.store_conformance import StoreConformance


class TestPostgresConformance(StoreConformance):
    """Every store opens as ``harness.open_store`` does (the entry point's ``resolve_store``)."""

    def store_spec(self, tmp_path: Path, name: str) -> str:
        return schema_url(require_server(), unique_schema(f"harness_conf_{name}"))

    def cleanup_spec(self, spec: str) -> None:
        drop_schema(require_server(), spec.rpartition("schema=")[2])
