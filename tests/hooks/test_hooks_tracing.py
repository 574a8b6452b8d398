"""Hook-call tracing: ``harness.hooks.tracing`` and the lines a traced manager writes."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest

from harness.capabilities import CompactionEvent, RequestContext
from harness.core import CanonicalMessage, TextPart
from harness.errors import CapabilityError
from harness.hooks import TRACE_ENV, PluginManager, hookimpl
from harness.hooks.tracing import TraceSinks, make_trace, traced_step, tracing_requested
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


def test_decision_hooks_are_traced_with_their_callers_answer_and_failure() -> None:
    class Answer:
        name = "answer"

        @hookimpl
        def count_tokens(self, text: str) -> int:
            return len(text)

    class Abstains:
        name = "abstains"

        @hookimpl
        def count_tokens(self) -> None:
            return None

    class Broken:
        name = "broken"

        @hookimpl
        def count_tokens(self) -> int:
            raise ValueError("no")

    lines: list[str] = []
    pm = PluginManager()
    pm.enable_tracing(lines.append)
    assert pm.count_tokens("abc", None) is None
    pm.register(Answer())
    pm.register(Abstains())
    assert pm.count_tokens("abc", None) == 3
    pm.register(Broken())
    with pytest.raises(CapabilityError):
        pm.count_tokens("abc", None)
    assert [line.removeprefix("harness-trace: ").rstrip("\n") for line in lines] == [
        "count_tokens -> (no implementation)",
        "count_tokens <- None",
        "count_tokens -> abstains, answer",
        "count_tokens <- 3",
        "count_tokens -> broken, abstains, answer",
        "count_tokens <- broken: raised ValueError",
    ]


def test_trace_sinks_fan_out_and_each_undo_removes_its_writer() -> None:
    first: list[str] = []
    second: list[str] = []
    sinks = TraceSinks()
    assert sinks.trace is None
    undo_first = sinks.add(first.append)
    assert sinks.add(first.append) is not None  # the same writer again: still one writer
    undo_second = sinks.add(second.append)
    trace = sinks.trace
    assert trace is not None
    trace("one")
    undo_first()
    undo_first()  # a second call does nothing
    trace = sinks.trace
    assert trace is not None
    trace("two")
    undo_second()
    assert sinks.trace is None
    assert first == ["harness-trace: one\n"]
    assert second == ["harness-trace: one\n", "harness-trace: two\n"]


async def test_the_undo_enable_tracing_returns_stops_every_hook_trace() -> None:
    class Everything:
        name = "everything"

        @hookimpl
        def count_tokens(self, text: str) -> int:
            return len(text)

        @hookimpl
        def resolve_model(self) -> None:
            return None

        @hookimpl
        def before_model_request(self, ctx: RequestContext) -> None:
            ctx.report(CompactionEvent("everything", "test", 1, 1, 1, 1))

        @hookimpl
        async def on_compaction(self) -> None:
            await asyncio.sleep(0)

        @hookimpl
        def after_node(self) -> None:
            pass

        @hookimpl
        async def on_tool(self) -> None:
            await asyncio.sleep(0)

    async def call_every_hook(pm: PluginManager) -> None:
        pm.count_tokens("abc", None)
        pm.resolve_model("x:y")
        await pm.run_before_model_request(make_ctx())
        await pm.run_compact(make_ctx())
        await pm.notify_after_node(cast("Any", None), cast("Any", None))
        await pm.notify_tool(cast("Any", None), cast("Any", None))
        await pm.notify_compaction(make_ctx(), CompactionEvent("x", "test", 1, 1, 1, 1))

    lines: list[str] = []
    pm = PluginManager()
    pm.register(Everything())
    undo = pm.enable_tracing(lines.append)
    await call_every_hook(pm)
    traced = {line.split(" ")[1] for line in lines}
    assert traced == {
        "count_tokens",
        "resolve_model",
        "before_model_request",
        "on_compaction",
        "after_node",
        "on_tool",
    }
    undo()
    lines.clear()
    await call_every_hook(pm)
    assert lines == []
    undo()  # harmless
    again = pm.enable_tracing(lines.append)  # tracing can be turned on again
    pm.count_tokens("abcd", None)
    again()
    pm.count_tokens("abcde", None)
    assert lines == ["harness-trace: count_tokens -> everything\n", "harness-trace: count_tokens <- 4\n"]


def test_undoing_a_writer_keeps_the_environment_tracing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class Counter:
        @hookimpl
        def count_tokens(self, text: str) -> int:
            return len(text)

    monkeypatch.setenv(TRACE_ENV, "1")
    lines: list[str] = []
    pm = PluginManager()
    pm.register(Counter())
    undo = pm.enable_tracing(lines.append)  # a writer of its own, beside stderr
    pm.count_tokens("ab", None)
    undo()
    pm.count_tokens("abc", None)
    assert lines == ["harness-trace: count_tokens -> Counter\n", "harness-trace: count_tokens <- 2\n"]
    assert capsys.readouterr().err.count("harness-trace: count_tokens <- ") == 2


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
