"""``OTelPlugin``: OpenTelemetry spans for every run, model request, tool call and compaction.

The spans follow the OpenTelemetry GenAI semantic conventions:

* ``invoke_agent`` (``INTERNAL``) around each run, from ``wrap_run``;
* ``chat {model}`` (``CLIENT``) around each model call, from ``wrap_model_request``;
* ``execute_tool {tool}`` (``INTERNAL``) around each tool call, from ``wrap_tool_call``;
* a ``gen_ai.conversation.compaction`` event on the run's span for each compaction, from
  ``on_compaction``; the next request's ``chat`` span carries
  ``gen_ai.conversation.compacted = true``.

Each wrapper makes its span the current one (``opentelemetry.context.attach``) before it
yields and detaches it after: a wrapper's two halves run in the same task, so the spans
nest, and tool calls running in tasks of their own inherit the run's span from the
context the task was created in.

Ordering. ``wrap_run`` and ``wrap_tool_call`` are ``tryfirst`` (outermost among plugins:
the run's span holds every other wrapper, and a tool call's span shows the outcome other
wrappers gave it, a refusal or a held-back call included); ``wrap_model_request`` is
``trylast`` (innermost: a wrapper that retries or falls back to another model runs the
rest of the chain again, so each attempt gets its own ``chat`` span). Capabilities'
wrappers always run outside plugins'.

A run whose span does not record (no SDK installed, or the sampler dropped it) records
nothing inside it: its model and tool wrappers only pass the call on.

Telemetry never breaks a run: what the plugin fails to record is logged (logger
``harness_otel``) and the run goes on.
"""

from __future__ import annotations

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "INSTRUMENTATION_NAME",
    "STATE_KEY",
    "OTelPlugin",
    "capture_content_from_env",
    "compaction_attributes",
]

import contextlib
import importlib.metadata
import logging
import os
from collections.abc import Generator, Mapping
from typing import Any, ClassVar, Final, cast

import attrs
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider
from opentelemetry.util.types import AttributeValue

from harness import hookimpl, warn_experimental
from harness.capabilities import CompactionEvent, ModelCall, RequestContext, ToolCall
from harness.core import CanonicalMessage, Model, ToolOutcome
from harness.run import RunOutcome
from harness.tools import RunContext
from harness_otel import attributes as attr
from harness_otel._content import (
    content_json,
    input_messages,
    output_messages,
    system_instructions,
    tool_definitions,
)

_log = logging.getLogger("harness_otel")

CAPTURE_CONTENT_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The GenAI conventions' switch for content capture: ``true`` turns it on (see :class:`OTelPlugin`)."""

INSTRUMENTATION_NAME: Final = "harness_otel"
"""The instrumentation scope of every span (the tracer's name)."""

STATE_KEY: Final = "harness-otel"
"""Key of the plugin's per-run record in ``ctx.state`` (run and request contexts share it)."""

_ON: Final = frozenset({"true", "1", "yes", "on", "span_only", "span_and_event"})
_OFF: Final = frozenset({"", "false", "0", "no", "off", "no_content", "event_only"})
_warned_values: set[str] = set()


def _version() -> str:
    try:
        return importlib.metadata.version("harness-otel")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "0.0.0"


def capture_content_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """Whether :data:`CAPTURE_CONTENT_ENV` turns content capture on.

    ``true`` (any case; also ``1``, ``yes``, ``on`` and the newer conventions' ``span_only``
    and ``span_and_event``) turns it on. Unset, ``false`` (``0``, ``no``, ``off``,
    ``no_content``, ``event_only``) leave it off; any other value leaves it off and logs a
    warning once per value (the variable is shared with other instrumentations, so a run
    is never refused for it).

    Args:
        environ: The environment to read (default: ``os.environ``).
    """
    value = (os.environ if environ is None else environ).get(CAPTURE_CONTENT_ENV, "")
    normal = value.strip().lower()
    if normal in _ON:
        return True
    if normal not in _OFF and normal not in _warned_values:
        _warned_values.add(normal)
        _log.warning(
            "%s=%r is neither true nor false; harness-otel does not capture message content",
            CAPTURE_CONTENT_ENV,
            value,
        )
    return False


