"""The effect seam: every model request and tool call of a run goes through one small interface.

The run's orchestration (capabilities, building each request, acting on each response,
session checkpoints) is deterministic given what its effects return. Everything that is
not (the model, the tools, the clock, fresh ids) goes through an :class:`Effects` object:

* :meth:`Effects.model_request` takes a :class:`ModelRequestUnit` and returns the response:
  each model request of the run, and each model call a capability makes (the summarizer);
* :meth:`Effects.tool_call` takes a :class:`ToolCallUnit` and returns a :class:`ToolOutcome`;
* :meth:`Effects.now` and :meth:`Effects.new_id` give the time and the ids the run records.

:class:`InProcessEffects`, the default, runs them in the process. A durable-execution
engine (``harness-dbos``, ``harness-temporal``) replaces it: each unit becomes a journaled
step or activity, and after a crash the engine replays the orchestration from the run's
start, answering the units already journaled from the journal.

Units carry **deltas**. A request unit's :attr:`~ModelRequestUnit.delta` says what changed
since the run's previous request (the view's kept prefix, the messages added, the system
and request-scoped parts), so an engine that must ship a unit to another process ships
what the run added, never the whole history per call; :meth:`RequestDelta.view` and
:meth:`RequestDelta.outgoing` rebuild the request from the previous view.

Example, an effects object that logs every tool call and runs the rest as usual::

    class Logged(InProcessEffects):
        async def tool_call(self, unit):
            print("calling", unit.call.tool_name)
            return await super().tool_call(unit)

    await agent.run("hi", effects=Logged())
"""

from __future__ import annotations

__all__ = [
    "NON_RETRYABLE",
    "Effects",
    "InProcessEffects",
    "ModelRequestUnit",
    "RequestDelta",
    "ToolCallUnit",
    "ToolOutcome",
    "ToolOutcomeKind",
    "TrackedMessages",
    "UnitPurpose",
    "build_outgoing",
    "run_attempts",
    "tool_content",
]

import asyncio
import dataclasses
import json
import random
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, cast, runtime_checkable

import attrs

from harness.core.messages import CanonicalMessage, JsonValue, Part, SystemPromptPart, ToolCallPart
from harness.core.model import Model, ModelSettings, ToolDefinition
from harness.core.streaming import StreamSink, collect_stream, supports_streaming
from harness.errors import HarnessError, ToolArgumentsError, ToolRetry, UserAbort, WireFormatError

NON_RETRYABLE: tuple[type[BaseException], ...] = (
    ToolRetry,
    ToolArgumentsError,
    UserAbort,
    asyncio.CancelledError,
    KeyboardInterrupt,
    SystemExit,
    HarnessError,
)
"""Exceptions a tool raises that are never retried, even when a tool lists them in ``retry_on``.

``ToolRetry`` and argument errors become retry prompts; the others (user abort,
cancellation, configuration errors, which are all ``HarnessError``) stop the run.
"""

_BACKOFF_CAP = 5.0

UnitPurpose = Literal["request", "capability"]
ToolOutcomeKind = Literal["returned", "failed", "retry", "unknown", "deferred"]


class TrackedMessages(list[CanonicalMessage]):
    """A list of messages that remembers whether anything changed it, and what it was before.

    :func:`build_outgoing` returns one, so the run can tell in constant time whether a
    ``wrap_model_request`` wrapper edited the request, instead of comparing the whole
    request after every wrapper; the first edit keeps a copy of the list as it was
    (:attr:`original`), for the invariant guard.

    Attributes:
        changed: Whether anything changed the list since it was made (or last reset).
        original: The list before its first change (``None`` until then).
    """

    changed: bool = False
    original: list[CanonicalMessage] | None = None

    def _touch(self) -> None:
        if not self.changed:
            self.original = list(self)
            self.changed = True

    def before_changes(self) -> list[CanonicalMessage]:
        """The list as it was before its first change (itself, copied, when unchanged)."""
        return list(self.original if self.original is not None else self)

    def __setitem__(self, index: Any, value: Any) -> None:
        self._touch()
        super().__setitem__(index, value)

    def __delitem__(self, index: Any) -> None:
        self._touch()
        super().__delitem__(index)

    def __iadd__(self, other: Any) -> TrackedMessages:  # pyright: ignore[reportIncompatibleMethodOverride]
        self._touch()
        super().__iadd__(other)
        return self

    def __imul__(self, count: Any) -> TrackedMessages:  # pyright: ignore[reportIncompatibleMethodOverride]
        self._touch()
        super().__imul__(count)
        return self

    def append(self, value: CanonicalMessage) -> None:
        """``list.append``, noted as a change."""
        self._touch()
        super().append(value)

    def extend(self, values: Any) -> None:
        """``list.extend``, noted as a change."""
        self._touch()
        super().extend(values)

    def insert(self, index: Any, value: CanonicalMessage) -> None:
        """``list.insert``, noted as a change."""
        self._touch()
        super().insert(index, value)

    def pop(self, index: Any = -1) -> CanonicalMessage:
        """``list.pop``, noted as a change."""
        self._touch()
        return super().pop(index)

    def remove(self, value: CanonicalMessage) -> None:
        """``list.remove``, noted as a change."""
        self._touch()
        super().remove(value)

    def clear(self) -> None:
        """``list.clear``, noted as a change."""
        self._touch()
        super().clear()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        """``list.sort``, noted as a change."""
        self._touch()
        super().sort(*args, **kwargs)

    def reverse(self) -> None:
        """``list.reverse``, noted as a change."""
        self._touch()
        super().reverse()


