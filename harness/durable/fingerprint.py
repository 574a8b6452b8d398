"""An agent's fingerprint: what a durable run checks before it replays, so it never silently diverges.

A durable engine replays a run's orchestration from its journal. That is only sound if
the agent replaying it would send the same requests: the same model, tools,
capabilities (with their configuration), prompts and limits. :func:`agent_fingerprint`
digests each of those components; an engine stores the digests with the run and calls
:func:`check_fingerprint` whenever the run starts or resumes, so a worker running
changed code refuses the run with :class:`~harness.errors.WorkflowIncompatibleError`
naming what changed, and leaves the session alone.
"""

from __future__ import annotations

__all__ = [
    "FINGERPRINT_COMPONENTS",
    "Fingerprinted",
    "agent_fingerprint",
    "check_fingerprint",
    "known_models",
]

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, cast

import attrs

from harness.core.model import Model
from harness.errors import WorkflowIncompatibleError


class _Settings(Protocol):
    @property
    def model(self) -> Model: ...
    @property
    def tools(self) -> Mapping[str, Any]: ...
    @property
    def system_prompt(self) -> str | None: ...
    @property
    def instructions(self) -> object: ...
    @property
    def model_settings(self) -> object: ...
    @property
    def max_iterations(self) -> int: ...
    @property
    def tool_max_retries(self) -> int: ...
    @property
    def tool_retry_budget(self) -> int: ...
    @property
    def max_empty_responses(self) -> int: ...
    @property
    def fallback_tool_calls(self) -> bool: ...
    @property
    def continuity(self) -> object: ...


class _Capabilities(Protocol):
    @property
    def capabilities(self) -> Sequence[object]: ...


class Fingerprinted(Protocol):
    """What :func:`agent_fingerprint` reads of an agent (a :class:`harness.Agent` is one)."""

    @property
    def run_settings(self) -> _Settings:
        """The agent's frozen run settings."""
        ...

    @property
    def plugin_manager(self) -> _Capabilities:
        """Its plugin manager, whose capabilities are part of the fingerprint."""
        ...


FINGERPRINT_COMPONENTS = ("model", "tools", "capabilities", "prompts", "settings")
"""The components :func:`agent_fingerprint` digests, in order."""

_PLAIN = (str, int, float, bool, type(None))


def _describe(value: object, depth: int = 0) -> Any:
    """A JSON-ready description of a configuration value (objects by their type and fields)."""
    if isinstance(value, _PLAIN):
        return value
    if depth > 4:
        return type(value).__qualname__
    if isinstance(value, Mapping):
        mapping = cast(Mapping[object, object], value)
        return {str(k): _describe(v, depth + 1) for k, v in mapping.items()}
    if isinstance(value, list | tuple | frozenset | set):
        items = [_describe(v, depth + 1) for v in cast(Iterable[object], value)]
        return sorted(items, key=repr) if isinstance(value, frozenset | set) else items
    kind = type(value)
    if isinstance(value, Model):  # a model a capability holds: its runtime state (requests made) is no config
        return {"type": f"{kind.__module__}.{kind.__qualname__}", "name": value.model_name}
    if attrs.has(kind):
        fields = {
            f.name: _describe(getattr(value, f.name), depth + 1)
            for f in attrs.fields(kind)
            if f.init and not f.name.startswith("_")
        }
        return {"type": f"{kind.__module__}.{kind.__qualname__}", "fields": fields}
    if callable(value):
        name = getattr(value, "__qualname__", None) or type(value).__qualname__
        return {"callable": f"{getattr(value, '__module__', '?')}.{name}"}
    public = (
        {k: v for k, v in vars(value).items() if not k.startswith("_")} if hasattr(value, "__dict__") else {}
    )
    return {"type": f"{kind.__module__}.{kind.__qualname__}", "fields": _describe(public, depth + 1)}


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def agent_fingerprint(agent: Fingerprinted) -> dict[str, str]:
    """Digest each component of ``agent`` that decides what its runs send (see the module).

    Returns:
        ``{component: digest}`` for every name of :data:`FINGERPRINT_COMPONENTS`.
    """
    settings = agent.run_settings
    model = settings.model
    tools = [
        {
            "definition": _describe(tool.definition),
            "idempotent": tool.idempotent,
        }
        for tool in settings.tools.values()
    ]
    capabilities = [_describe(capability) for capability in agent.plugin_manager.capabilities]
    prompts = {
        "system_prompt": settings.system_prompt,
        "instructions": _describe(settings.instructions),
    }
    limits = {
        "model_settings": _describe(settings.model_settings),
        "max_iterations": settings.max_iterations,
        "tool_max_retries": settings.tool_max_retries,
        "tool_retry_budget": settings.tool_retry_budget,
        "max_empty_responses": settings.max_empty_responses,
        "fallback_tool_calls": settings.fallback_tool_calls,
        "continuity": _describe(settings.continuity),
    }
    described = {
        "model": {"type": f"{type(model).__module__}.{type(model).__qualname__}", "name": model.model_name},
        "tools": tools,
        "capabilities": capabilities,
        "prompts": prompts,
        "settings": limits,
    }
    return {name: _digest(described[name]) for name in FINGERPRINT_COMPONENTS}


