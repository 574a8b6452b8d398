"""Driving the middleware hooks: pluggy-style wrappers, awaited across their ``yield``.

pluggy calls a new-style wrapper (``@hookimpl(wrapper=True)``) around the other
implementations of a hook, but its dispatcher is synchronous: it cannot await the model
or tool call between a wrapper's two halves. The manager therefore drives the wrapper
generators itself, here, outermost first:

* the wrapper runs up to its ``yield``; returning before it short-circuits the chain;
* the rest of the chain (inner wrappers, finally the call itself) is awaited;
* its result is sent back in at the ``yield``, or its exception thrown in there;
* the wrapper's return value becomes the result; yielding again re-runs the rest.

A wrapper may also be an **async generator** (``@hookimpl(wrapper=True) async def ...``),
so it can ``await`` around the call: an approver asking a service, a rate limiter, a lock.
An async generator cannot ``return`` a value, so it gives its result by yielding it
wrapped: ``yield Return(value)`` makes ``value`` the result (before the first bare
``yield`` it short-circuits the chain); a bare ``yield`` runs (again) the rest of the
chain and receives its result; ending without a ``Return`` passes the chain's last result
on.

An exception a wrapper raises (other than the one thrown into it) becomes a
:class:`~harness.errors.CapabilityError` naming the plugin; :data:`PASSTHROUGH`
exceptions propagate unchanged.

:class:`Middleware` is the part of :class:`~harness.hooks.manager.PluginManager` that
offers these calls, and ``after_model_response``.
"""

from __future__ import annotations

__all__ = ["DEFERRED_BY", "PASSTHROUGH", "WRAPPER_HOOKS", "Middleware", "Return", "run_wrappers"]

import contextlib
import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any, Final, cast

import attrs
import pluggy

from harness.core.effects import ToolOutcome, TrackedMessages, tool_content
from harness.core.messages import CanonicalMessage
from harness.errors import CapabilityError, RunStopped
from harness.history.invariants import check_invariants
from harness.hooks.dispatch import INTERRUPTS, bind, hook_failure
from harness.hooks.tracing import Trace

if TYPE_CHECKING:
    from harness.capabilities.calls import ModelCall, ToolCall
    from harness.capabilities.context import RequestContext
    from harness.tools.context import RunContext

WRAPPER_HOOKS: Final = frozenset({"wrap_model_request", "wrap_tool_call", "wrap_run"})
"""Hooks whose implementations must be ``@hookimpl(wrapper=True)`` generator functions."""

DEFERRED_BY: Final = "deferred_by"
"""Key of ``call.notes`` naming the wrapper (its plugin) that held a call back."""

PASSTHROUGH: Final = (*INTERRUPTS, RunStopped)
"""Exceptions a wrapper may raise on purpose: they propagate unchanged."""


@attrs.frozen
class Return:
    """What an async-generator wrapper yields to give its result: ``yield Return(value)``.

    Attributes:
        value: The result (the same values a synchronous wrapper's ``return`` may give).
    """

    value: object


_Coerce = Callable[[str, object], Any]
_Check = Callable[[str], None]


