"""The hook specifications every harness plugin and capability implements against.

A plugin is any object (module, class instance) with functions marked
``@harness.core.markers.hookimpl`` whose names match the hooks below. Implementations may
accept *fewer* arguments than the specification (pluggy passes only the ones they
name), so adding a parameter to a hook later does not break existing plugins.

pluggy itself cannot await coroutines, so the four context hooks
(``before_model_request``, ``after_node``, ``on_tool``, ``on_compaction``) are never
called through ``pm.hook.<name>(...)`` directly: :class:`harness.hooks.manager.PluginManager`
calls each implementation in a fixed order (:mod:`harness.hooks.ordering`) and awaits it
when it is ``async def`` (:mod:`harness.hooks.dispatch`). The decision hooks
(``count_tokens``, ``resolve_model``, ``resolve_store``) are called by the manager too, one implementation at
a time in pluggy's order, so that a failure names its plugin.

The middleware hooks (``wrap_model_request``, ``wrap_tool_call``, ``wrap_run``) take
*only* new-style wrapper implementations (``@hookimpl(wrapper=True)``): generator functions
that ``yield`` once to run the rest of the chain. pluggy's own dispatcher cannot await the
call between a wrapper's halves, so the manager drives the generators itself
(:mod:`harness.hooks.middleware`). Every other hook rejects wrappers (``wrapper=True`` /
``hookwrapper=True``), and old-style ``hookwrapper=True`` is rejected everywhere.

Call order for the context hooks: capabilities first, in their resolved order (the
order the user listed them, adjusted only by their ``runs_before`` / ``runs_after``
declarations), then every other plugin in registration order (``tryfirst`` plugins
before plain ones, ``trylast`` plugins after them). ``tryfirst`` / ``trylast`` do not
move a capability: its place is decided by the user's list.
"""

from __future__ import annotations

__all__ = [
    "after_model_response",
    "after_node",
    "before_model_request",
    "count_tokens",
    "on_compaction",
    "on_tool",
    "resolve_engine",
    "resolve_model",
    "resolve_store",
    "wrap_model_request",
    "wrap_run",
    "wrap_tool_call",
]

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from harness.core.markers import hookspec

if TYPE_CHECKING:
    from collections.abc import Generator

    from harness.capabilities.calls import ModelCall, ToolCall
    from harness.capabilities.context import CompactionEvent, RequestContext
    from harness.core.effects import ToolOutcome
    from harness.core.messages import CanonicalMessage
    from harness.core.model import Model
    from harness.core.nodes import Node
    from harness.session.store import SessionStore
    from harness.tools.context import RunContext
    from harness.tools.lifecycle import ToolEvent


# --------------------------------------------------------------------------------------
# Model requests: the history a capability may edit.
# --------------------------------------------------------------------------------------


@hookspec
def before_model_request(ctx: RequestContext) -> None:
    """Edit the history about to be sent to the model, in place.

    Signature: ``before_model_request(ctx: RequestContext) -> None``

    Called once before every model request of a run (and by ``harness.compact``),
    after the new request has been appended: ``ctx.messages`` ends with the request
    being sent. Implementations edit ``ctx.messages`` in place, preferably through
    ``ctx.replace_messages(...)``, which also reports a ``CompactionEvent``. Edits
    persist into the run's history and the session. Parts meant for this request only
    (for example a limit warning) go through ``ctx.add_request_scoped(part, source=...)``
    and are never stored.

    Ordering: capabilities run in the order the user listed them, after applying
    their declared ``runs_before`` / ``runs_after`` constraints; each one sees its
    predecessor's output. Other plugins run after every capability, in registration
    order.

    Return value: must be ``None``; the history is edited in place. Returning
    anything else raises ``CapabilityError`` (a hint for code ported from frameworks
    whose hook returns the context).

    Async: ``async def`` implementations are allowed and awaited in order, one at a
    time. Wrapper implementations are rejected.

    Invariant guard: if an implementation leaves the history with a violation it did
    not have before (a tool call split from its answer, two requests in a row, ...),
    the history is restored to what it was before that implementation ran and
    ``CapabilityError`` names the capability. If the implementation raises, the
    history is restored too and ``CapabilityError`` naming it is raised from the
    original exception (``asyncio.CancelledError`` and ``KeyboardInterrupt`` propagate
    unchanged).

    Args:
        ctx: The request about to be made: history, token counter, model, usage,
            request-scoped parts and per-run plugin state.
    """