def build_outgoing(
    history: Sequence[CanonicalMessage],
    system: Sequence[SystemPromptPart],
    request_scoped: Sequence[Part],
) -> TrackedMessages:
    """Return the message list to send: system parts up front, request-scoped parts last.

    Only the first and the last message are rebuilt; every other message is the same
    object as in ``history`` (one O(n) list copy of references). The list is a
    :class:`TrackedMessages`, so a wrapper's edits of it are noticed at no cost.
    """
    out = TrackedMessages(history)
    if system:
        if out and out[0].kind == "request":
            out[0] = out[0].replace(parts=(*system, *out[0].parts))
        else:
            out.insert(0, CanonicalMessage.request(*system))
    if request_scoped and out:
        last = out[-1]
        out[-1] = last.replace(parts=(*last.parts, *request_scoped))
    out.changed, out.original = False, None  # building it is not a wrapper's edit
    return out


@attrs.frozen
class RequestDelta:
    """What changed in the request since the run's previous request unit.

    Attributes:
        keep: Messages of the previous request's view kept as this view's prefix (``0``
            on the run's first request, or when a capability rewrote the front).
        added: This view's messages after the kept prefix.
        system: The system prompt and dynamic instructions, rebuilt for every request.
        scoped: The request-scoped parts, sent with this request only.
    """

    keep: int
    added: tuple[CanonicalMessage, ...]
    system: tuple[SystemPromptPart, ...] = ()
    scoped: tuple[Part, ...] = ()

    def view(self, previous_view: Sequence[CanonicalMessage]) -> list[CanonicalMessage]:
        """This request's view, from the previous request's.

        Raises:
            ValueError: ``previous_view`` is shorter than :attr:`keep` (not the view this
                delta was computed against).
        """
        if len(previous_view) < self.keep:
            raise ValueError(
                f"the delta keeps {self.keep} messages of the previous view, which has {len(previous_view)}"
            )
        return [*previous_view[: self.keep], *self.added]

    def outgoing(self, view: Sequence[CanonicalMessage]) -> list[CanonicalMessage]:
        """The request to send for ``view``: the system parts in front, the scoped parts last."""
        return build_outgoing(view, self.system, self.scoped)


@attrs.frozen
class ModelRequestUnit:
    """One model call: a request of the run, or a capability's own call (the summarizer).

    Attributes:
        index: 1-based, counting every model-request unit of the run (both purposes), in
            the order the run makes them.
        purpose: ``"request"`` for the run's requests, ``"capability"`` for a capability's.
        source: ``"agent"``, or the name of the capability making the call.
        model: The model to call.
        messages: The whole request to send (in process; an engine never journals it).
        view: The history view the request was built from (``messages`` without the
            system and request-scoped parts); a capability call's messages themselves.
        delta: For ``"request"`` units: the change since the previous request unit of the
            run (see :class:`RequestDelta`). ``None`` for capability calls, which carry
            their (small, self-contained) messages whole.
        tools: The tool definitions sent with the request.
        settings: The model settings sent with the request.
        session_id: The run's session.
        revision: The stored session's revision whose view is :attr:`view` (the run
            checkpoints before every request), or ``None`` when the session has no store
            or for capability calls.
        stream: Set when the run is streamed (:meth:`Agent.run_stream
            <harness.run.agent.Agent.run_stream>`): receives each delta as the model sends
            it. Effects that can stream call the model's ``request_stream``
            (:func:`~harness.core.streaming.collect_stream`); others may ignore it, and the
            consumer then sees the response when it is complete.
    """

    index: int
    purpose: UnitPurpose
    source: str
    model: Model = attrs.field(repr=False)
    messages: Sequence[CanonicalMessage] = attrs.field(repr=False)
    view: Sequence[CanonicalMessage] = attrs.field(repr=False)
    delta: RequestDelta | None = attrs.field(default=None, repr=False)
    tools: Sequence[ToolDefinition] = ()
    settings: ModelSettings = attrs.field(factory=ModelSettings)
    session_id: str | None = None
    revision: int | None = None
    stream: StreamSink | None = attrs.field(default=None, repr=False, eq=False)