def run_wrappers(
    impls: Sequence[pluggy.HookImpl],
    kwargs: dict[str, object],
    hook_name: str,
    innermost: Callable[[], Awaitable[Any]],
    *,
    coerce: _Coerce,
    before_inner: _Check | None = None,
    short_circuit: bool = True,
    trace: Trace | None = None,
) -> Awaitable[Any]:
    """Run ``innermost`` wrapped by ``impls`` (outermost first) and return the chain's result.

    Args:
        impls: The wrapper implementations, outermost first.
        kwargs: The hook's arguments; each wrapper gets the ones it names.
        hook_name: The hook, for messages and the trace.
        innermost: The call itself.
        coerce: Turns a wrapper's return value into the result (``(plugin, value)``);
            raises ``CapabilityError`` for a value it refuses.
        before_inner: Called with the wrapper's name each time a wrapper yields, before
            the rest of the chain runs (the invariant guard of what it changed).
        short_circuit: Whether a wrapper may return before yielding.
        trace: Traces each wrapper entering and leaving.
    """

    async def chain(index: int) -> Any:
        if index == len(impls):
            return await innermost()
        impl = impls[index]
        name = impl.plugin_name
        if trace is not None:
            trace(f"{hook_name} -> {name}")
        driver = _start(impl, kwargs, hook_name)
        try:
            step = await driver.send(None)
        except PASSTHROUGH:
            raise
        except CapabilityError:
            raise
        except Exception as exc:
            raise hook_failure(name, f"{hook_name} wrapper", exc) from exc
        if step.done:
            if not short_circuit or step.missing:
                raise CapabilityError(
                    name,
                    f"{hook_name} wrapper returned before it yielded; it must yield once to run the call",
                ) from None
            if trace is not None:
                trace(f"{hook_name} <- {name}: short-circuited")
            return coerce(name, step.value)
        while True:
            _check_yielded(driver, name, hook_name, step.value)
            if before_inner is not None:
                try:
                    before_inner(name)
                except CapabilityError:
                    await driver.close()
                    raise
            try:
                result = await chain(index + 1)
            except BaseException as exc:  # thrown in at the yield: the wrapper may recover
                step = await _throw(driver, exc, name, hook_name)
                if step.done:
                    if step.missing:
                        raise exc from None  # an async wrapper that ended without a result re-raises
                    return coerce(name, step.value)
                continue
            try:
                step = await driver.send(result)
            except PASSTHROUGH:
                raise
            except CapabilityError:
                raise
            except Exception as exc:
                raise hook_failure(name, f"{hook_name} wrapper", exc) from exc
            if step.done:
                if trace is not None:
                    trace(f"{hook_name} <- {name}")
                return coerce(name, result if step.missing else step.value)

    return chain(0)


@attrs.define
class _Step:
    """What a wrapper did at one resumption: yielded (``done`` false) or finished with a value."""

    done: bool
    value: object = None
    missing: bool = False
    """An async wrapper ended without a ``Return``: no value of its own."""


class _Driver:
    """One wrapper's generator, synchronous or asynchronous, driven step by step."""

    def __init__(self, generator: Generator[Any, Any, Any] | AsyncGenerator[Any, Any]) -> None:
        self.generator = generator

    @property
    def is_async(self) -> bool:
        return inspect.isasyncgen(self.generator)

    def _yielded(self, value: object) -> _Step:
        if self.is_async and isinstance(value, Return):
            return _Step(True, value.value)
        return _Step(False, value)

    async def send(self, value: object) -> _Step:
        generator = self.generator
        if isinstance(generator, AsyncGenerator):
            try:
                return self._yielded(await generator.asend(value))
            except StopAsyncIteration:
                return _Step(True, None, missing=True)
        try:
            return _Step(False, generator.send(value))
        except StopIteration as stop:
            return _Step(True, stop.value)

    async def throw(self, exc: BaseException) -> _Step:
        generator = self.generator
        if isinstance(generator, AsyncGenerator):
            try:
                return self._yielded(await generator.athrow(exc))
            except StopAsyncIteration:
                return _Step(True, None, missing=True)
        try:
            return _Step(False, generator.throw(exc))
        except StopIteration as stop:
            return _Step(True, stop.value)

    async def close(self) -> None:
        generator = self.generator
        if isinstance(generator, AsyncGenerator):
            await generator.aclose()
        else:
            generator.close()


def _start(impl: pluggy.HookImpl, kwargs: dict[str, object], hook_name: str) -> _Driver:
    name = impl.plugin_name
    try:
        generator = bind(impl, kwargs)()
    except PASSTHROUGH:
        raise
    except Exception as exc:
        raise hook_failure(name, f"{hook_name} wrapper", exc) from exc
    if not inspect.isgenerator(generator) and not inspect.isasyncgen(generator):
        raise CapabilityError(
            name,
            f"{hook_name} wrapper returned {type(generator).__name__} instead of a generator; "
            "a wrapper yields once to run the call (result = yield)",
        )
    return _Driver(cast("Generator[Any, Any, Any] | AsyncGenerator[Any, Any]", generator))


def _check_yielded(driver: _Driver, name: str, hook_name: str, yielded: object) -> None:
    if yielded is not None:
        generator = driver.generator
        if isinstance(generator, Generator):
            generator.close()
        how = "yield Return(value) to give a result" if driver.is_async else "return the result instead"
        raise CapabilityError(
            name,
            f"{hook_name} wrapper yielded {type(yielded).__name__}; yield nothing (result = yield) and {how}",
        )


