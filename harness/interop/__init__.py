"""Bridges between harness and other agent frameworks.

Each bridge lives in its own submodule and imports its framework only when that
submodule is imported, so ``import harness.interop`` never needs an optional
dependency:

* :mod:`harness.interop.pydantic_ai`: convert histories to and from pydantic-ai's
  ``ModelMessage`` objects and run a harness capability stack before every request of a
  ``pydantic_ai.Agent`` (install ``harness-loop[pydantic-ai]``).
"""

from __future__ import annotations

__all__: list[str] = []