# --------------------------------------------------------------------------------------
# Middleware: wrappers around each model call, each tool call and the whole run.
# --------------------------------------------------------------------------------------

_F = TypeVar("_F", bound=Callable[..., Any])

_WRAPPER_RULES = """

    A wrapper is a generator function marked ``@hookimpl(wrapper=True)``:

    * code before its ``yield`` runs before the call; ``result = yield`` runs the rest of
      the chain (inner wrappers, then the call itself) and gives its result, or raises its
      exception at the ``yield`` (catch it to recover);
    * ``return value`` makes ``value`` the result the outer wrappers and the run see;
    * returning *before* the first ``yield`` short-circuits: the inner wrappers and the
      call itself do not run;
    * yielding *again* after a result or an exception runs the rest of the chain again,
      with the fields as the wrapper left them (a retry, a fallback model).

    Ordering: wrappers run outermost-first in the order of the other context hooks:
    capabilities in their resolved order, then other plugins in registration order
    (``tryfirst`` plugins outermost, ``trylast`` innermost).

    Async: a wrapper is a plain generator (the call it wraps is awaited while the wrapper
    is suspended at its ``yield``) or, since 0.2, an async generator (``async def`` with a
    ``yield``) that may ``await`` before and after the call: an approver asking a
    service, a rate limiter, a lock. An async generator cannot ``return`` a value; it
    gives its result with ``yield Return(value)`` (``harness.hooks.Return``; before the
    first bare ``yield`` it short-circuits), ends without one to pass the chain's result
    on, and yields bare again to re-run the chain.

    Errors: an exception a wrapper raises (other than re-raising the one it received at
    its ``yield``) ends the run with ``CapabilityError`` naming the plugin, chained to
    the exception, after the history was repaired and saved; ``RunStopped`` subclasses
    and interrupts (``asyncio.CancelledError``, ``KeyboardInterrupt``) propagate
    unchanged. A wrapper that is not a generator, or that yields a value, raises
    ``CapabilityError`` too.

    Without any implementation the hook costs nothing: the call is made directly.
"""


def _wrapper_hook(function: _F) -> _F:
    """Append the rules every wrapper hook shares to ``function``'s documentation."""
    function.__doc__ = (function.__doc__ or "").rstrip() + "\n" + _WRAPPER_RULES
    return function


@hookspec
@_wrapper_hook
def wrap_model_request(
    ctx: RequestContext, request: ModelCall
) -> Generator[None, CanonicalMessage, CanonicalMessage]:  # pyright: ignore[reportReturnType]
    """Wrap each model call: change the request, retry it, replace it, or change the response.

    Signature: ``wrap_model_request(ctx: RequestContext, request: ModelCall) -> Generator[None, CanonicalMessage, CanonicalMessage]``

    Called for every model request of a run, after ``before_model_request`` built it, and
    for every model call a capability makes through ``ctx.request_model`` (the summarizer;
    ``request.purpose == "capability"``). ``request`` is mutable: assign
    ``request.model``, ``request.messages``, ``request.tools`` or ``request.settings``
    before yielding to change what is sent. ``request.attempts`` counts the calls made so
    far, and ``request.answered_by`` names the model that answered.

    Return value: the response message (a ``CanonicalMessage`` of kind ``"response"``);
    ``return (yield)`` passes the chain's response on unchanged. Anything else raises
    ``CapabilityError`` naming the plugin. The response is stored and acted on after
    ``after_model_response``.

    Invariant guard: when a wrapper changed ``request.messages``, the new request is
    checked before it is sent; a violation it did not have before (a tool call split from
    its answer, ...) raises ``CapabilityError`` naming the wrapper, and the stored history
    is untouched (wrappers edit what is sent, never what is stored).

    Under a durable engine each call the chain makes is one journaled unit, so wrappers
    must decide from their inputs only (no clock, no randomness) to replay identically.

    Args:
        ctx: The request being made (history, usage, per-run state); for a capability's
            call, the request during which the capability made it.
        request: The call: what is sent, to which model, and how often it was tried.
    """  # noqa: E501 - the signature line is quoted whole