@attrs.define(eq=False)
class _RunTrace:
    """What the plugin keeps about one run (in ``ctx.state[STATE_KEY]``)."""

    span: Span
    capture: bool
    conversation_id: str
    recording: bool
    """Whether the run's span records (an SDK is installed and sampled it)."""
    compacted: bool = False
    """A compaction changed the history since the run's last request."""
    compacted_call: ModelCall | None = None
    """The request sent after the last compaction (every attempt of it is marked)."""


@contextlib.contextmanager
def _guarded(what: str) -> Generator[None]:
    """Log, never raise, what recording ``what`` raised: telemetry must not break the run."""
    try:
        yield
    except Exception:
        _log.warning("harness-otel could not record %s; the run goes on", what, exc_info=True)


def _fail(span: Span, exc: BaseException) -> None:
    """Mark ``span`` as failed by ``exc`` (status, ``error.type``, an exception event)."""
    if not span.is_recording():
        return
    kind = type(exc).__qualname__
    span.set_attribute(attr.ERROR_TYPE, kind)
    span.record_exception(exc)
    text = str(exc)
    span.set_status(Status(StatusCode.ERROR, f"{kind}: {text}" if text else kind))


def _model_provider(model: Model) -> str | None:
    """The provider a model names itself (``OpenAIModel.provider_name``), when it does."""
    provider: object = getattr(model, "provider_name", None)
    return provider if isinstance(provider, str) and provider else None


def _changed(event: CompactionEvent) -> bool:
    """Whether ``event`` changed the history (a capability may report an attempt that did not)."""
    return bool(
        event.messages_before != event.messages_after
        or event.tokens_before != event.tokens_after
        or event.removed_tool_call_ids
        or event.cleared_tool_call_ids
    )


def compaction_attributes(event: CompactionEvent) -> dict[str, AttributeValue]:
    """The manifest of ``event`` as the attributes of a ``gen_ai.conversation.compaction`` event."""
    attributes: dict[str, AttributeValue] = {
        attr.COMPACTION_STRATEGY: event.strategy,
        attr.COMPACTION_REASON: event.reason,
        attr.COMPACTION_MESSAGES_BEFORE: event.messages_before,
        attr.COMPACTION_MESSAGES_AFTER: event.messages_after,
        attr.COMPACTION_TOKENS_BEFORE: event.tokens_before,
        attr.COMPACTION_TOKENS_AFTER: event.tokens_after,
        attr.COMPACTION_TOKENS_SAVED: event.tokens_saved,
        attr.COMPACTION_REMOVED_IDS: list(event.removed_tool_call_ids),
        attr.COMPACTION_CLEARED_IDS: list(event.cleared_tool_call_ids),
    }
    if event.details:
        attributes[attr.COMPACTION_DETAILS] = content_json(dict(event.details))
    return attributes


def _record_run(span: Span, outcome: object, capture: bool) -> None:
    if not isinstance(outcome, RunOutcome) or not span.is_recording():
        return
    span.set_attribute(attr.RUN_STATUS, outcome.status)
    span.set_attribute(attr.RUN_ITERATIONS, outcome.iterations)
    span.set_attribute(attr.USAGE_INPUT_TOKENS, outcome.usage.request_tokens)
    span.set_attribute(attr.USAGE_OUTPUT_TOKENS, outcome.usage.response_tokens)
    if outcome.pending_approvals:
        span.set_attribute(attr.RUN_PENDING_APPROVALS, len(outcome.pending_approvals))
    if capture and outcome.output is not None:
        message = {
            "role": "assistant",
            "parts": [{"type": "text", "content": outcome.output}],
            "finish_reason": "stop",
        }
        span.set_attribute(attr.OUTPUT_MESSAGES, content_json([message]))


def _record_request_content(span: Span, request: ModelCall) -> None:
    span.set_attribute(attr.INPUT_MESSAGES, input_messages(request.messages))
    system = system_instructions(request.messages)
    if system is not None:
        span.set_attribute(attr.SYSTEM_INSTRUCTIONS, system)
    definitions = tool_definitions(request.tools)
    if definitions is not None:
        span.set_attribute(attr.TOOL_DEFINITIONS, definitions)


