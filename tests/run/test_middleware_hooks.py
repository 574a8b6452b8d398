"""The middleware hooks in real runs: wrap_model_request, wrap_tool_call, wrap_run, after_model_response."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from harness import Agent, CanonicalMessage, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart
from harness.capabilities.calls import ModelCall, ToolCall
from harness.core.effects import ToolOutcome
from harness.errors import CapabilityError, ModelRateLimitError, PluginLoadError, RunStopped
from harness.history import check_invariants
from harness.hooks import PluginManager, hookimpl
from harness.models.function import FunctionInfo, FunctionModel
from harness.session import Session

ran: list[str] = []


def delete_everything(target: str) -> str:
    """Delete it.

    Args:
        target: What to delete.
    """
    ran.append(f"delete:{target}")
    return f"deleted {target}"


def echo(text: str) -> str:
    """Echo.

    Args:
        text: The text.
    """
    ran.append(f"echo:{text}")
    return text


def calls_then_answer(*calls: ToolCallPart) -> FunctionModel:
    """A model that makes ``calls`` once, then answers with the tool results it saw."""

    def respond(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        del info
        if not any(isinstance(p, ToolReturnPart) for m in messages for p in m.parts):
            return CanonicalMessage.response(*calls)
        seen = [p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        return CanonicalMessage.response(TextPart(" | ".join(str(c) for c in seen)))

    return FunctionModel(respond)


def make_agent(plugin: object, *calls: ToolCallPart, **kwargs: Any) -> Agent:
    pm = PluginManager()
    pm.register(plugin)
    return Agent(calls_then_answer(*calls), tools=[delete_everything, echo], plugin_manager=pm, **kwargs)


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


async def test_a_wrapper_short_circuits_a_tool_call_and_the_model_reads_its_result() -> None:
    class Policy:
        @hookimpl(wrapper=True)
        def wrap_tool_call(self, call: ToolCall) -> Generator[None, ToolOutcome, object]:
            if call.tool_name == "delete_everything":
                return "refused by policy"
            return (yield)

    agent = make_agent(
        Policy(),
        ToolCallPart(tool_call_id="c1", tool_name="delete_everything", args={"target": "/"}),
        ToolCallPart(tool_call_id="c2", tool_name="echo", args={"text": "hi"}),
    )
    result = await agent.run("go")
    assert ran == ["echo:hi"]
    assert result.output == "refused by policy | hi"
    assert check_invariants(result.all_messages) == []


async def test_a_wrapper_changes_arguments_and_results() -> None:
    class Rewrite:
        @hookimpl(wrapper=True)
        def wrap_tool_call(self, call: ToolCall) -> Generator[None, ToolOutcome, object]:
            assert isinstance(call.args, dict)
            call.args = {"text": call.args["text"].upper()}
            outcome = yield
            return ToolOutcome("returned", content=f"<{outcome.content}>")

    result = await make_agent(
        Rewrite(), ToolCallPart(tool_call_id="c1", tool_name="echo", args={"text": "hi"})
    ).run("go")
    assert ran == ["echo:HI"]
    assert result.output == "<HI>"


async def test_edited_arguments_are_validated_like_the_models() -> None:
    class Breaks:
        @hookimpl(wrapper=True)
        def wrap_tool_call(self, call: ToolCall) -> Generator[None, ToolOutcome, object]:
            if call.tool_call_id == "c1":
                call.args = {"text": 3}
            return (yield)

    result = await make_agent(
        Breaks(),
        ToolCallPart(tool_call_id="c1", tool_name="echo", args={"text": "hi"}),
        ToolCallPart(tool_call_id="c2", tool_name="echo", args={"text": "ok"}),
    ).run("go")
    assert ran == ["echo:ok"]
    retries = [p for m in result.all_messages for p in m.parts if isinstance(p, RetryPromptPart)]
    assert retries
    assert "text" in str(retries[0].content)


async def test_wrappers_run_outermost_first_in_registration_order() -> None:
    order: list[str] = []

    class Named:
        def __init__(self, name: str) -> None:
            self.name = name

        @hookimpl(wrapper=True)
        def wrap_tool_call(self, call: ToolCall) -> Generator[None, ToolOutcome, object]:
            order.append(f"{self.name} before")
            outcome = yield
            order.append(f"{self.name} after")
            return outcome

    pm = PluginManager()
    pm.register(Named("outer"), name="outer")
    pm.register(Named("inner"), name="inner")
    agent = Agent(
        calls_then_answer(ToolCallPart(tool_call_id="c1", tool_name="echo", args={"text": "x"})),
        tools=[echo],
        plugin_manager=pm,
    )
    await agent.run("go")
    assert order == ["outer before", "inner before", "inner after", "outer after"]


async def test_a_wrapper_that_raises_names_itself_and_the_history_stays_valid(tmp_path: Any) -> None:
    class Broken:
        @hookimpl(wrapper=True)
        def wrap_tool_call(self, call: ToolCall) -> Generator[None, ToolOutcome, object]:
            yield
            raise RuntimeError("boom")

    session = Session(path=tmp_path / "s.json")
    agent = make_agent(Broken(), ToolCallPart(tool_call_id="c1", tool_name="echo", args={"text": "hi"}))
    with pytest.raises(CapabilityError, match="boom") as info:
        await agent.run("go", session=session)
    assert info.value.capability == "Broken"
    saved = Session.load(tmp_path / "s.json")
    assert check_invariants(saved.messages) == []
    assert any(isinstance(p, ToolCallPart) for m in saved.messages for p in m.parts)


async def test_run_stopped_from_a_wrapper_propagates_unchanged() -> None:
    class Stop(RunStopped):
        pass

    class Stopper:
        @hookimpl(wrapper=True)
        def wrap_tool_call(self, call: ToolCall) -> Generator[None, ToolOutcome, object]:
            raise Stop("limit reached")
            yield  # pragma: no cover

    with pytest.raises(Stop, match="limit reached") as info:
        await make_agent(
            Stopper(), ToolCallPart(tool_call_id="c1", tool_name="echo", args={"text": "hi"})
        ).run("go")
    assert check_invariants(info.value.session.messages) == []


async def test_a_wrapper_returning_none_is_refused() -> None:
    class Forgets:
        @hookimpl(wrapper=True)
        def wrap_tool_call(self, call: ToolCall) -> Generator[None, ToolOutcome, object]:
            yield

    with pytest.raises(CapabilityError, match="returned None"):
        await make_agent(
            Forgets(), ToolCallPart(tool_call_id="c1", tool_name="echo", args={"text": "hi"})
        ).run("go")


def test_wrappers_must_be_generators() -> None:
    class CoroutineWrapper:
        @hookimpl(wrapper=True)
        async def wrap_tool_call(self, call: ToolCall) -> Any:
            return None

    class NotAWrapper:
        @hookimpl
        def wrap_tool_call(self, call: ToolCall) -> None:
            return None

    class WrapperOnObserver:
        @hookimpl(wrapper=True)
        def after_node(self) -> Generator[None, None, None]:
            yield

    with pytest.raises(PluginLoadError, match="not a generator function"):
        PluginManager().register(CoroutineWrapper())
    with pytest.raises(PluginLoadError, match=r"wrapper=True"):
        PluginManager().register(NotAWrapper())
    with pytest.raises(PluginLoadError, match="cannot be a wrapper"):
        PluginManager().register(WrapperOnObserver())


async def test_a_model_wrapper_falls_back_by_yielding_again() -> None:
    def failing(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        raise ModelRateLimitError("fake", "slow down", status_code=429)

    backup = FunctionModel(
        lambda m, i: CanonicalMessage.response(TextPart("from backup")), model_name="backup"
    )

    class Fallback:
        @hookimpl(wrapper=True)
        def wrap_model_request(
            self, request: ModelCall
        ) -> Generator[None, CanonicalMessage, CanonicalMessage]:
            try:
                return (yield)
            except ModelRateLimitError:
                request.model = backup
                return (yield)

    seen: list[ModelCall] = []

    class Spy:
        @hookimpl(wrapper=True)
        def wrap_model_request(
            self, request: ModelCall
        ) -> Generator[None, CanonicalMessage, CanonicalMessage]:
            response = yield
            seen.append(request)
            return response

    pm = PluginManager()
    pm.register(Fallback())
    pm.register(Spy())
    result = await Agent(FunctionModel(failing, model_name="primary"), plugin_manager=pm).run("hi")
    assert result.output == "from backup"
    assert seen[0].attempts == 2
    assert seen[0].answered_by == "backup"


async def test_a_model_wrapper_short_circuits_like_a_cache() -> None:
    calls: list[int] = []

    def model(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        calls.append(1)
        return CanonicalMessage.response(TextPart("live"))

    class Cache:
        @hookimpl(wrapper=True)
        def wrap_model_request(
            self, request: ModelCall
        ) -> Generator[None, CanonicalMessage, CanonicalMessage]:
            return CanonicalMessage.response(TextPart("cached"))
            yield  # pragma: no cover

    pm = PluginManager()
    pm.register(Cache())
    result = await Agent(FunctionModel(model), plugin_manager=pm).run("hi")
    assert result.output == "cached"
    assert calls == []


async def test_a_model_wrapper_that_breaks_the_request_is_refused_and_nothing_is_sent() -> None:
    sent: list[int] = []

    def model(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        sent.append(1)
        return CanonicalMessage.response(TextPart("x"))

    class Breaker:
        @hookimpl(wrapper=True)
        def wrap_model_request(
            self, request: ModelCall
        ) -> Generator[None, CanonicalMessage, CanonicalMessage]:
            request.messages = [
                *request.messages,
                CanonicalMessage.request(ToolReturnPart(tool_call_id="ghost", tool_name="echo", content="x")),
            ]
            return (yield)

    pm = PluginManager()
    pm.register(Breaker())
    with pytest.raises(CapabilityError, match="invalid") as info:
        await Agent(FunctionModel(model), plugin_manager=pm).run("hi")
    assert info.value.capability == "Breaker"
    assert sent == []


async def test_a_model_wrapper_changes_what_is_sent_but_not_what_is_stored() -> None:
    received: list[list[CanonicalMessage]] = []

    def model(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        received.append(messages)
        return CanonicalMessage.response(TextPart("ok"))

    class Redact:
        @hookimpl(wrapper=True)
        def wrap_model_request(
            self, request: ModelCall
        ) -> Generator[None, CanonicalMessage, CanonicalMessage]:
            last = request.messages[-1]
            request.messages[-1] = CanonicalMessage.user("[redacted]")
            del last
            return (yield)

    pm = PluginManager()
    pm.register(Redact())
    result = await Agent(FunctionModel(model), plugin_manager=pm).run("my password is hunter2")
    assert "hunter2" not in repr(received[0])
    assert "hunter2" in repr(result.all_messages)


async def test_after_model_response_edits_the_stored_response_and_is_guarded() -> None:
    class Redactor:
        @hookimpl
        async def after_model_response(self, response: CanonicalMessage) -> CanonicalMessage | None:
            text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
            if "secret" in text:
                return response.replace(parts=(TextPart(text.replace("secret", "******")),))
            return None

    pm = PluginManager()
    pm.register(Redactor())
    agent = Agent(
        FunctionModel(lambda m, i: CanonicalMessage.response(TextPart("the secret"))), plugin_manager=pm
    )
    result = await agent.run("hi")
    assert result.output == "the ******"

    class Duplicator:
        @hookimpl
        def after_model_response(self, response: CanonicalMessage) -> CanonicalMessage:
            call = ToolCallPart(tool_call_id="same", tool_name="echo", args={"text": "a"})
            return response.replace(parts=(call, call))

    pm2 = PluginManager()
    pm2.register(Duplicator())
    agent2 = Agent(
        FunctionModel(lambda m, i: CanonicalMessage.response(TextPart("x"))), tools=[echo], plugin_manager=pm2
    )
    with pytest.raises(CapabilityError, match="twice"):
        await agent2.run("hi")
    assert ran == []


async def test_wrap_run_sees_the_outcome_and_the_error() -> None:
    seen: list[str] = []

    class Timer:
        @hookimpl(wrapper=True)
        def wrap_run(self) -> Generator[None, object, object]:
            seen.append("start")
            try:
                outcome = yield
            except Exception as exc:
                seen.append(f"error {type(exc).__name__}")
                raise
            seen.append(f"done {getattr(outcome, 'status', '?')}")
            return outcome

    pm = PluginManager()
    pm.register(Timer())
    agent = Agent(FunctionModel(lambda m, i: CanonicalMessage.response(TextPart("ok"))), plugin_manager=pm)
    result = await agent.run("hi")
    assert result.output == "ok"

    def broken(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        raise ModelRateLimitError("fake", "no", status_code=429)

    pm2 = PluginManager()
    pm2.register(Timer())
    with pytest.raises(ModelRateLimitError):
        await Agent(FunctionModel(broken), plugin_manager=pm2).run("hi")
    assert seen == ["start", "done completed", "start", "error ModelRateLimitError"]


async def test_wrap_run_cannot_short_circuit() -> None:
    class Skip:
        @hookimpl(wrapper=True)
        def wrap_run(self) -> Generator[None, object, object]:
            return None
            yield  # pragma: no cover

    pm = PluginManager()
    pm.register(Skip())
    agent = Agent(FunctionModel(lambda m, i: CanonicalMessage.response(TextPart("ok"))), plugin_manager=pm)
    with pytest.raises(CapabilityError, match="returned before it yielded"):
        await agent.run("hi")


@pytest.mark.parametrize("how", ["assign", "append", "setitem", "iadd", "insert"])
async def test_every_way_of_editing_the_request_is_guarded(how: str) -> None:
    sent: list[int] = []

    def model(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        sent.append(1)
        return CanonicalMessage.response(TextPart("x"))

    orphan = CanonicalMessage.request(ToolReturnPart(tool_call_id="ghost", tool_name="echo", content="x"))

    class Breaker:
        @hookimpl(wrapper=True)
        def wrap_model_request(
            self, request: ModelCall
        ) -> Generator[None, CanonicalMessage, CanonicalMessage]:
            if how == "assign":
                request.messages = [*request.messages, orphan]
            elif how == "append":
                request.messages.append(orphan)
            elif how == "setitem":
                request.messages[-1] = orphan
            elif how == "iadd":
                request.messages += [orphan]
            else:
                request.messages.insert(0, orphan)
            return (yield)

    pm = PluginManager()
    pm.register(Breaker())
    with pytest.raises(CapabilityError, match="invalid"):
        await Agent(FunctionModel(model), plugin_manager=pm).run("hi")
    assert sent == []