@hookspec
@_wrapper_hook
def wrap_tool_call(ctx: RunContext, call: ToolCall) -> Generator[None, ToolOutcome, object]:  # pyright: ignore[reportReturnType]
    """Wrap each tool call: change its arguments, answer it yourself, refuse it, change its result.

    Signature: ``wrap_tool_call(ctx: RunContext, call: ToolCall) -> Generator[None, ToolOutcome, object]``

    Called for every tool call of a run, once it is registered and started, before its
    arguments are validated: ``call.args`` holds the model's arguments (a dict, or the raw
    text when they are not JSON) and may be reassigned. ``call.tool`` is the agent's tool
    (``None`` for an unknown tool); ``call.decision`` holds the human decision given to
    ``agent.run(..., approvals=...)`` for a call that was held back.

    Return value: the call's result. ``result = yield`` gives the chain's
    :class:`~harness.core.effects.ToolOutcome`; return it, another ``ToolOutcome`` (for
    example ``ToolOutcome("deferred", error="awaiting approval")`` to hold the call back and
    pause the run with ``status="awaiting_approval"``), or any JSON-ready value, which
    becomes the tool's return the model sees (``return "refused by policy"``). Raise
    ``ToolRetry(message)`` to send the model a retry prompt instead.

    Invariant guard: a wrapper cannot rename a call or change its id (both are read-only);
    a result that is neither a ``ToolOutcome`` nor JSON-ready raises ``CapabilityError``.

    Args:
        ctx: The tool's run context (the run, the call's id and tool name, retries so far).
        call: The call: its arguments, the tool, the human decision when resuming.
    """


@hookspec
@_wrapper_hook
def wrap_run(ctx: RunContext) -> Generator[None, object, object]:  # pyright: ignore[reportReturnType]
    """Wrap a whole run: everything from its start to its result or its error.

    Signature: ``wrap_run(ctx: RunContext) -> Generator[None, object, object]``

    Called once per ``Agent.run`` (and ``run_stream``), after the run's state was set up and
    before the session is touched. ``result = yield`` gives the run's
    :class:`~harness.run.orchestrator.RunOutcome` (``status``, ``output``, usage), or
    raises the run's error (``UserAbort``, ``MaxIterationsExceeded``...), after the
    history was saved. Meant for spans, timers and logs around a run.

    Return value: ignored; return ``None`` (or the result). A wrapper cannot short-circuit
    a run: returning before the first ``yield`` raises ``CapabilityError``.

    Args:
        ctx: The run's context: its session, prompt, request id and state.
    """


@hookspec
def after_model_response(ctx: RequestContext, response: CanonicalMessage) -> CanonicalMessage | None:
    """Edit each model response before it is stored and acted on.

    Signature: ``after_model_response(ctx: RequestContext, response: CanonicalMessage) -> CanonicalMessage | None``

    Called once per model request of a run, after the ``wrap_model_request`` chain returned
    and the response was normalised (model name and timestamp filled in), before its tool
    calls run and before it is stored. Redaction and output filters belong here.

    Ordering: capabilities first in their resolved order, then other plugins in
    registration order; each sees its predecessor's output.

    Return value: a replacement response (a ``CanonicalMessage`` of kind ``"response"``),
    or ``None`` to keep it as it is.

    Async: ``async def`` implementations are allowed and awaited in order.

    Invariant guard: a replacement that would make the history invalid (a tool-call id
    used twice, not a response) is refused: ``CapabilityError`` names the plugin and the
    response is not stored. An implementation that raises ends the run with
    ``CapabilityError`` naming it, the history intact.

    Args:
        ctx: The request that was sent (history, usage, per-run state).
        response: The response, as the previous implementation left it.
    """  # noqa: E501 - the signature line is quoted whole