def _record_response(span: Span, response: CanonicalMessage, capture: bool) -> None:
    if not span.is_recording():
        return
    if response.model_name:
        span.set_attribute(attr.RESPONSE_MODEL, response.model_name)
    if response.provider_name:
        span.set_attribute(attr.PROVIDER_NAME, response.provider_name)
    if response.provider_response_id:
        span.set_attribute(attr.RESPONSE_ID, response.provider_response_id)
    if response.finish_reason:
        span.set_attribute(attr.RESPONSE_FINISH_REASONS, [response.finish_reason])
    usage = response.usage
    if usage is not None:
        span.set_attribute(attr.USAGE_INPUT_TOKENS, usage.request_tokens)
        span.set_attribute(attr.USAGE_OUTPUT_TOKENS, usage.response_tokens)
        if usage.cached_tokens:
            span.set_attribute(attr.USAGE_CACHE_READ_INPUT_TOKENS, usage.cached_tokens)
        if usage.cache_write_tokens:
            span.set_attribute(attr.USAGE_CACHE_CREATION_INPUT_TOKENS, usage.cache_write_tokens)
    if capture:
        span.set_attribute(attr.OUTPUT_MESSAGES, output_messages(response))


def _error_type(error: str | None) -> str:
    """The class of a tool failure's ``"Type: message"`` text (``_OTHER`` when it names none)."""
    head = (error or "").split(":", 1)[0].strip()
    return head if head.isidentifier() else "_OTHER"


def _record_outcome(span: Span, outcome: ToolOutcome, call: ToolCall, capture: bool) -> None:
    if not span.is_recording():
        return
    span.set_attribute(attr.TOOL_OUTCOME, outcome.kind)
    span.set_attribute(attr.TOOL_ATTEMPTS, outcome.attempts)
    if outcome.kind == "failed":
        span.set_attribute(attr.ERROR_TYPE, _error_type(outcome.error))
        span.set_status(Status(StatusCode.ERROR, outcome.error or "the tool failed"))
    elif outcome.kind == "unknown":
        span.set_attribute(attr.ERROR_TYPE, "outcome_unknown")
        span.set_status(Status(StatusCode.ERROR, outcome.error or "the call's outcome is unknown"))
    if capture:
        _record_arguments(span, call)
        result = outcome.content if outcome.kind == "returned" else outcome.error
        if result is not None:
            text = result if isinstance(result, str) else content_json(result)
            span.set_attribute(attr.TOOL_CALL_RESULT, text)


def _record_arguments(span: Span, call: ToolCall) -> None:
    args = call.args
    span.set_attribute(attr.TOOL_CALL_ARGUMENTS, args if isinstance(args, str) else content_json(args))


_used: list[bool] = []


def _warn_used() -> None:
    """The experimental warning, once per process, when spans are first recorded (at the user's line)."""
    if not _used:
        _used.append(True)
        warn_experimental("harness_otel", skip=0)


