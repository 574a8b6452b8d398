"""Capability names and the order capabilities and plugins run in.

* :func:`capability_name`: the name an object registers under.
* :func:`order_capabilities`: the user's list adjusted by ``runs_before`` / ``runs_after``
  (a stable topological sort; impossible declarations raise
  :class:`~harness.errors.CapabilityOrderError` naming every capability involved).
* :func:`order_hookimpls`: the order the manager calls one hook's implementations in:
  capabilities first, then other plugins in registration order.
"""

from __future__ import annotations

__all__ = [
    "UNREGISTERED",
    "capability_name",
    "order_capabilities",
    "order_hookimpls",
]

import heapq
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, cast

import pluggy

from harness.errors import CapabilityError, CapabilityOrderError

UNREGISTERED: Final = 1 << 30
"""Registration rank of a plugin the manager has no record of: after every other one."""


def capability_name(capability: object) -> str:
    """The name a capability or plugin object is registered under.

    Its ``name`` attribute when that is a non-empty string, a module's ``__name__``, or
    else its class name.

    Raises:
        CapabilityError: ``capability`` is a class (capabilities are configured
            instances; instantiate it first).
    """
    if isinstance(capability, type):
        raise CapabilityError(
            capability.__name__,
            f"got the class {capability.__qualname__} itself; capabilities are configured "
            f"instances, pass {capability.__name__}(...)",
        )
    if isinstance(capability, types.ModuleType):
        return capability.__name__
    name = getattr(capability, "name", None)
    if isinstance(name, str) and name:
        return name
    return type(capability).__name__


def _declared(capability: object, name: str, attribute: str) -> tuple[str, ...]:
    value: object = getattr(capability, attribute, ())
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Iterable):
        items = list(cast("Iterable[object]", value))
        names = tuple(item for item in items if isinstance(item, str))
        if len(names) == len(items):
            return names
    raise CapabilityOrderError(
        f"capability {name!r}: {attribute} must be a sequence of capability names, got {value!r}"
    )


def order_capabilities(capabilities: Sequence[object]) -> list[object]:
    """Return ``capabilities`` in the order they run.

    The user's order is kept except where a capability's ``runs_before`` /
    ``runs_after`` (names of other capabilities) require otherwise; among capabilities
    free to go first, the one listed first goes first (a stable topological sort).
    Names in ``runs_before`` / ``runs_after`` that match no capability in the list are
    ignored: the other capability may simply not be installed.

    Raises:
        CapabilityError: An element is a class rather than an instance.
        CapabilityOrderError: Two capabilities share a name, a capability orders itself
            relative to itself, or the declarations form a cycle (two capabilities
            contradicting each other, or a longer loop). The message names every
            capability involved and the declaration at fault.
    """
    names = [capability_name(c) for c in capabilities]
    index: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in index:
            first = capabilities[index[name]]
            raise CapabilityOrderError(
                f"two capabilities are named {name!r}: {first!r} (position {index[name]}) and "
                f"{capabilities[i]!r} (position {i}); give one of them another name"
            )
        index[name] = i
    successors: list[dict[int, str]] = [{} for _ in names]
    predecessors: list[set[int]] = [set() for _ in names]

    def add_edge(before: int, after: int, why: str) -> None:
        if before == after:
            raise CapabilityOrderError(f"capability {names[before]!r}: {why} names itself")
        successors[before].setdefault(after, why)
        predecessors[after].add(before)

    for i, capability in enumerate(capabilities):
        for other in _declared(capability, names[i], "runs_before"):
            j = index.get(other)
            if j is not None:
                add_edge(i, j, f"{names[i]!r}.runs_before")
        for other in _declared(capability, names[i], "runs_after"):
            j = index.get(other)
            if j is not None:
                add_edge(j, i, f"{names[i]!r}.runs_after")

    remaining = [len(p) for p in predecessors]
    ready = [i for i, count in enumerate(remaining) if count == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for j in successors[i]:
            remaining[j] -= 1
            if remaining[j] == 0:
                heapq.heappush(ready, j)
    if len(order) < len(names):
        raise CapabilityOrderError(_describe_cycle(names, successors, predecessors, set(order)))
    return [capabilities[i] for i in order]


def _describe_cycle(
    names: Sequence[str],
    successors: Sequence[Mapping[int, str]],
    predecessors: Sequence[set[int]],
    done: set[int],
) -> str:
    # Every node left over has a left-over predecessor; walking predecessors must loop.
    node = min(i for i in range(len(names)) if i not in done)
    seen: dict[int, int] = {}
    path: list[int] = []
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        node = min(p for p in predecessors[node] if p not in done)
    cycle = list(reversed(path[seen[node] :]))  # forward order: each runs before the next
    steps = [
        f"{names[a]!r} before {names[b]!r} ({successors[a][b]})"
        for a, b in zip(cycle, cycle[1:] + cycle[:1], strict=True)
    ]
    involved = " and ".join(repr(names[i]) for i in cycle)
    kind = "contradict each other" if len(cycle) == 2 else "form an ordering cycle"
    return f"capabilities {involved} {kind}: " + "; ".join(steps)


def order_hookimpls(
    impls: Sequence[pluggy.HookImpl],
    capability_position: Mapping[str, int],
    registration: Mapping[str, int],
) -> list[pluggy.HookImpl]:
    """The order the manager calls one hook's implementations in.

    Capabilities first, by their position in the resolved order; then every other
    plugin in registration order, ``tryfirst`` ones before plain ones and ``trylast``
    ones after them. Ties keep pluggy's order.

    Args:
        impls: The hook's implementations, as ``pluggy.HookCaller.get_hookimpls()`` lists them.
        capability_position: Position of each capability in the resolved order, by name.
        registration: Registration rank of each plugin, by name.
    """

    def key(item: tuple[int, pluggy.HookImpl]) -> tuple[int, int, int, int]:
        offset, impl = item
        position = capability_position.get(impl.plugin_name)
        if position is not None:
            return (0, position, 0, offset)
        tier = 0 if impl.tryfirst else 2 if impl.trylast else 1
        return (1, tier, registration.get(impl.plugin_name, UNREGISTERED), offset)

    return [impl for _, impl in sorted(enumerate(impls), key=key)]
