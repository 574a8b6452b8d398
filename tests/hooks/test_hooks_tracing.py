"""Hook-call tracing: ``harness.hooks.tracing`` and the lines a traced manager writes."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, cast

import pluggy
import pytest

from harness.capabilities import RequestContext
from harness.core import CanonicalMessage, TextPart
from harness.core.markers import PROJECT_NAME
from harness.errors import CapabilityError
from harness.hooks import TRACE_ENV, PluginManager, hookimpl
from harness.hooks.tracing import make_trace, monitor_hookcalls, traced_step, tracing_requested
from harness.tokens import TokenCounter


def make_ctx() -> RequestContext:
    return RequestContext(
        messages=[
            CanonicalMessage.user("hi"),
            CanonicalMessage.response(TextPart("yo")),
            CanonicalMessage.user("x"),
        ],
        token_counter=TokenCounter(),
    )


async def _call_and_await(run: Callable[[], object]) -> object:
    result = run()
    return await cast("Awaitable[object]", result) if inspect.isawaitable(result) else result


def test_make_trace_prefixes_and_terminates_each_line() -> None:
    lines: list[str] = []
    trace = make_trace(lines.append)
    trace("one")
    trace("two -> three")
    assert lines == ["harness-trace: one\n", "harness-trace: two -> three\n"]


def test_make_trace_defaults_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    make_trace()("to stderr")
    captured = capsys.readouterr()
    assert captured.err == "harness-trace: to stderr\n"
    assert captured.out == ""


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, False),
        ("", False),
        ("0", False),
        ("false", False),
        (" No ", False),
        ("FALSE", False),
        ("1", True),
        ("yes", True),
        ("true", True),
    ],
)
def test_tracing_requested_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str | None, expected: bool
) -> None:
    if value is None:
        monkeypatch.delenv(TRACE_ENV, raising=False)
    else:
        monkeypatch.setenv(TRACE_ENV, value)
    assert tracing_requested() is expected


def test_monitor_hookcalls_reports_callers_results_and_errors() -> None:
    class Spec:
        @pluggy.HookspecMarker(PROJECT_NAME)
        def ask(self) -> object:  # pyright: ignore[reportReturnType]
            """A test hook."""

    class Answer:
        @pluggy.HookimplMarker(PROJECT_NAME)
        def ask(self) -> object:
            return 42

    class Broken:
        @pluggy.HookimplMarker(PROJECT_NAME)
        def ask(self) -> object:
            raise ValueError("no")

    lines: list[str] = []
    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(Spec)
    monitor_hookcalls(pm, lines.append)
    pm.hook.ask()
    pm.register(Answer(), name="answer")
    pm.hook.ask()
    pm.register(Broken(), name="broken")
    with pytest.raises(ValueError, match="no"):
        pm.hook.ask()
    assert lines == [
        "ask -> (no implementation)",
        "ask <- []",
        "ask -> answer",
        "ask <- [42]",
        "ask -> answer, broken",
        "ask <- ValueError",
    ]


def test_traced_step_reports_counts_and_duration() -> None:
    lines: list[str] = []
    ctx = make_ctx()

    def step() -> None:
        del ctx.messages[:2]

    assert traced_step(lines.append, step, "trimmer", "before_model_request", ctx)() is None
    assert lines[0] == "before_model_request -> trimmer (3 messages)"
    assert lines[1].startswith("before_model_request <- trimmer: ")
    assert lines[1].endswith(" ms, 3 -> 1 messages")
    assert len(lines) == 2


async def test_traced_step_reports_after_an_awaitable_finishes() -> None:
    lines: list[str] = []
    ctx = make_ctx()

    async def step() -> str:
        await asyncio.sleep(0)
        ctx.messages.append(CanonicalMessage.response(TextPart("late")))
        return "value"

    result = traced_step(lines.append, step, "slow", "compact", ctx)()
    assert lines == ["compact -> slow (3 messages)"]
    assert await cast("Any", result) == "value"
    assert lines[1].startswith("compact <- slow: ")
    assert lines[1].endswith(" ms, 3 -> 4 messages")


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_traced_step_reports_a_failure(asynchronous: bool) -> None:
    lines: list[str] = []
    ctx = make_ctx()

    def sync_step() -> None:
        raise KeyError("gone")

    async def async_step() -> None:
        raise KeyError("gone")

    run = traced_step(lines.append, async_step if asynchronous else sync_step, "bad", "compact", ctx)
    with pytest.raises(KeyError):
        await _call_and_await(run)
    assert lines == ["compact -> bad (3 messages)", "compact <- bad: raised KeyError"]


async def test_a_traced_manager_traces_observers_of_every_context_hook() -> None:
    class Watcher:
        name = "watcher"

        @hookimpl
        async def after_node(self) -> None:
            await asyncio.sleep(0)

        @hookimpl
        def on_tool(self) -> None:
            pass

    lines: list[str] = []
    pm = PluginManager()
    pm.enable_tracing(lines.append)
    pm.register(Watcher())
    await pm.notify_after_node(cast("Any", None), cast("Any", None))
    await pm.notify_tool(cast("Any", None), cast("Any", None))
    assert lines == ["harness-trace: after_node -> watcher\n", "harness-trace: on_tool -> watcher\n"]


async def test_a_traced_manager_traces_forced_compaction_and_failures() -> None:
    class Trimmer:
        name = "trimmer"

        def compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
            del reason
            del ctx.messages[:2]

        @hookimpl
        def before_model_request(self, ctx: RequestContext) -> None:
            del ctx

    class Failing:
        name = "failing"

        @hookimpl
        def before_model_request(self) -> None:
            raise RuntimeError("boom")

    lines: list[str] = []
    pm = PluginManager()
    pm.enable_tracing(lines.append)
    pm.add_capabilities([Trimmer()])
    await pm.run_compact(make_ctx())
    assert lines[0] == "harness-trace: compact -> trimmer (3 messages)\n"
    assert lines[1].endswith(" ms, 3 -> 1 messages\n")
    pm.register(Failing())
    lines.clear()
    with pytest.raises(CapabilityError, match="RuntimeError: boom"):
        await pm.run_before_model_request(make_ctx())
    assert lines[-1] == "harness-trace: before_model_request <- failing: raised RuntimeError\n"


def test_tracing_is_off_unless_asked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class Counter:
        @hookimpl
        def count_tokens(self, text: str) -> int | None:
            return len(text)

    monkeypatch.delenv(TRACE_ENV, raising=False)
    pm = PluginManager()
    pm.register(Counter())
    assert pm.count_tokens("abc", None) == 3
    assert capsys.readouterr().err == ""
    monkeypatch.setenv(TRACE_ENV, "yes")
    traced = PluginManager()
    traced.register(Counter())
    assert traced.count_tokens("abcd", None) == 4
    assert (
        capsys.readouterr().err
        == "harness-trace: count_tokens -> Counter\nharness-trace: count_tokens <- 4\n"
    )
