"""The durable-testing scenario's description (part of :mod:`harness.testing.durable`).

Kept apart so the scenario's model and tools (:mod:`harness.testing.durable_model`) and
the kit's front module can both read it without importing each other.
"""

from __future__ import annotations

__all__ = ["SCENARIO_ENV", "Scenario"]

import json
from typing import Any, Final, cast

import attrs

SCENARIO_ENV: Final = "HARNESS_DURABLE_SCENARIO"
"""The environment variable holding a :class:`Scenario`'s JSON, read by :func:`make_agent`."""


def _positive_or_none(instance: object, attribute: attrs.Attribute[Any], value: int | None) -> None:
    del instance
    if value is not None and value < 1:
        raise ValueError(f"{attribute.name} must be at least 1 (or None), got {value}")


@attrs.frozen
class Scenario:
    """What the scenario agent does, records and where it blocks.

    Attributes:
        record_dir: Folder of ``requests.jsonl``, ``tools.jsonl`` and ``blocked``.
        steps: Tool-calling steps before the final answer.
        output_bytes: Size of each ``work`` output (ASCII characters).
        block_request: Block forever at this arrival at the model (1-based, per run).
        block_tool: Block forever in the tool call ``call_<n>`` (1-based).
        idempotent: Whether the tool at ``block_tool`` is the idempotent ``work``
            (``True``) or ``send_email``, declared ``idempotent=False``.
        compaction: Add the tiered compaction and ``LimitWarner`` stack.
        record_bodies: Record whole request bodies (``False``: only their SHA-256, for runs
            whose bodies would be large).
    """

    record_dir: str = attrs.field(converter=str)
    steps: int = 6
    output_bytes: int = 500
    block_request: int | None = attrs.field(default=None, validator=_positive_or_none)
    block_tool: int | None = attrs.field(default=None, validator=_positive_or_none)
    idempotent: bool = True
    compaction: bool = True
    record_bodies: bool = True

    def to_json(self) -> str:
        """The scenario as a JSON object (what :data:`SCENARIO_ENV` holds)."""
        return json.dumps(attrs.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> Scenario:
        """Read a scenario written by :meth:`to_json`.

        Raises:
            ValueError: Not a JSON object of scenario fields (the message names the problem).
        """
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError(f"a scenario is a JSON object, got {type(data).__name__}")
        fields = cast("dict[str, Any]", data)
        known = {f.name for f in attrs.fields(cls)}
        unknown = sorted(set(fields) - known)
        if unknown:
            raise ValueError(f"unknown scenario fields: {', '.join(unknown)}")
        return cls(**fields)

    def env(self) -> dict[str, str]:
        """``{SCENARIO_ENV: self.to_json()}``, to merge into a worker's environment."""
        return {SCENARIO_ENV: self.to_json()}