@attrs.frozen
class ToolCallUnit:
    """One tool call, arguments validated, ready to run.

    Attributes:
        call: The model's call.
        arguments: The validated arguments.
        idempotent: Whether the tool may run twice for one call (see
            :class:`~harness.tools.tool.Tool`): only then is it retried, or re-run after a crash.
        max_attempts: Attempts for transient failures (``1`` when not idempotent).
        base_delay: First backoff delay in seconds (doubling, capped at 5 s, up to 10 % jitter).
        attempt: Runs the tool once in this process and returns its JSON-ready content;
            raises what the tool raises.
        is_transient: Whether a failure is transient (retried while attempts remain).
        session_id: The run's session.
        revision: The stored session's revision when the call was made (``None``: no store).
    """

    call: ToolCallPart
    arguments: Mapping[str, Any]
    idempotent: bool = True
    max_attempts: int = 1
    base_delay: float = 0.5
    attempt: Callable[[], Awaitable[JsonValue]] = attrs.field(kw_only=True, repr=False)
    is_transient: Callable[[BaseException], bool] = attrs.field(default=lambda _exc: False, repr=False)
    session_id: str | None = None
    revision: int | None = None


_OUTCOME_KINDS: tuple[str, ...] = ("returned", "failed", "retry", "unknown", "deferred")


@attrs.frozen
class ToolOutcome:
    """What one tool call came to.

    Attributes:
        kind: ``"returned"`` (the tool returned :attr:`content`), ``"failed"`` (it raised:
            :attr:`error`), ``"retry"`` (it asked the model to retry: :attr:`error` is the
            prompt), or ``"unknown"`` (the call may or may not have taken effect: a worker
            died while a non-idempotent tool ran; the model is told so), or ``"deferred"``
            (a ``wrap_tool_call`` wrapper held the call back, for human approval: the run
            pauses with ``status="awaiting_approval"``; :attr:`error` says why).
        content: The tool's JSON-ready return value (``"returned"``).
        error: ``"Type: message"`` of the failure, or the retry prompt.
        transient: Whether the failure was transient.
        attempts: Attempts made.
        hint: For ``"retry"``: whether to append "Fix the errors and try again."
    """

    kind: ToolOutcomeKind
    content: JsonValue = None
    error: str | None = None
    transient: bool = False
    attempts: int = 1
    hint: bool = True

    def to_json(self) -> dict[str, Any]:
        """The outcome as a JSON object (what an engine journals)."""
        data: dict[str, Any] = {"kind": self.kind, "attempts": self.attempts}
        if self.kind == "returned":
            data["content"] = self.content
        if self.error is not None:
            data["error"] = self.error
        if self.transient:
            data["transient"] = True
        if not self.hint:
            data["hint"] = False
        return data

    @classmethod
    def from_json(cls, data: object) -> ToolOutcome:
        """Read :meth:`to_json`'s object back.

        Raises:
            WireFormatError: ``data`` is not an outcome object (names the field).
        """
        if not isinstance(data, Mapping):
            raise WireFormatError(f"a tool outcome must be a JSON object, got {type(data).__name__}")
        fields = cast(Mapping[str, Any], data)
        kind = fields.get("kind")
        if kind not in _OUTCOME_KINDS:
            raise WireFormatError(f"tool outcome field 'kind' must be one of {_OUTCOME_KINDS}, got {kind!r}")
        attempts = fields.get("attempts", 1)
        error = fields.get("error")
        if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 1:
            raise WireFormatError(
                f"tool outcome field 'attempts' must be a positive integer, got {attempts!r}"
            )
        if error is not None and not isinstance(error, str):
            raise WireFormatError(f"tool outcome field 'error' must be a string, got {type(error).__name__}")
        transient, hint = fields.get("transient", False), fields.get("hint", True)
        for name, flag in (("transient", transient), ("hint", hint)):
            if not isinstance(flag, bool):  # bool("false") would silently invert a journaled flag
                raise WireFormatError(f"tool outcome field {name!r} must be a boolean, got {flag!r}")
        return cls(
            kind=cast(ToolOutcomeKind, kind),
            content=cast(JsonValue, fields.get("content")),
            error=error,
            transient=transient,
            attempts=attempts,
            hint=hint,
        )


