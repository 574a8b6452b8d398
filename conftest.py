"""Fixtures shared by the core's and the plugins' test suites."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.testing import corpus_files


def _corpus_ids() -> list[Path]:
    return corpus_files()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize any test taking ``corpus_file`` over the corpus (skipped when absent)."""
    if "corpus_file" in metafunc.fixturenames:
        files = _corpus_ids()
        if files:
            metafunc.parametrize("corpus_file", files, ids=[f.stem for f in files])
        else:
            metafunc.parametrize(
                "corpus_file",
                [pytest.param(None, marks=pytest.mark.skip(reason="../shared/corpus is absent"))],
            )
