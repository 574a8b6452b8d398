"""harness's pytest plugin (entry point ``pytest11``): fixtures for plugin authors."""

from __future__ import annotations

__all__: list[str] = []
