"""What harness-temporal journals: the workflow's input and each activity's input and output, as JSON.

Everything is in the project's wire format (:mod:`harness.wire` message JSON, plain JSON
objects), never pickle, so Temporal's workflow history holds our format and its size is
what the run added:

* the workflow input (:class:`RunSpec`): the shared :class:`harness.durable.RunSpec` (the
  agent reference, the store *by reference*, never a credential, the session id, the
  prompt, the agent's fingerprint) and the activity options (:class:`ActivityOptions`);
* each checkpoint of the session: the workflow never touches the store, a local activity
  commits it (:data:`ACTIVITY_STORE`), so its input is what the step added;
* a model-request activity's input: for the run's own requests only the **delta**
  (:class:`~harness.core.effects.RequestDelta`: the kept prefix length, the messages added,
  the system and request-scoped parts), never the whole history; a capability's call (the
  summarizer) sends its (small) messages whole. The output is the response message;
* a tool activity's input: the call (id, name, validated arguments); its output a
  :class:`~harness.core.effects.ToolOutcome`'s JSON.
"""

from __future__ import annotations

__all__ = [
    "ACTIVITY_MODEL",
    "ACTIVITY_SNAPSHOT",
    "ACTIVITY_STORE",
    "ACTIVITY_TOOL",
    "ActivityOptions",
    "RunSpec",
    "WORKFLOW_NAME",
    "decode_message",
    "decode_messages",
    "decode_parts",
    "decode_settings",
    "decode_tools",
    "encode_message",
    "encode_messages",
    "encode_parts",
    "encode_settings",
    "encode_tools",
    "fingerprint_digest",
]

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, Final, cast

import attrs

from harness.core import CanonicalMessage, ModelSettings, Part, ToolDefinition
from harness.durable import RunSpec as DurableRunSpec
from harness.durable import StoreReference
from harness.errors import WorkflowIncompatibleError
from harness.wire import messages_from_jsonable, messages_to_jsonable

WORKFLOW_NAME: Final = "HarnessRun"
"""The Temporal workflow type of a harness run."""
ACTIVITY_SNAPSHOT: Final = "harness.snapshot"
"""The activity that reads the session as it is when the run begins (journaled once)."""
ACTIVITY_MODEL: Final = "harness.model_request"
"""The activity of one model request (the run's, or a capability's)."""
ACTIVITY_TOOL: Final = "harness.tool_call"
"""The activity of one tool call."""
ACTIVITY_STORE: Final = "harness.store"
"""The local activity of one store operation of the run (a checkpoint, or a read)."""


def encode_messages(messages: Sequence[CanonicalMessage]) -> list[dict[str, Any]]:
    """Messages as wire JSON objects."""
    return messages_to_jsonable(messages)


def decode_messages(data: object) -> list[CanonicalMessage]:
    """Wire JSON objects back to messages.

    Raises:
        WireFormatError: Not a list of message objects.
    """
    return messages_from_jsonable(cast("list[Any]", data))


def encode_message(message: CanonicalMessage) -> dict[str, Any]:
    """One message as a wire JSON object."""
    return messages_to_jsonable([message])[0]


def decode_message(data: object) -> CanonicalMessage:
    """One wire JSON object back to a message."""
    return messages_from_jsonable([data])[0]


def encode_parts(parts: Sequence[Part]) -> list[dict[str, Any]]:
    """Request parts (system, request-scoped) as the wire JSON of their parts."""
    if not parts:
        return []
    return cast("list[dict[str, Any]]", encode_message(CanonicalMessage.request(*parts))["parts"])


def decode_parts(data: object) -> tuple[Part, ...]:
    """Parts written by :func:`encode_parts`."""
    items = cast("list[Any]", data)
    if not items:
        return ()
    return decode_message({"kind": "request", "parts": items}).parts


def encode_settings(settings: ModelSettings) -> dict[str, Any]:
    """Model settings as a JSON object."""
    return {
        "max_tokens": settings.max_tokens,
        "temperature": settings.temperature,
        "timeout": settings.timeout,
        "extra": dict(settings.extra),
    }


def decode_settings(data: object) -> ModelSettings:
    """Settings written by :func:`encode_settings`."""
    fields = cast("Mapping[str, Any]", data)
    return ModelSettings(
        max_tokens=fields.get("max_tokens"),
        temperature=fields.get("temperature"),
        timeout=fields.get("timeout"),
        extra=dict(fields.get("extra") or {}),
    )


