"""A small read-only coding agent built only on harness's public API."""

__all__: list[str] = []