async def _throw(driver: _Driver, exc: BaseException, name: str, hook_name: str) -> _Step:
    """Throw ``exc`` into the wrapper at its ``yield``."""
    if isinstance(exc, INTERRUPTS):
        with contextlib.suppress(BaseException):  # the interrupt wins whatever the wrapper did
            await driver.throw(exc)
        with contextlib.suppress(BaseException):
            await driver.close()
        raise exc
    try:
        return await driver.throw(exc)
    except BaseException as raised:
        if raised is exc or isinstance(raised, PASSTHROUGH):
            raise
        if isinstance(raised, Exception):
            raise hook_failure(name, f"{hook_name} wrapper", raised) from raised
        raise


# -- what each hook's result must be ----------------------------------------------------


def model_response(name: str, value: object) -> CanonicalMessage:
    """A ``wrap_model_request`` wrapper's result: a response message."""
    if isinstance(value, CanonicalMessage) and value.kind == "response":
        return value
    raise CapabilityError(
        name,
        f"wrap_model_request wrapper returned {_describe(value)}; return the response message "
        "(return (yield) passes the model's on)",
    )


def tool_outcome(name: str, value: object) -> ToolOutcome:
    """A ``wrap_tool_call`` wrapper's result: an outcome, or JSON-ready content the model reads."""
    if isinstance(value, ToolOutcome):
        return value
    if value is None:
        raise CapabilityError(
            name,
            "wrap_tool_call wrapper returned None; return the result (return (yield)), "
            "a ToolOutcome, or the content the model should read",
        )
    return ToolOutcome("returned", content=tool_content(value))


def _describe(value: object) -> str:
    if isinstance(value, CanonicalMessage):
        return f"a {value.kind} message"
    return "None" if value is None else type(value).__name__


class Middleware:
    """The middleware calls of :class:`~harness.hooks.manager.PluginManager` (a mixin).

    The manager provides ``_ordered_impls(hook)`` and ``_trace``.
    """

    def _ordered_impls(self, hook_name: str) -> list[pluggy.HookImpl]:
        raise NotImplementedError  # pragma: no cover - provided by the manager

    @property
    def _trace(self) -> Trace | None:
        raise NotImplementedError  # pragma: no cover - provided by the manager

    def has_middleware(self, hook_name: str) -> bool:
        """Whether any plugin implements ``hook_name`` (the run skips the machinery when not)."""
        return bool(self._ordered_impls(hook_name))

    async def wrap_model_request(
        self,
        ctx: RequestContext,
        request: ModelCall,
        send: Callable[[ModelCall], Awaitable[CanonicalMessage]],
    ) -> CanonicalMessage:
        """Make ``send(request)`` through every ``wrap_model_request`` wrapper.

        Raises:
            CapabilityError: A wrapper raised, returned something other than a response,
                or changed ``request.messages`` into a request with a new invariant violation.
        """
        impls = self._ordered_impls("wrap_model_request")
        if not impls:
            return await send(request)
        guard = _RequestGuard(request)

        async def innermost() -> CanonicalMessage:
            return await send(request)

        kwargs: dict[str, object] = {"ctx": ctx, "request": request}
        return await run_wrappers(
            impls,
            kwargs,
            "wrap_model_request",
            innermost,
            coerce=model_response,
            before_inner=guard.check,
            trace=self._trace,
        )

    async def wrap_tool_call(
        self,
        ctx: RunContext,
        call: ToolCall,
        run: Callable[[ToolCall], Awaitable[ToolOutcome]],
    ) -> ToolOutcome:
        """Make ``run(call)`` through every ``wrap_tool_call`` wrapper.

        Raises:
            CapabilityError: A wrapper raised or returned something that is not a result.
        """
        impls = self._ordered_impls("wrap_tool_call")

        async def innermost() -> ToolOutcome:
            return await run(call)

        if not impls:
            return await innermost()

        def coerce(name: str, value: object) -> ToolOutcome:
            outcome = tool_outcome(name, value)
            if outcome.kind == "deferred":
                call.notes.setdefault(DEFERRED_BY, name)  # the innermost wrapper that held it back
            return outcome

        kwargs: dict[str, object] = {"ctx": ctx, "call": call}
        return await run_wrappers(
            impls, kwargs, "wrap_tool_call", innermost, coerce=coerce, trace=self._trace
        )

    async def wrap_run(self, ctx: RunContext, run: Callable[[], Awaitable[Any]]) -> Any:
        """Run ``run()`` inside every ``wrap_run`` wrapper; its result is never replaced.

        Raises:
            CapabilityError: A wrapper raised, or returned before it yielded.
        """
        impls = self._ordered_impls("wrap_run")
        if not impls:
            return await run()
        outcome: dict[str, Any] = {}

        async def innermost() -> Any:
            outcome["value"] = await run()
            return outcome["value"]

        def keep(_name: str, _value: object) -> Any:
            return outcome["value"]

        kwargs: dict[str, object] = {"ctx": ctx}
        return await run_wrappers(
            impls, kwargs, "wrap_run", innermost, coerce=keep, short_circuit=False, trace=self._trace
        )

    async def run_after_model_response(
        self, ctx: RequestContext, response: CanonicalMessage
    ) -> CanonicalMessage:
        """Pass ``response`` through every ``after_model_response`` implementation, in order.

        Args:
            ctx: The request that was sent; ``ctx.messages``, the history the response
                will follow, is what the invariant guard checks against.
            response: The normalised response.

        Raises:
            CapabilityError: An implementation raised, returned something other than a
                response or ``None``, or a replacement would break the history's invariants.
        """
        history = ctx.messages
        impls = self._ordered_impls("after_model_response")
        for impl in impls:
            name = impl.plugin_name
            if self._trace is not None:
                self._trace(f"after_model_response -> {name}")
            try:
                answer = bind(impl, {"ctx": ctx, "response": response})()
                if inspect.isawaitable(answer):
                    answer = await answer
            except PASSTHROUGH:
                raise
            except CapabilityError:
                raise
            except Exception as exc:
                raise hook_failure(
                    name, "after_model_response", exc, " (the response was not stored)"
                ) from exc
            if answer is None or answer is response:
                continue
            replacement = model_response(name, answer) if isinstance(answer, CanonicalMessage) else None
            if replacement is None:
                raise CapabilityError(
                    name,
                    f"after_model_response returned {_describe(answer)}; return a response message or None",
                )
            _guard_response(name, history, response, replacement)
            response = replacement
        return response


