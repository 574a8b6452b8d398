"""Fixtures of the harness.hooks tests: the entry-point fixture distributions."""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import harness.hooks.entrypoints as entrypoints_module

FIXTURES = Path(__file__).parent / "fixtures" / "entrypoints"
"""The fixture distributions (see ``fixtures/entrypoints/README.md``)."""


@pytest.fixture
def fixture_dists(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Make the fixture distributions the only ones entry-point discovery sees.

    The allow and block variables are unset, and the "warn once" memory of
    :class:`~harness.errors.UnknownPluginNameWarning` starts empty.
    """
    monkeypatch.syspath_prepend(str(FIXTURES))
    monkeypatch.delenv(entrypoints_module.LOAD_ENV, raising=False)
    monkeypatch.delenv(entrypoints_module.DISABLE_ENV, raising=False)
    monkeypatch.setattr(entrypoints_module, "_warned_entries", set[tuple[str, str]]())

    def only_fixtures(*, group: str) -> importlib.metadata.EntryPoints:
        found = [
            ep
            for dist in importlib.metadata.distributions(path=[str(FIXTURES)])
            for ep in dist.entry_points
            if ep.group == group
        ]
        return importlib.metadata.EntryPoints(found)

    monkeypatch.setattr(importlib.metadata, "entry_points", only_fixtures)
    yield
    for module in list(sys.modules):
        if module.startswith(("harness_fixture_good", "harness_fixture_broken")):
            del sys.modules[module]