class OTelPlugin:
    """Emit OpenTelemetry spans for runs, model requests, tool calls and compactions.

    Installing ``harness-otel`` registers one instance (the entry point ``plugin.otel``) in
    every default plugin manager (``Agent()``, ``harness.open_store()``, the CLI) and wherever
    entry points are loaded; it sends spans to the global tracer provider, a no-op until
    the application installs the SDK. Register one yourself to choose the provider or the
    content capture: ``agent.plugin_manager.register(OTelPlugin(tracer_provider=provider))``.

    Message content (prompts, responses, tool arguments and results) goes into spans only
    when opted in: ``capture_content=True``, or, when ``capture_content`` is left ``None``,
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` (read at the start of each run).

    Args:
        tracer_provider: Where the spans go (default: the global tracer provider, looked
            up each time a span starts, so one installed later is used).
        capture_content: ``True`` or ``False`` to decide content capture whatever the
            environment says; ``None`` (default) follows :data:`CAPTURE_CONTENT_ENV`.
        agent_name: ``gen_ai.agent.name`` of the runs, and the run span's name
            (``invoke_agent {agent_name}``; plain ``invoke_agent`` when ``None``).

    Raises:
        TypeError: ``tracer_provider`` is not an OpenTelemetry ``TracerProvider``,
            ``capture_content`` is not a bool or ``None``, or ``agent_name`` not a string.
        ValueError: ``agent_name`` is empty.
    """

    name: ClassVar[str] = "otel"
    """The registration name, the entry point's: registering a second one under it is refused."""

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        capture_content: bool | None = None,
        agent_name: str | None = None,
    ) -> None:
        if tracer_provider is not None and not isinstance(tracer_provider, TracerProvider):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                "OTelPlugin: tracer_provider must be an opentelemetry.trace.TracerProvider (for example "
                f"opentelemetry.sdk.trace.TracerProvider()), got {type(tracer_provider).__name__}"
            )
        if capture_content is not None and not isinstance(capture_content, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                "OTelPlugin: capture_content must be True, False or None, "
                f"got {type(capture_content).__name__}"
            )
        if agent_name is not None:
            if not isinstance(agent_name, str):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise TypeError(f"OTelPlugin: agent_name must be a string, got {type(agent_name).__name__}")
            if not agent_name.strip():
                raise ValueError("OTelPlugin: agent_name must not be empty (leave it None for no name)")
        self.tracer_provider = tracer_provider
        self.capture_content = capture_content
        self.agent_name = agent_name
        self._tracer = trace.get_tracer(INSTRUMENTATION_NAME, _version(), tracer_provider=tracer_provider)

    def __repr__(self) -> str:
        return (
            f"OTelPlugin(tracer_provider={self.tracer_provider!r}, "
            f"capture_content={self.capture_content!r}, agent_name={self.agent_name!r})"
        )

    def captures_content(self) -> bool:
        """Whether a run starting now records message content."""
        if self.capture_content is not None:
            return self.capture_content
        return capture_content_from_env()

    # -- per-run state ----------------------------------------------------------------------

    def _traces(self, state: dict[str, Any]) -> dict[OTelPlugin, _RunTrace]:
        traces = state.get(STATE_KEY)
        if not isinstance(traces, dict):
            traces = state[STATE_KEY] = {}
        return cast(dict[OTelPlugin, _RunTrace], traces)

    def _run_trace(self, state: Mapping[str, Any]) -> _RunTrace | None:
        traces = state.get(STATE_KEY)
        if not isinstance(traces, dict):
            return None
        return cast(dict[OTelPlugin, _RunTrace], traces).get(self)

    # -- the run ------------------------------------------------------------------------------

    @hookimpl(wrapper=True, tryfirst=True)
    def wrap_run(self, ctx: RunContext) -> Generator[None, object, object]:
        """An ``invoke_agent`` span around the run: its status, usage and errors."""
        capture = self.captures_content()
        conversation = ctx.session.session_id
        attributes: dict[str, AttributeValue] = {
            attr.OPERATION_NAME: attr.OPERATION_INVOKE_AGENT,
            attr.CONVERSATION_ID: conversation,
            attr.REQUEST_MODEL: ctx.model.model_name,
            attr.RUN_REQUEST_ID: ctx.request_id,
        }
        provider = _model_provider(ctx.model)
        if provider is not None:
            attributes[attr.PROVIDER_NAME] = provider
        name = attr.OPERATION_INVOKE_AGENT
        if self.agent_name is not None:
            attributes[attr.AGENT_NAME] = self.agent_name
            name = f"{name} {self.agent_name}"
        span = self._tracer.start_span(name, kind=SpanKind.INTERNAL, attributes=attributes)
        if span.is_recording():
            _warn_used()
        traces = self._traces(ctx.state)
        traces[self] = _RunTrace(span, capture, conversation, span.is_recording())
        if capture and ctx.prompt is not None and span.is_recording():
            with _guarded("the run's prompt"):
                prompt = {"role": "user", "parts": [{"type": "text", "content": ctx.prompt}]}
                span.set_attribute(attr.INPUT_MESSAGES, content_json([prompt]))
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            outcome = yield
        except GeneratorExit:
            raise
        except BaseException as exc:
            _fail(span, exc)
            raise
        else:
            with _guarded("the run's outcome"):
                _record_run(span, outcome, capture)
            return outcome
        finally:
            otel_context.detach(token)
            traces.pop(self, None)
            span.end()

    # -- model requests ---------------------------------------------------------------------

    @hookimpl(wrapper=True, trylast=True)
    def wrap_model_request(
        self, ctx: RequestContext, request: ModelCall
    ) -> Generator[None, CanonicalMessage, CanonicalMessage]:
        """A ``chat {model}`` span around each model call: model, usage, finish reason, errors."""
        run = self._run_trace(ctx.state)
        if run is not None and not run.recording:
            return (yield)  # an unsampled run (or no SDK): its calls are not recorded either
        model_name = request.model.model_name
        attributes: dict[str, AttributeValue] = {
            attr.OPERATION_NAME: attr.OPERATION_CHAT,
            attr.PROVIDER_NAME: _model_provider(request.model) or attr.OTHER_PROVIDER,
            attr.REQUEST_MODEL: model_name,
            attr.REQUEST_PURPOSE: request.purpose,
            attr.REQUEST_SOURCE: request.source,
            attr.REQUEST_ATTEMPT: request.attempts + 1,
        }
        settings = request.settings
        if settings.max_tokens is not None:
            attributes[attr.REQUEST_MAX_TOKENS] = settings.max_tokens
        if settings.temperature is not None:
            attributes[attr.REQUEST_TEMPERATURE] = settings.temperature
        if run is not None:
            attributes[attr.CONVERSATION_ID] = run.conversation_id
            if request.purpose == "request":
                if run.compacted:
                    run.compacted, run.compacted_call = False, request
                if run.compacted_call is request:
                    attributes[attr.COMPACTED] = True
        elif ctx.session is not None:
            attributes[attr.CONVERSATION_ID] = ctx.session.session_id
        span = self._tracer.start_span(f"chat {model_name}", kind=SpanKind.CLIENT, attributes=attributes)
        capture = run.capture if run is not None else self.captures_content()
        if capture and span.is_recording():
            with _guarded("the request's messages"):
                _record_request_content(span, request)
        before = request.attempts
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            response = yield
        except GeneratorExit:
            raise
        except BaseException as exc:
            _fail(span, exc)
            raise
        else:
            with _guarded("the response"):
                _record_response(span, response, capture)
            return response
        finally:
            otel_context.detach(token)
            span.set_attribute(attr.REQUEST_CALLS, request.attempts - before)
            span.end()

    # -- tool calls ---------------------------------------------------------------------------

    @hookimpl(wrapper=True, tryfirst=True)
    def wrap_tool_call(self, ctx: RunContext, call: ToolCall) -> Generator[None, ToolOutcome, object]:
        """An ``execute_tool {tool}`` span around each tool call: its outcome, failures, errors."""
        run = self._run_trace(ctx.state)
        if run is not None and not run.recording:
            return (yield)  # an unsampled run (or no SDK): its calls are not recorded either
        attributes: dict[str, AttributeValue] = {
            attr.OPERATION_NAME: attr.OPERATION_EXECUTE_TOOL,
            attr.TOOL_NAME: call.tool_name,
            attr.TOOL_CALL_ID: call.tool_call_id,
            attr.TOOL_TYPE: "function",
            attr.CONVERSATION_ID: ctx.session.session_id,
        }
        tool = call.tool
        if tool is not None and tool.description:
            attributes[attr.TOOL_DESCRIPTION] = tool.description
        span = self._tracer.start_span(
            f"execute_tool {call.tool_name}", kind=SpanKind.INTERNAL, attributes=attributes
        )
        capture = run.capture if run is not None else self.captures_content()
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            outcome = yield
        except GeneratorExit:
            raise
        except BaseException as exc:
            _fail(span, exc)
            if capture and span.is_recording():
                with _guarded("the tool call's arguments"):
                    _record_arguments(span, call)
            raise
        else:
            with _guarded("the tool call's outcome"):
                _record_outcome(span, outcome, call, capture)
            return outcome
        finally:
            otel_context.detach(token)
            span.end()

    # -- compactions --------------------------------------------------------------------------

    @hookimpl
    def on_compaction(self, ctx: RequestContext, event: CompactionEvent) -> None:
        """A ``gen_ai.conversation.compaction`` event on the run's span, with the edit's manifest.

        Outside a run (``harness.compact``), the event goes on a short span of its own,
        ``compaction {strategy}``.
        """
        with _guarded("a compaction"):
            attributes = compaction_attributes(event)
            run = self._run_trace(ctx.state)
            if run is not None:
                run.span.add_event(attr.COMPACTION_EVENT, attributes)
                if _changed(event):
                    run.compacted = True
                return
            span = self._tracer.start_span(
                f"compaction {event.strategy}", kind=SpanKind.INTERNAL, attributes=attributes
            )
            span.add_event(attr.COMPACTION_EVENT, attributes)
            span.end()