# --------------------------------------------------------------------------------------
# Observers: the run as it happens. They receive frozen objects and must not edit them.
# --------------------------------------------------------------------------------------


@hookspec
def after_node(ctx: RunContext, node: Node) -> None:
    """Observe a node of the agent loop after it ran.

    Signature: ``after_node(ctx: RunContext, node: Node) -> None``

    Called after every node of a run completes (a model request, a round of tool
    calls, the end node), before the loop moves on to the next node.

    Ordering: capabilities first in their resolved order, then other plugins in
    registration order.

    Return value: ignored; return ``None``. The hook is an observer and must not edit
    the run's history.

    Async: ``async def`` implementations are allowed and awaited in order. An
    implementation that raises stops the run with ``CapabilityError`` naming the
    plugin, chained to the original exception.

    Args:
        ctx: The run's context (history, usage, iteration count).
        node: The node that just ran.
    """


@hookspec
def on_tool(ctx: RunContext, event: ToolEvent) -> None:
    """Observe a tool call changing state (started, returned, failed, retried).

    Signature: ``on_tool(ctx: RunContext, event: ToolEvent) -> None``

    Called by the tool-call registry each time a tool call's status changes, in the
    order the changes happen.

    Ordering: capabilities first in their resolved order, then other plugins in
    registration order.

    Return value: ignored; return ``None``. The event is frozen.

    Async: ``async def`` implementations are allowed and awaited in order. An
    implementation that raises stops the run with ``CapabilityError`` naming the
    plugin, chained to the original exception.

    Args:
        ctx: The run's context.
        event: What happened to which tool call.
    """


@hookspec
def on_compaction(ctx: RequestContext, event: CompactionEvent) -> None:
    """Observe an edit a capability made to the history.

    Signature: ``on_compaction(ctx: RequestContext, event: CompactionEvent) -> None``

    Called each time a capability reports an edit through ``ctx.report(event)`` (which
    ``ctx.replace_messages`` does for every change it makes). Synchronous
    implementations run immediately, inside the capability's step; ``async def``
    implementations are awaited, in order, right after that capability's step ends.
    If the step is then rolled back by the invariant guard, the pending async
    implementations are not awaited; synchronous ones have already seen the event.

    Ordering: capabilities first in their resolved order, then other plugins in
    registration order.

    Return value: ignored; return ``None``. The event is frozen. To tell the model
    something about the edit, call ``ctx.add_request_scoped(part, source=...)``: the part
    is sent with the request being prepared (the first one after the compaction) and
    never stored.

    Async: ``async def`` implementations are allowed (see above). An implementation
    that raises ends the request with ``CapabilityError`` naming the plugin.

    Args:
        ctx: The request being prepared, with the history after the edit.
        event: The edit: strategy, reason, message and token counts before and after,
            tool calls removed or cleared.
    """


# --------------------------------------------------------------------------------------
# Decisions: the first plugin with an answer wins.
# --------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def count_tokens(text: str, model_name: str | None) -> int | None:
    """Count the tokens of ``text`` with another tokenizer than tiktoken.

    Signature: ``count_tokens(text: str, model_name: str | None) -> int | None``

    Called by the token counter a ``PluginManager`` hands out (see
    ``PluginManager.token_counter``) for every text it has not counted before; results
    are cached per part and message, so the hook is not called again for unchanged
    history.

    Ordering: pluggy's order (last registered first; ``tryfirst`` / ``trylast``
    respected). Stops at first non-None result (``firstresult``).

    Return value: the number of tokens (a non-negative ``int``), or ``None`` to let the
    next implementation, and finally tiktoken, answer (for example for a model the
    plugin does not know). Another value, or an exception, raises ``CapabilityError``
    naming the plugin (the exception chained).

    Async: not allowed; ``async def`` implementations are rejected when the plugin is
    registered, because token counting runs inside synchronous code.

    Args:
        text: The text to count.
        model_name: Name of the model the text is sent to, when known.
    """


