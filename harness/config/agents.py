"""Load an agent by reference (``"package.module:attribute"``), as durable-engine workers do.

A worker process builds the same agent as the process that started the run. It finds it
by an import reference: the attribute is an :class:`~harness.run.agent.Agent`, or a
callable taking no arguments that returns one (called every time, so each worker gets its
own instance).
"""

from __future__ import annotations

__all__ = ["load_agent"]

import importlib

from harness.errors import AgentLoadError
from harness.run.agent import Agent


def load_agent(reference: str) -> Agent:
    """The agent ``reference`` names (``"package.module:attribute"``; dots allowed after the colon).

    Raises:
        AgentLoadError: The reference is malformed, the module fails to import, the
            attribute is missing, or it is neither an Agent nor a callable returning one.
    """
    module_name, sep, attribute = reference.strip().partition(":")
    if not sep or not module_name or not attribute:
        raise AgentLoadError(reference, "expected 'package.module:attribute'")
    try:
        target: object = importlib.import_module(module_name)
    except Exception as exc:  # an ImportError, or whatever the module raises while importing
        raise AgentLoadError(
            reference, f"importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    for name in attribute.split("."):
        try:
            target = getattr(target, name)
        except AttributeError:
            raise AgentLoadError(reference, f"{module_name!r} has no attribute {attribute!r}") from None
    if isinstance(target, Agent):
        return target
    if not callable(target):
        raise AgentLoadError(
            reference, f"{attribute!r} is a {type(target).__name__}, not an Agent or a factory"
        )
    try:
        built = target()
    except Exception as exc:
        raise AgentLoadError(reference, f"calling {attribute!r} failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(built, Agent):
        raise AgentLoadError(reference, f"{attribute!r}() returned a {type(built).__name__}, not an Agent")
    return built
