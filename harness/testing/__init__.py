"""Helpers for testing harness plugins: corpus discovery (and, in ``strategies``, hypothesis).

``harness.testing.strategies`` needs the ``testing`` extra (``hypothesis``).
"""

from __future__ import annotations

__all__ = ["corpus_dir", "corpus_files"]

import os
from pathlib import Path


def corpus_dir() -> Path | None:
    """Locate the transcript corpus, or return ``None`` when it is absent.

    ``HARNESS_CORPUS`` wins when set; otherwise ``shared/corpus`` beside the checkout
    (``<repo>/../shared/corpus``) is used.
    """
    configured = os.environ.get("HARNESS_CORPUS")
    candidates = [Path(configured)] if configured else []
    candidates.append(Path(__file__).resolve().parents[2].parent / "shared" / "corpus")
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return None


def corpus_files() -> list[Path]:
    """Every transcript file of the corpus (``manifest.json`` excluded), sorted; ``[]`` if absent."""
    directory = corpus_dir()
    if directory is None:
        return []
    return sorted(p for p in directory.glob("*.json") if p.name != "manifest.json")