@runtime_checkable
class Effects(Protocol):
    """How a run performs its effects. See the module documentation."""

    def now(self) -> datetime:
        """The time the run records now (timestamps of prompts, nudges, ledger entries)."""
        ...

    def new_id(self) -> str:
        """A fresh id (32 hexadecimal characters): request ids, tool-call ids the run makes up."""
        ...

    async def model_request(self, unit: ModelRequestUnit) -> CanonicalMessage:
        """Send ``unit`` to its model and return the response."""
        ...

    async def tool_call(self, unit: ToolCallUnit) -> ToolOutcome:
        """Run ``unit``'s tool and return what it came to.

        Raises:
            BaseException: :data:`NON_RETRYABLE` errors other than ``ToolRetry`` and
                argument errors (abort, cancellation, harness errors): they stop the run.
        """
        ...


def tool_content(value: Any) -> Any:
    """Turn a tool's return value into JSON-ready content (``str()`` as a last resort).

    attrs classes and dataclasses become dicts, objects with ``model_dump`` (pydantic
    models) are dumped in JSON mode; anything ``json`` cannot encode becomes ``str(value)``.
    """
    if value is None or isinstance(value, str | int | float | bool):
        return value
    converted: Any = value
    kind: type[Any] = type(value)  # pyright: ignore[reportUnknownVariableType]
    if attrs.has(kind):
        converted = attrs.asdict(value)
    elif dataclasses.is_dataclass(kind):
        converted = dataclasses.asdict(value)
    else:
        dump: Any = getattr(value, "model_dump", None)
        if callable(dump):
            try:
                converted = dump(mode="json")
            except TypeError:
                converted = dump()
    try:
        json.dumps(converted)
    except (TypeError, ValueError):
        return str(value)
    return converted


def _backoff(unit: ToolCallUnit, attempt: int) -> float:
    delay = min(unit.base_delay * 2 ** (attempt - 1), _BACKOFF_CAP)
    return delay * (1 + random.random() * 0.1)


async def run_attempts(unit: ToolCallUnit) -> ToolOutcome:
    """Run ``unit.attempt`` up to ``unit.max_attempts`` times while failures are transient.

    ``ToolRetry`` and argument errors become ``"retry"`` outcomes; other exceptions of
    :data:`NON_RETRYABLE` propagate; any other exception is ``"failed"``, after the last
    attempt when transient, at once otherwise. Engines call this inside a step.
    """
    attempts = max(1, unit.max_attempts) if unit.idempotent else 1
    for attempt in range(1, attempts + 1):
        try:
            content = await unit.attempt()
        except ToolRetry as exc:
            return ToolOutcome("retry", error=exc.message, hint=exc.hint, attempts=attempt)
        except ToolArgumentsError as exc:
            return ToolOutcome("retry", error=str(exc), attempts=attempt)
        except NON_RETRYABLE:
            raise
        except Exception as exc:
            transient = unit.is_transient(exc)
            if transient and attempt < attempts:
                await asyncio.sleep(_backoff(unit, attempt))
                continue
            return ToolOutcome(
                "failed", error=f"{type(exc).__name__}: {exc}", transient=transient, attempts=attempt
            )
        return ToolOutcome("returned", content=content, attempts=attempt)
    raise AssertionError("unreachable: the last attempt always returns")  # pragma: no cover


class InProcessEffects:
    """The default effects: the wall clock, random ids, the model and the tools called directly.

    Attributes:
        deltas: Whether the run computes each request unit's :class:`RequestDelta` (a
            prefix comparison of two views at C speed, and a copy of the view). ``False``
            here, where nothing leaves the process; an engine that ships units elsewhere
            leaves it ``True`` (the default for any effects object without the attribute).
    """

    deltas: bool = False

    def now(self) -> datetime:
        """``datetime.now(UTC)``."""
        return datetime.now(UTC)

    def new_id(self) -> str:
        """``uuid4().hex``."""
        return uuid.uuid4().hex

    async def model_request(self, unit: ModelRequestUnit) -> CanonicalMessage:
        """``unit.model.request(unit.messages, unit.tools, unit.settings)``, streamed when asked.

        When the unit has a :attr:`~ModelRequestUnit.stream` sink and the model can stream,
        the model's ``request_stream`` is used and each delta goes to the sink.
        """
        if unit.stream is not None and supports_streaming(unit.model):
            return await collect_stream(
                unit.model,  # pyright: ignore[reportArgumentType]
                unit.messages,
                unit.tools,
                unit.settings,
                unit.stream,
            )
        return await unit.model.request(unit.messages, unit.tools, unit.settings)

    async def tool_call(self, unit: ToolCallUnit) -> ToolOutcome:
        """:func:`run_attempts` in this process."""
        return await run_attempts(unit)
