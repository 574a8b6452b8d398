"""Model implementations, named as pydantic-ai names them.

Each provider lives in its own submodule and imports its SDK only when that submodule is
imported, so ``import harness.models`` needs no optional dependency:

* :mod:`harness.models.function`: :class:`~harness.models.function.FunctionModel`, a Python
  function answers each request.
* :mod:`harness.models.test`: :class:`~harness.models.test.TestModel`, offline and scripted.
* :mod:`harness.models.openai`: OpenAI Chat Completions and compatible servers.
* :mod:`harness.models.anthropic`: the Anthropic Messages API.
* :mod:`harness.models.resolve`: :func:`~harness.models.resolve.resolve_model` turns a model
  string such as ``"openai:gpt-4o-mini"`` into a model.
* :mod:`harness.models.check`: :func:`~harness.models.check.check_model` makes sure a model
  can take requests (credentials, a reachable server) before a run starts.

The protocol every model implements, :class:`harness.core.Model`, lives in the core.
"""

from __future__ import annotations

from harness.models.resolve import resolve_model

__all__ = ["resolve_model"]