@hookspec(firstresult=True)
def resolve_model(model_string: str) -> Model | None:
    """Turn a model string such as ``"myprovider:some-model"`` into a model.

    Signature: ``resolve_model(model_string: str) -> Model | None``

    Called by ``harness.models.resolve.resolve_model`` (and so by ``Agent("...")`` and
    the CLI's ``--model``) each time a model is given as a string, before the built-in
    providers are tried. The built-in ``openai:``, ``anthropic:``, ``ollama:`` and ``test``
    prefixes are resolved by fallback code that runs only when every implementation
    returned ``None``, so a plugin can add a provider or replace a built-in one.

    Ordering: pluggy's order (last registered first; ``tryfirst`` / ``trylast``
    respected). Stops at first non-None result (``firstresult``).

    Return value: a :class:`~harness.core.model.Model` (anything with ``model_name``,
    ``context_window`` and ``async request(...)``), or ``None`` to let the next
    implementation, and finally the built-in providers, answer. Any other value raises
    ``ModelResolutionError``; an exception raises ``CapabilityError`` naming the plugin
    (the exception chained).

    Async: not allowed; the hook must return the model itself, because resolution runs
    in synchronous code (``Agent.__init__``). An awaitable result raises
    ``ModelResolutionError``.

    Args:
        model_string: The string as the user wrote it, stripped of surrounding blanks
            (for example ``"openai:gpt-4o-mini"``).
    """


@hookspec(firstresult=True)
def resolve_store(url: str, read_only: bool) -> SessionStore | None:
    """Open the session store a URL names, such as ``"postgresql://app@db/agents"``.

    Signature: ``resolve_store(url: str, read_only: bool) -> SessionStore | None``

    Called by :func:`harness.stores.open_store` when it is given a plugin manager (as
    ``harness.open_store``, ``harness run --store`` and ``harness sessions --store`` do),
    before the built-in ``sqlite:`` and ``file:`` schemes are tried, so a plugin can add
    a backend or replace a built-in one. ``harness-postgres`` answers ``postgresql://``
    and ``postgres://`` this way.

    Ordering: pluggy's order (last registered first; ``tryfirst`` / ``trylast``
    respected). Stops at first non-None result (``firstresult``).

    Return value: an object implementing :class:`~harness.session.store.SessionStore`,
    or ``None`` to let the next implementation, and finally the built-in stores, answer.
    Any other value raises ``StoreResolutionError``. A ``SessionStoreError`` (the store
    cannot be used) or ``StoreResolutionError`` (a URL the plugin refuses) raised by the
    implementation propagates unchanged; any other exception raises ``CapabilityError``
    naming the plugin (the exception chained).

    Async: not allowed; stores are opened by synchronous code.

    Args:
        url: The URL as the user wrote it, stripped of surrounding blanks.
        read_only: The caller only reads (``harness sessions list``...): open a store that
            exists already, create and migrate nothing, and refuse writes; a missing store
            raises ``SessionStoreError``. An implementation may leave this argument out.
    """


@hookspec(firstresult=True)
def resolve_engine(name: str) -> object | None:
    """Give the worker command of a durable-execution engine, such as ``"dbos"`` or ``"temporal"``.

    Signature: ``resolve_engine(name: str) -> object | None``

    Called by ``harness worker NAME ...`` (and :meth:`PluginManager.resolve_engine
    <harness.hooks.manager.PluginManager.resolve_engine>`) to find the engine plugin
    that runs workers for ``name``. ``harness-dbos`` answers ``"dbos"``,
    ``harness-temporal`` answers ``"temporal"``.

    Ordering: pluggy's order (last registered first; ``tryfirst`` / ``trylast``
    respected). Stops at first non-None result (``firstresult``).

    Return value: a ``click`` command (or group) that ``harness worker NAME`` invokes with
    the rest of the command line, or ``None`` when the plugin does not know ``name``.
    Any other exception than ``HarnessError`` raises ``CapabilityError`` naming the plugin.

    Async: not allowed; the command line is synchronous.

    Args:
        name: The engine's name as the user wrote it, lowercased.
    """