def check_fingerprint(
    recorded: Mapping[str, str], agent: Fingerprinted, *, run_id: str | None = None
) -> None:
    """Refuse to go on with a run recorded with ``recorded`` if ``agent`` differs from it.

    Raises:
        WorkflowIncompatibleError: A component's digest differs (or is missing); the
            error's ``changed`` names them.
    """
    current = agent_fingerprint(agent)
    changed = tuple(name for name in FINGERPRINT_COMPONENTS if recorded.get(name) != current[name])
    if changed:
        where = f"run {run_id!r}" if run_id else "the run"
        raise WorkflowIncompatibleError(
            f"{where} started with another agent: its {', '.join(changed)} changed since; "
            "replaying it would send different requests, so it is refused (the session was not touched). "
            "Finish or cancel it with the code it started with, or start a new run.",
            run_id=run_id,
            changed=changed,
        )


def known_models(agent: Fingerprinted) -> dict[str, Model]:
    """Every model an agent holds, by ``model_name``: its own, then those its plugins hold.

    A worker that executes a unit for a run uses it to find the model the unit names: a
    fallback model (``harness-model-fallback``), a summarizer's own model. The agent's
    model wins a name two models share, then the first plugin that holds it.
    """
    found: dict[str, Model] = {}
    model = agent.run_settings.model
    found[model.model_name] = model
    for plugin in agent.plugin_manager.capabilities:
        _collect_models(plugin, found, depth=0)
    manager = agent.plugin_manager
    plugins = getattr(getattr(manager, "pluggy_manager", None), "get_plugins", None)
    if callable(plugins):
        for plugin in cast(Iterable[object], plugins()):
            _collect_models(plugin, found, depth=0)
    return found


def _collect_models(value: object, found: dict[str, Model], *, depth: int) -> None:
    if isinstance(value, Model):
        found.setdefault(value.model_name, value)
        return
    if depth > 2 or isinstance(value, (*_PLAIN, type)):
        return
    if isinstance(value, Mapping):
        for item in cast(Mapping[object, object], value).values():
            _collect_models(item, found, depth=depth + 1)
        return
    if isinstance(value, list | tuple | frozenset | set):
        for item in cast(Iterable[object], value):
            _collect_models(item, found, depth=depth + 1)
        return
    kind = type(value)
    if attrs.has(kind):
        for field in attrs.fields(kind):
            _collect_models(getattr(value, field.name, None), found, depth=depth + 1)
    elif hasattr(value, "__dict__") and not callable(value):
        for item in vars(value).values():
            _collect_models(item, found, depth=depth + 1)