def encode_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    """Tool definitions as JSON objects."""
    return [
        {"name": t.name, "description": t.description, "parameters": dict(t.parameters_json_schema)}
        for t in tools
    ]


def decode_tools(data: object) -> tuple[ToolDefinition, ...]:
    """Definitions written by :func:`encode_tools`."""
    return tuple(
        ToolDefinition(
            name=item["name"], description=item["description"], parameters_json_schema=item["parameters"]
        )
        for item in cast("list[dict[str, Any]]", data)
    )


def fingerprint_digest(fingerprint: Mapping[str, str]) -> str:
    """One short digest of an agent fingerprint (what each activity input carries)."""
    text = json.dumps(dict(fingerprint), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _seconds(value: float | timedelta) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


@attrs.frozen
class ActivityOptions:
    """Temporal's timeouts and retries for the run's activities (seconds).

    Attributes:
        model_timeout: ``start_to_close_timeout`` of a model request.
        tool_timeout: ``start_to_close_timeout`` of a tool call.
        heartbeat: ``heartbeat_timeout`` of both: a worker that died while one ran is noticed
            after this long (the activity heartbeats three times as often).
        model_attempts: Attempts of a model request (a provider error, or a dead worker).
        crash_attempts: Extra attempts of an idempotent tool call for dead workers (its
            transient failures get the tool's own ``tool_max_retries``).
        snapshot_timeout: ``start_to_close_timeout`` of the snapshot activity.
        store_timeout: ``start_to_close_timeout`` of one store operation (a checkpoint
            waiting on another writer's lock waits on the worker, never in the workflow).
    """

    model_timeout: float = attrs.field(default=600.0, converter=_seconds)
    tool_timeout: float = attrs.field(default=600.0, converter=_seconds)
    heartbeat: float = attrs.field(default=30.0, converter=_seconds)
    model_attempts: int = 3
    crash_attempts: int = 3
    snapshot_timeout: float = attrs.field(default=60.0, converter=_seconds)
    store_timeout: float = attrs.field(default=60.0, converter=_seconds)

    def to_json(self) -> dict[str, Any]:
        """The options as a JSON object."""
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: object) -> ActivityOptions:
        """Options written by :meth:`to_json`."""
        return cls(**cast("dict[str, Any]", data))


@attrs.frozen
class RunSpec:
    """A run's workflow input: the shared durable run spec and the activities' options.

    Attributes:
        run: What the run is (:class:`harness.durable.RunSpec`: the agent reference, the
            store by reference, never a credential, the session, the prompt, the agent's
            fingerprint, the start time and working directory).
        options: The activities' timeouts and retries.
    """

    run: DurableRunSpec
    options: ActivityOptions = attrs.field(factory=ActivityOptions)

    @property
    def agent(self) -> str:
        """The agent reference workers build with :func:`harness.config.load_agent`."""
        return self.run.agent

    @property
    def store(self) -> StoreReference:
        """The run's store, by reference."""
        return self.run.store

    @property
    def session_id(self) -> str:
        """The run's session (new or existing)."""
        return self.run.session_id

    @property
    def prompt(self) -> str | None:
        """The run's prompt (``None``: continue a pending request)."""
        return self.run.prompt

    @property
    def fingerprint(self) -> Mapping[str, str]:
        """The agent's fingerprint when the run was started."""
        return self.run.fingerprint

    @property
    def working_directory(self) -> str:
        """The new session's working directory (the starting process's)."""
        return self.run.working_directory

    def to_json(self) -> dict[str, Any]:
        """The spec as a JSON object."""
        return {"run": self.run.to_json(), "options": self.options.to_json()}

    @classmethod
    def from_json(cls, data: object) -> RunSpec:
        """A spec written by :meth:`to_json`.

        Raises:
            WorkflowIncompatibleError: Not a spec of this harness-temporal.
        """
        fields = cast("dict[str, Any]", data) if isinstance(data, dict) else {}
        if "run" not in fields:
            raise WorkflowIncompatibleError(
                "the run was started by another harness-temporal (its input has no 'run' object); "
                "finish it with the harness that started it",
                changed=("workflow input",),
            )
        return cls(
            run=DurableRunSpec.from_json(fields["run"]),
            options=ActivityOptions.from_json(fields.get("options") or {}),
        )
