"""Fixtures: a real SDK tracer provider exporting to memory, and a clean content-capture variable."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from harness_otel import CAPTURE_CONTENT_ENV
from harness_otel.testing import SpanRecorder


@pytest.fixture
def spans() -> Iterator[SpanRecorder]:
    recorder = SpanRecorder()
    yield recorder
    recorder.shutdown()


@pytest.fixture(autouse=True)
def _no_capture_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with the content-capture variable unset, whatever the shell has."""
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