class _RequestGuard:
    """The invariant guard of what ``wrap_model_request`` wrappers change in ``request.messages``.

    Whether a wrapper changed anything is known in constant time
    (:meth:`~harness.capabilities.calls.ModelCall.messages_changed`); the request is
    checked only then.
    """

    def __init__(self, request: ModelCall) -> None:
        self.request = request
        self.original = request.messages
        self.baseline: set[str] | None = None

    def check(self, name: str) -> None:
        """Refuse the request ``name`` left when it has a violation the original did not."""
        request = self.request
        if not request.messages_changed():
            return
        if self.baseline is None:
            before = self.original
            original = before.before_changes() if isinstance(before, TrackedMessages) else list(before)
            self.baseline = {str(v) for v in check_invariants(original)}
        new = [v for v in check_invariants(list(request.messages)) if str(v) not in self.baseline]
        if new:
            raise CapabilityError(
                name, f"wrap_model_request wrapper changed the request into an invalid one: {new[0]}"
            )
        request.mark_checked()


def _guard_response(
    name: str, history: Sequence[CanonicalMessage], before: CanonicalMessage, after: CanonicalMessage
) -> None:
    """Refuse a replacement response that adds an invariant violation to ``history``."""
    tail = list(history[-1:])  # the request it answers: enough for pairing and alternation
    old = {str(v) for v in check_invariants([*tail, before])}
    new = [v for v in check_invariants([*tail, after]) if str(v) not in old]
    ids = [call.tool_call_id for call in after.tool_calls]
    if len(ids) != len(set(ids)):
        raise CapabilityError(name, "after_model_response returned a response that uses a tool-call id twice")
    known = {p.tool_call_id for m in history for p in m.tool_calls}
    reused = sorted(set(ids) & known - {c.tool_call_id for c in before.tool_calls})
    if reused:
        raise CapabilityError(
            name,
            f"after_model_response returned a response reusing tool-call id {reused[0]!r} of the history",
        )
    if new:
        raise CapabilityError(
            name, f"after_model_response returned a response that breaks the history: {new[0]}"
        )
