"""The tool retry policy: transient failures are retried; deterministic ones and non-idempotent tools not."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import CanonicalMessage, RetryPromptPart, ToolCallPart, ToolReturnPart, harness_mark
from harness.errors import ToolDefinitionError, ToolRetry
from harness.models.function import FunctionModel
from harness.run import Agent, RunResult
from harness.tools import TRANSIENT_TOOL_ERRORS, Tool, ToolCallStatus


class RateLimitedError(Exception):
    """What an HTTP client might raise for a 429: transient, but not a ConnectionError."""


class SlowDownError(RateLimitedError):
    pass


def _call(call_id: str, name: str, args: dict[str, Any] | None = None) -> CanonicalMessage:
    return CanonicalMessage.response(ToolCallPart(tool_call_id=call_id, tool_name=name, args=args or {}))


def _failing_tool(errors: list[BaseException], calls: list[int], **options: Any) -> Tool:
    """A tool that records each run (its side effect), then raises the next error, or returns "ok"."""

    def post(message: str = "hi") -> str:
        """Post a message."""
        calls.append(len(calls) + 1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return "ok"

    return Tool.from_function(post, **options)


def _run(tool: Tool, *, retries: int = 3, responses: int = 1) -> RunResult:
    steps: list[CanonicalMessage | str] = [_call(f"c{i}", tool.name) for i in range(1, responses + 1)]
    agent = Agent(
        FunctionModel.from_responses(*steps, "done"),
        tools=[tool],
        tool_max_retries=retries,
        tool_retry_base_delay=0.0,
    )
    return agent.run_sync("go")


def _result(run: RunResult, index: int = 2) -> ToolReturnPart:
    part = run.all_messages[index].parts[0]
    assert isinstance(part, ToolReturnPart)
    return part


@pytest.mark.parametrize(
    "error",
    [ValueError("bad channel"), TypeError("wrong"), KeyError("k"), FileNotFoundError("f"), RuntimeError("x")],
    ids=lambda e: type(e).__name__,
)
def test_a_deterministic_error_runs_the_tool_once_and_is_its_result(error: Exception) -> None:
    calls: list[int] = []
    run = _run(_failing_tool([error, error, error], calls))
    assert calls == [1]  # the side effect happened once, not tool_max_retries times
    part = _result(run)
    assert part.content == f"Tool 'post' failed: {type(error).__name__}: {error}"
    assert harness_mark(part) == {"tool_error": True}
    record = run.state.tool_registry.get("c1")
    assert (record.attempts, record.status) == (1, ToolCallStatus.FAILED)
    assert run.output == "done"


def test_a_deterministic_error_is_not_delayed_by_the_backoff() -> None:
    calls: list[int] = []
    agent = Agent(
        FunctionModel.from_responses(_call("c1", "post"), "done"),
        tools=[_failing_tool([ValueError("no")] * 3, calls)],
        tool_retry_base_delay=30.0,  # a retry would sleep 30 s and hit the timeout
        request_timeout=5.0,
    )
    assert agent.run_sync("go").output == "done"
    assert calls == [1]


@pytest.mark.parametrize(
    "error",
    [ConnectionResetError("reset"), ConnectionRefusedError("refused"), TimeoutError("slow"), TimeoutError()],
    ids=lambda e: type(e).__name__,
)
def test_connection_errors_and_timeouts_are_retried_until_success(error: Exception) -> None:
    calls: list[int] = []
    run = _run(_failing_tool([error, error], calls), retries=3)
    assert calls == [1, 2, 3]
    assert _result(run).content == "ok"
    record = run.state.tool_registry.get("c1")
    assert (record.attempts, record.status) == (3, ToolCallStatus.COMPLETED)


def test_a_transient_error_exhausting_the_attempts_becomes_the_result() -> None:
    calls: list[int] = []
    run = _run(_failing_tool([TimeoutError("backend down")] * 5, calls), retries=2)
    assert calls == [1, 2]
    assert _result(run).content == "Tool 'post' failed after 2 attempt(s): TimeoutError: backend down"


def test_exceptions_a_tool_declares_transient_are_retried_with_their_subclasses() -> None:
    calls: list[int] = []
    tool = _failing_tool(
        [RateLimitedError("429"), SlowDownError("429 again")], calls, retry_on=(RateLimitedError,)
    )
    assert tool.retry_on == (RateLimitedError,)
    assert _result(_run(tool)).content == "ok"
    assert calls == [1, 2, 3]
    undeclared: list[int] = []
    _run(_failing_tool([RateLimitedError("429")], undeclared))
    assert undeclared == [1]


def test_retry_on_takes_one_class_too() -> None:
    calls: list[int] = []
    tool = _failing_tool([RateLimitedError("429")], calls, retry_on=RateLimitedError)
    assert tool.retry_on == (RateLimitedError,)
    assert _result(_run(tool)).content == "ok"


def test_a_non_idempotent_tool_is_never_re_run_even_after_a_transient_error() -> None:
    calls: list[int] = []
    tool = _failing_tool([ConnectionResetError("reset by peer")], calls, idempotent=False)
    assert tool.idempotent is False
    run = _run(tool)
    assert calls == [1]
    content = _result(run).content
    assert content.startswith("Tool 'post' failed: ConnectionResetError: reset by peer. It was not retried")
    assert "not idempotent" in content
    assert "may have taken effect" in content
    assert run.state.tool_registry.get("c1").attempts == 1


def test_a_non_idempotent_tool_failure_says_the_call_may_have_taken_effect() -> None:
    calls: list[int] = []
    run = _run(_failing_tool([ValueError("after writing")], calls, idempotent=False))
    assert calls == [1]
    content = _result(run).content
    assert content.startswith("Tool 'post' failed: ValueError: after writing. The tool is not idempotent")


def test_the_model_may_call_a_non_idempotent_tool_again_itself() -> None:
    calls: list[int] = []
    run = _run(_failing_tool([ConnectionResetError("reset")], calls, idempotent=False), responses=2)
    assert calls == [1, 2]  # once per call the model made, never automatically
    assert "not retried" in _result(run, 2).content
    assert _result(run, 4).content == "ok"


def test_tool_retry_keeps_its_own_handling_for_a_non_idempotent_tool() -> None:
    attempts: list[int] = []

    def send(text: str) -> str:
        """Send."""
        attempts.append(1)
        if len(attempts) == 1:
            raise ToolRetry("say it shorter")
        return "sent"

    model = FunctionModel.from_responses(
        _call("c1", "send", {"text": "x"}), _call("c2", "send", {"text": "y"}), "ok"
    )
    run = Agent(model, tools=[Tool.from_function(send, idempotent=False)]).run_sync("go")
    assert len(attempts) == 2
    prompt = run.all_messages[2].parts[0]
    assert isinstance(prompt, RetryPromptPart)
    assert "say it shorter" in prompt.content


def test_the_transient_errors_are_connection_errors_and_timeouts() -> None:
    assert (ConnectionError, TimeoutError) == TRANSIENT_TOOL_ERRORS
    tool = Tool.from_function(lambda: None, name="noop", retry_on=(RateLimitedError,))
    assert tool.is_transient(BrokenPipeError())
    assert tool.is_transient(SlowDownError())
    assert not tool.is_transient(PermissionError())
    assert not tool.is_transient(ValueError())


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"retry_on": (int,)}, "retry_on takes Exception subclasses, got <class 'int'>"),
        ({"retry_on": ("ValueError",)}, "retry_on takes Exception subclasses"),
        ({"retry_on": (KeyboardInterrupt,)}, "retry_on takes Exception subclasses"),
        ({"retry_on": (ToolRetry,)}, "retry_on cannot hold ToolRetry"),
        (
            {"retry_on": (ValueError,), "idempotent": False},
            "retry_on has no effect on a tool declared idempotent",
        ),
    ],
)
def test_invalid_retry_options_are_refused_when_the_tool_is_built(
    options: dict[str, Any], message: str
) -> None:
    def tool() -> None:
        """A tool."""

    with pytest.raises(ToolDefinitionError, match=message) as caught:
        Tool.from_function(tool, **options)
    assert caught.value.tool_name == "tool"


_KINDS = {"transient": ConnectionResetError, "declared": RateLimitedError, "deterministic": ValueError}


@settings(max_examples=60, deadline=None)
@given(
    failures=st.lists(st.sampled_from(sorted(_KINDS)), max_size=5),
    retries=st.integers(1, 4),
    idempotent=st.booleans(),
)
def test_the_number_of_runs_follows_the_policy(failures: list[str], retries: int, idempotent: bool) -> None:
    calls: list[int] = []
    options: dict[str, Any] = {"idempotent": idempotent}
    if idempotent:
        options["retry_on"] = (RateLimitedError,)
    tool = _failing_tool([_KINDS[kind]("x") for kind in failures], calls, **options)
    run = _run(tool, retries=retries)
    expected = 0
    for kind in [*failures, "success"]:
        expected += 1
        retryable = idempotent and kind in ("transient", "declared")
        if not retryable or expected == retries:
            break
    assert len(calls) == expected
    succeeded = expected == len(failures) + 1
    assert (_result(run).content == "ok") is succeeded
    assert run.state.tool_registry.get("c1").attempts == expected
