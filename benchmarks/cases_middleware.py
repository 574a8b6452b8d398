"""Middleware benchmark: what the wrapper hooks cost per model request and per tool call.

The loop's own per-request figure (``loop`` group) varies by 10-30 % between runs on a
shared machine, more than the machinery measured here, so this group times the two calls
the wrappers sit around directly, in process, with a model and a tool that answer at once:

* ``middleware.model_request``: one model request through the run's caller, with no
  wrapper and with three pass-through ``wrap_model_request`` wrappers, on requests of
  100, 1,000 and 10,000 messages (the cost must not grow with the request);
* ``middleware.tool_call``: one tool call through the executor, with no wrapper and with
  three pass-through ``wrap_tool_call`` wrappers.
"""

from __future__ import annotations

__all__ = ["middleware_cases"]

from collections.abc import Generator, Iterator
from typing import Any

from _timing import Measurement, measure_async

from harness.core import CanonicalMessage, TextPart, ToolCallPart, build_outgoing

WRAPPERS = 3


class _PassThrough:
    """Pass-through wrappers of the model and the tool calls."""

    def __init__(self) -> None:
        from harness.hooks import hookimpl

        def wrap_model_request(request: Any) -> Generator[None, Any, Any]:
            del request
            return (yield)

        def wrap_tool_call(call: Any) -> Generator[None, Any, Any]:
            del call
            return (yield)

        self.wrap_model_request = hookimpl(wrapper=True)(wrap_model_request)
        self.wrap_tool_call = hookimpl(wrapper=True)(wrap_tool_call)


def _manager(wrappers: int) -> Any:
    from harness.hooks import PluginManager

    manager = PluginManager()
    for index in range(wrappers):
        manager.register(_PassThrough(), name=f"pass_through_{index}")
    return manager


def _model_request(size: int, wrappers: int) -> Measurement:
    from harness.capabilities import RequestContext
    from harness.core import InProcessEffects, ModelRequestUnit
    from harness.models.function import FunctionModel
    from harness.run.model_calls import ModelCaller
    from harness.tokens import TokenCounter

    answer = CanonicalMessage.response(TextPart("ok"))
    model = FunctionModel(lambda messages, info: answer)
    history = [CanonicalMessage.user(f"prompt {i}") if i % 2 == 0 else answer for i in range(size - 1)]
    history.append(CanonicalMessage.user("the request"))
    messages = build_outgoing(history, (), ())
    caller = ModelCaller(InProcessEffects(), _manager(wrappers), None)
    ctx = RequestContext(messages=history, token_counter=TokenCounter())
    unit = ModelRequestUnit(
        index=0, purpose="request", source="agent", model=model, messages=messages, view=history
    )
    return measure_async(
        "middleware",
        f"middleware.model_request.{wrappers}_wrappers",
        size,
        lambda: caller.call(ctx, unit),
        runs=301,
        note=f"{wrappers} pass-through wrap_model_request wrappers; FunctionModel answering at once",
    )


def _tool_call(wrappers: int) -> Measurement:
    from harness.models.test import TestModel
    from harness.run import Agent, ToolExecutor
    from harness.session import Session
    from harness.tools import RunContext, RunState

    async def echo(text: str) -> str:
        """Echo.

        Args:
            text: The text.
        """
        return text

    manager = _manager(wrappers)
    agent = Agent(TestModel(), tools=[echo], plugin_manager=manager)
    session = Session()
    state = RunState()
    ctx = RunContext(model=agent.model, session=session, prompt="p", run=state, messages=[])

    async def emit(event: object) -> None:
        del event

    executor = ToolExecutor(agent.run_settings, ctx, emit, plugin_manager=manager)
    counter = iter(range(10**9))

    async def one() -> None:
        await executor.run_batch(
            [ToolCallPart(tool_call_id=f"c{next(counter)}", tool_name="echo", args={"text": "hi"})]
        )

    return measure_async(
        "middleware",
        f"middleware.tool_call.{wrappers}_wrappers",
        1,
        one,
        runs=301,
        note=f"{wrappers} pass-through wrap_tool_call wrappers; an async tool answering at once",
    )


def middleware_cases(sizes: list[int]) -> Iterator[Measurement]:
    """The wrapper chains' cost per model request (at each size) and per tool call."""
    for size in sizes:
        for wrappers in (0, WRAPPERS):
            yield _model_request(size, wrappers)
    for wrappers in (0, WRAPPERS):
        yield _tool_call(wrappers)
