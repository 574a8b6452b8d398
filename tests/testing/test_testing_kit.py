"""The plugin author's kit: harness.testing's builders, models, recorder, assertions, checks and fixtures."""

from __future__ import annotations

import asyncio
import importlib
import types
from collections.abc import Sequence
from typing import ClassVar

import pytest

from harness import (
    CanonicalMessage,
    Capability,
    CapabilityError,
    RetryPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    hookimpl,
)
from harness.capabilities import CompactionEvent, RequestContext
from harness.core import ModelSettings, harness_mark, replace, with_harness_mark
from harness.errors import HistoryBuildError, ModelResponseError, ScriptError
from harness.history import check_invariants, safe_cutoff
from harness.hooks import ENTRY_POINT_GROUP, PluginManager
from harness.run import Agent, compact
from harness.testing import (
    KNOWN_CAPABILITY_NAMES,
    HistoryBuilder,
    HookRecorder,
    Registrar,
    assert_history_unchanged,
    assert_invariants,
    assert_memo_matches_fresh,
    assert_no_split_tool_pairs,
    assert_plugin_valid,
    assert_request_kept,
    assert_transformation_safe,
    assert_user_prompts_kept,
    check_capability_invariants,
    check_plugin,
    clearable_returns,
    make_context,
    scripted_model,
    tool_call,
)
from harness.testing.strategies import histories

pytest_plugins = ["pytester"]

SETTINGS = ModelSettings()


def kinds(messages: Sequence[CanonicalMessage]) -> list[list[str]]:
    return [[type(p).__name__ for p in m.parts] for m in messages]


# --------------------------------------------------------------------------------------
# HistoryBuilder
# --------------------------------------------------------------------------------------


def test_builder_alternates_and_places_answers_in_the_next_request():
    messages = (
        HistoryBuilder()
        .system("sys")
        .user("read both")
        .thinking("two reads")
        .parallel(("read_file", {"path": "a"}, "A"), ("read_file", {"path": "b"}))
        .retry("bash", {"cmd": "lss"}, error="no such command", result="a b", retry_args={"cmd": "ls"})
        .text("done")
        .user("next")
        .build()
    )
    assert kinds(messages) == [
        ["SystemPromptPart", "UserPromptPart"],
        ["ThoughtPart", "ToolCallPart", "ToolCallPart"],
        ["ToolReturnPart", "ToolReturnPart"],
        ["ToolCallPart"],
        ["RetryPromptPart"],
        ["ToolCallPart"],
        ["ToolReturnPart"],
        ["TextPart"],
        ["UserPromptPart"],
    ]
    assert check_invariants(messages) == []
    calls = [p for m in messages for p in m.parts if isinstance(p, ToolCallPart)]
    assert [c.tool_call_id for c in calls] == ["call_1", "call_2", "call_3", "call_4"]
    assert calls[3].args == {"cmd": "ls"}
    returns = [p for p in messages[2].parts if isinstance(p, ToolReturnPart)]
    assert [(r.tool_call_id, r.content) for r in returns] == [("call_1", "A"), ("call_2", "ok")]
    retry = messages[4].parts[0]
    assert isinstance(retry, RetryPromptPart)
    assert (retry.tool_call_id, retry.tool_name, retry.content) == ("call_3", "bash", "no such command")
    assert all(m.model_name == "test-model" for m in messages if m.kind == "response")


def test_builder_call_ids_explicit_and_generated():
    builder = HistoryBuilder(id_prefix="t").user("go").call("a", tool_call_id="t1").call("b")
    assert builder.call_ids == ("t1", "t2")
    assert builder.last_call_id == "t2"
    with pytest.raises(HistoryBuildError, match="'t1' is already used"):
        builder.call("c", tool_call_id="t1")
    with pytest.raises(HistoryBuildError, match="non-empty"):
        builder.call("c", tool_call_id="")
    with pytest.raises(HistoryBuildError, match="no tool call"):
        _ = HistoryBuilder().last_call_id


def test_builder_is_reusable_and_ends_with_a_response_when_asked():
    builder = HistoryBuilder().user("hi").text("hello")
    first = builder.build()
    assert [m.kind for m in first] == ["request", "response"]
    second = builder.user("again").build()
    assert [m.kind for m in second] == ["request", "response", "request"]
    assert first is not second
    assert len(first) == 2


def test_builder_validates_unless_told_not_to():
    builder = HistoryBuilder().user("go").dangling("bash", {"cmd": "rm"}).user("where is my answer")
    with pytest.raises(HistoryBuildError, match="dangling_call at message 1"):
        builder.build()
    messages = builder.build(validate=False)
    assert [v.kind for v in check_invariants(messages)] == ["dangling_call"]


def test_builder_raw_messages_and_their_errors():
    messages = HistoryBuilder().request(UserPromptPart("u")).response(TextPart("t")).build()
    assert kinds(messages) == [["UserPromptPart"], ["TextPart"]]
    with pytest.raises(HistoryBuildError, match="request at message 0"):
        HistoryBuilder().request(TextPart("not a request part"))
    with pytest.raises(HistoryBuildError, match="response at message 1"):
        HistoryBuilder().user("u").response(UserPromptPart("not a response part"))
    with pytest.raises(HistoryBuildError, match="at least one call"):
        HistoryBuilder().parallel()
    with pytest.raises(HistoryBuildError, match="2 calls but 1 ids"):
        HistoryBuilder().parallel(("a", None), ("b", None), ids=["x"])


def test_make_context_copies_the_history_and_takes_the_model_facts():
    messages = HistoryBuilder().user("hi").build()
    model = scripted_model("x", model_name="gpt-4o", context_window=1000)
    ctx = make_context(messages, model=model, requests=3)
    assert ctx.messages == messages
    assert ctx.messages is not messages
    assert (ctx.model_name, ctx.context_window, ctx.requests, ctx.model) == ("gpt-4o", 1000, 3, model)
    assert ctx.count_tokens() > 0


def test_make_context_uses_the_managers_token_counter():
    class Fixed:
        @hookimpl
        def count_tokens(self, text: str) -> int:
            return 7

    manager = PluginManager()
    manager.register(Fixed())
    ctx = make_context(HistoryBuilder().user("a b c d e f").build(), manager=manager)
    assert ctx.token_counter.count_text("whatever text") == 7


# --------------------------------------------------------------------------------------
# scripted_model
# --------------------------------------------------------------------------------------


async def test_scripted_model_plays_text_calls_parallel_calls_and_thinking():
    model = scripted_model(
        tool_call("read_file", {"path": "a"}),
        [tool_call("grep", {"q": "x"}), tool_call("bash", {"cmd": "ls"}, tool_call_id="mine")],
        [ThoughtPart("hmm"), "final"],
        lambda messages, info: f"seen {len(messages)}",
        model_name="scripted-model",
    )
    request = [CanonicalMessage.user("go")]
    first = await model.request(request, [], SETTINGS)
    second = await model.request(request, [], SETTINGS)
    third = await model.request(request, [], SETTINGS)
    fourth = await model.request(request * 3, [], SETTINGS)
    assert [(p.tool_call_id, p.tool_name, p.args) for p in first.parts if isinstance(p, ToolCallPart)] == [
        ("scripted_1", "read_file", {"path": "a"})
    ]
    assert [p.tool_call_id for p in second.parts if isinstance(p, ToolCallPart)] == ["scripted_2", "mine"]
    assert kinds([third]) == [["ThoughtPart", "TextPart"]]
    assert isinstance(fourth.parts[0], TextPart)
    assert fourth.parts[0].content == "seen 3"
    assert first.model_name == "scripted-model"
    assert first.usage is not None
    assert len(model.requests) == 4
    with pytest.raises(ModelResponseError, match="all 4 scripted responses were used"):
        await model.request(request, [], SETTINGS)


def test_scripted_model_rejects_steps_that_are_not_responses():
    with pytest.raises(ScriptError, match="step 1: a scripted step must be a response"):
        scripted_model("ok", CanonicalMessage.user("a request"))
    with pytest.raises(ScriptError, match="step 0: "):
        scripted_model([UserPromptPart("a request part")])
    with pytest.raises(ScriptError, match="step 2: an empty list"):
        scripted_model("a", "b", [])
    with pytest.raises(ScriptError, match="cannot turn int"):
        scripted_model([42])  # pyright: ignore[reportArgumentType]


async def test_scripted_model_drives_an_agent_with_real_tools():
    calls: list[str] = []

    def read_file(path: str) -> str:
        """Read a file."""
        calls.append(path)
        return f"contents of {path}"

    model = scripted_model(
        [tool_call("read_file", {"path": "a"}), tool_call("read_file", {"path": "b"})],
        "both read",
    )
    result = await Agent(model, tools=[read_file]).run("read a and b")
    assert result.output == "both read"
    assert sorted(calls) == ["a", "b"]
    answered = [p for p in model.requests[1][-1].parts if isinstance(p, ToolReturnPart)]
    assert sorted(p.tool_call_id for p in answered) == ["scripted_1", "scripted_2"]


# --------------------------------------------------------------------------------------
# HookRecorder and Registrar
# --------------------------------------------------------------------------------------


class Clip(Capability):
    """Keeps the last ``keep`` messages at a pair-safe cut."""

    name: ClassVar[str] = "clip"

    def __init__(self, keep: int = 2) -> None:
        self.keep = keep

    async def compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
        cut = safe_cutoff(ctx.messages, self.keep)
        ctx.replace_messages(ctx.messages[cut:], strategy=self.name, reason=reason)


class Watcher:
    def __init__(self) -> None:
        self.seen: list[str] = []

    @hookimpl
    def on_compaction(self, event: CompactionEvent) -> None:
        self.seen.append(event.strategy)


def long_history() -> list[CanonicalMessage]:
    builder = HistoryBuilder().user("task")
    for i in range(4):
        builder.call("read_file", {"path": str(i)}, result=f"file {i}")
    return builder.text("done").user("next").build()


async def test_recorder_sees_context_hooks_reports_and_pluggy_hooks():
    manager = PluginManager()
    watcher = Watcher()
    manager.add_capabilities([Clip(keep=2)])
    manager.register(watcher)
    messages = long_history()
    with HookRecorder(manager) as recorder:
        ctx = make_context(messages, manager=manager)
        await manager.run_before_model_request(ctx)
        assert manager.count_tokens("abc", "gpt-4o") is None
    assert recorder.hooks() == ["before_model_request", "on_compaction", "count_tokens"]
    run, report, count = recorder.calls
    assert run.via == "run_before_model_request"
    assert run.kwargs["ctx"] is ctx
    assert run.messages == tuple(messages)  # the history the stack received
    assert report.via == "report"
    assert [e.strategy for e in recorder.events()] == ["clip"]
    assert watcher.seen == ["clip"]  # the observer still ran
    assert (count.via, count.kwargs, count.result) == (
        "count_tokens",  # the manager calls the decision hooks itself
        {"text": "abc", "model_name": "gpt-4o"},
        None,
    )
    assert not recorder.attached
    assert "run_before_model_request" not in vars(manager)
    assert ctx.on_event is None  # the recording sink was removed


async def test_recorder_records_observer_hooks_errors_and_stops_after_detach():
    manager = PluginManager()

    class Broken:
        @hookimpl
        def on_tool(self, event: object) -> None:
            raise RuntimeError("boom")

    manager.register(Broken())
    recorder = HookRecorder(manager)
    ctx = make_context([])
    await manager.notify_after_node(ctx, "node")  # pyright: ignore[reportArgumentType]
    with pytest.raises(CapabilityError, match="boom"):
        await manager.notify_tool(ctx, "event")  # pyright: ignore[reportArgumentType]
    event = CompactionEvent("s", "r", 1, 1, 1, 1)
    await manager.notify_compaction(ctx, event)
    await manager.run_compact(ctx, reason="manual")
    assert recorder.hooks() == ["after_node", "on_tool", "on_compaction", "before_model_request"]
    assert recorder.calls[0].kwargs == {"ctx": ctx, "node": "node"}
    assert isinstance(recorder.calls[1].error, CapabilityError)
    assert recorder.calls[3].via == "run_compact"
    assert recorder.events() == [event]
    recorder.detach()
    recorder.detach()  # idempotent
    await manager.notify_after_node(ctx, "node")  # pyright: ignore[reportArgumentType]
    assert len(recorder.calls) == 4
    recorder.clear()
    assert recorder.calls == []


def test_recorder_assertions_explain_what_was_called():
    manager = PluginManager()
    recorder = HookRecorder(manager)
    manager.count_tokens("x", None)
    assert len(recorder.assert_called("count_tokens", times=1)) == 1
    with pytest.raises(AssertionError, match=r"'on_tool' was called 0 time\(s\), expected at least once"):
        recorder.assert_called("on_tool")
    with pytest.raises(AssertionError, match=r"expected 2 time\(s\); recorded: \['count_tokens'\]"):
        recorder.assert_called("count_tokens", times=2)
    with pytest.raises(AssertionError, match="'count_tokens' was called 1"):
        recorder.assert_not_called("count_tokens")
    recorder.assert_not_called("after_node")


async def test_recorder_follows_an_agent_run():
    manager = PluginManager()
    recorder = HookRecorder(manager)

    def ping() -> str:
        """Ping."""
        return "pong"

    await Agent(scripted_model(tool_call("ping"), "done"), tools=[ping], plugin_manager=manager).run("go")
    hooks = recorder.hooks()
    assert hooks.count("before_model_request") == 2
    assert "on_tool" in hooks
    assert hooks[-1] == "after_node"
    assert hooks.index("before_model_request") < hooks.index("on_tool")
    first = recorder.calls_of("before_model_request")[0]
    assert first.messages is not None
    assert isinstance(first.messages[-1].parts[-1], UserPromptPart)


def test_registrar_registers_capabilities_in_order_and_cleans_up():
    manager = PluginManager()
    registrar = Registrar(manager)

    class Early(Capability):
        runs_before: ClassVar[tuple[str, ...]] = ("clip",)

    clip, early, watcher = Clip(), Early(), Watcher()
    assert registrar(clip) == "clip"
    assert registrar(early) == "early"
    assert registrar(watcher, name="watcher") == "watcher"
    assert manager.capabilities == (early, clip)
    assert [i.name for i in manager.list_plugins()] == ["early", "clip", "watcher"]
    with pytest.raises(ValueError, match="registered under its own name attribute"):
        registrar(Clip(), name="other")
    manager.unregister(early)  # already gone: skipped at cleanup
    registrar.unregister_all()
    assert manager.list_plugins() == []
    assert registrar.added == ()


def test_registrar_temporarily_and_several_capabilities():
    manager = PluginManager()
    registrar = Registrar(manager)
    with registrar.temporarily(Watcher(), name="w") as name:
        assert name == "w"
        assert manager.pluggy_manager.has_plugin("w")
    assert not manager.pluggy_manager.has_plugin("w")
    assert registrar.capabilities([Clip()]) == ["clip"]
    module = types.ModuleType("observer_module")
    assert registrar(module) == "observer_module"
    registrar.unregister_all()
    assert manager.capabilities == ()


# --------------------------------------------------------------------------------------
# Assertions
# --------------------------------------------------------------------------------------


def split_history() -> tuple[list[CanonicalMessage], list[CanonicalMessage]]:
    before = HistoryBuilder().user("task").call("read", result="r").text("ok").user("next").build()
    return before, before[2:]  # drops the call, keeps its return


def test_assert_invariants_names_the_violation():
    before, after = split_history()
    assert_invariants(before)
    with pytest.raises(AssertionError, match=r"orphan_return at message 0, part 0, tool_call_id 'call_1'"):
        assert_invariants(after)
    with pytest.raises(AssertionError, match="persisted_system_prompt"):
        assert_invariants(HistoryBuilder().system("s").user("u").build(), persisted=True)


def test_assert_no_split_tool_pairs():
    before, after = split_history()
    assert_no_split_tool_pairs(before, before)
    assert_no_split_tool_pairs(before, before[-1:])  # the pair left together
    with pytest.raises(
        AssertionError,
        match=r"'call_1': the call \(message 1 before\) was removed, but its answer remains at message 0",
    ):
        assert_no_split_tool_pairs(before, after)
    answer_lost = [before[0], before[1], CanonicalMessage.request(UserPromptPart("x"))]
    with pytest.raises(AssertionError, match=r"'call_1': 1 of its 1 answer\(s\) \(messages \[2\] before\)"):
        assert_no_split_tool_pairs(before, answer_lost)
    swapped = [before[0], before[2], before[1]]
    with pytest.raises(AssertionError, match="answer at message 1 now precedes its call at message 2"):
        assert_no_split_tool_pairs(before, swapped)


def test_assert_request_kept():
    before = HistoryBuilder().user("task").call("read", result="long").user("next").build()
    assert_request_kept(before, before)
    assert_request_kept(before, before[1:])
    edited = [
        *before[:-1],
        before[-1].replace(
            parts=(
                ToolReturnPart(tool_call_id="call_1", tool_name="read", content="short"),
                before[-1].parts[1],
            )
        ),
    ]
    assert_request_kept(before, edited)  # an edited copy is fine
    assert_request_kept(before[:2], [])  # before ends with a response: nothing is being sent
    with pytest.raises(
        AssertionError, match=r"message 2 of 3 before\) was dropped: the history after is empty"
    ):
        assert_request_kept(before, [])
    with pytest.raises(AssertionError, match="ends with a response at message 1"):
        assert_request_kept(before, before[:2])
    with pytest.raises(AssertionError, match="ends with message 0 of before"):
        assert_request_kept(before, before[:1])
    no_prompt = [
        *before[:-1],
        CanonicalMessage.request(ToolReturnPart(tool_call_id="call_1", tool_name="read", content="x")),
    ]
    with pytest.raises(AssertionError, match="lost user prompt 'next'"):
        assert_request_kept(before, no_prompt)
    no_answer = [*before[:-1], CanonicalMessage.request(UserPromptPart("next"))]
    with pytest.raises(AssertionError, match="no longer answers tool_call_id 'call_1'"):
        assert_request_kept(before, no_answer)


def test_assert_user_prompts_kept():
    before = HistoryBuilder().user("one").text("a").user("two").text("b").user("three").build()
    assert_user_prompts_kept(before, before)
    summary = CanonicalMessage.request(UserPromptPart("summary of earlier turns"))
    assert_user_prompts_kept(before, [summary, *before])  # extra prompts are fine
    with pytest.raises(AssertionError, match=r"user prompt 'two' \(message 2, part 0 before\) is missing"):
        assert_user_prompts_kept(before, [before[0], before[1], before[4]])
    reordered = [before[2], before[1], before[0], before[3], before[4]]
    with pytest.raises(AssertionError, match=r"'one'|'two'"):
        assert_user_prompts_kept(before, reordered)


def test_assert_transformation_safe_and_unchanged():
    before, after = split_history()
    assert_transformation_safe(before, before)
    with pytest.raises(AssertionError, match="orphan_return"):
        assert_transformation_safe(before, after)
    dropped_prompt = before[:1] + before[1:-1] + [CanonicalMessage.request(UserPromptPart("other"))]
    with pytest.raises(AssertionError, match="lost user prompt"):
        assert_transformation_safe(before, dropped_prompt)
    assert_history_unchanged(before, list(before))
    with pytest.raises(AssertionError, match="5 messages before, 3 after"):
        assert_history_unchanged(before, after)
    with pytest.raises(AssertionError, match="changed at message 4"):
        assert_history_unchanged(before, dropped_prompt)


# --------------------------------------------------------------------------------------
# check_plugin
# --------------------------------------------------------------------------------------


class Typos:
    runs_before = ("slidng_window",)

    @hookimpl
    def before_model_requets(self, ctx: RequestContext) -> None: ...

    @hookimpl
    def on_tool(self, ctx: object, evnt: object) -> None: ...

    @hookimpl
    async def count_tokens(self, text: str) -> int:
        return 1

    @hookimpl(wrapper=True)
    def after_node(self, ctx: object):
        return (yield)


def test_check_plugin_reports_every_hook_mistake_at_once():
    problems = check_plugin(Typos())
    by_code = {p.code: p for p in problems}
    assert set(by_code) == {
        "unknown_hook",
        "unknown_argument",
        "async_not_awaited",
        "wrapper_on_context_hook",
        "unknown_order_name",
    }
    assert "did you mean 'before_model_request'?" in by_code["unknown_hook"].message
    assert by_code["unknown_hook"].hook == "before_model_requets"
    assert "'evnt'" in by_code["unknown_argument"].message
    assert "did you mean 'sliding_window'?" in by_code["unknown_order_name"].message
    assert by_code["unknown_order_name"].severity == "warning"
    assert problems[-1].severity == "warning"  # errors first
    assert str(by_code["unknown_hook"]).startswith(
        "[error] unknown_hook: Typos instance.before_model_requets"
    )


def test_check_plugin_agrees_with_the_manager_on_typos():
    class Typo:
        @hookimpl
        def on_compactoin(self, event: object) -> None: ...

    (problem,) = check_plugin(Typo())
    assert problem.code == "unknown_hook"
    with pytest.raises(Exception, match="unknown hook 'on_compactoin'"):
        PluginManager().register(Typo())


def test_check_plugin_on_capability_classes_names_and_ordering():
    class Forgot(Capability):
        async def before_model_request(self, ctx: RequestContext) -> None: ...

    assert [p.code for p in check_plugin(Forgot)] == ["missing_hookimpl"]

    class Nameless(Capability):
        name: ClassVar[str] = "nameless"

    nameless = Nameless()
    nameless.name = ""  # pyright: ignore[reportAttributeAccessIssue]
    assert [p.code for p in check_plugin(nameless)] == ["bad_name"]

    class SelfRef(Capability):
        runs_after: ClassVar[tuple[str, ...]] = ("self_ref",)

    assert [p.code for p in check_plugin(SelfRef)] == ["bad_ordering"]

    class BadType(Capability):
        runs_before = 3  # pyright: ignore[reportAssignmentType]

    (problem,) = check_plugin(BadType)
    assert (problem.code, "must be a sequence of capability names" in problem.message) == (
        "bad_ordering",
        True,
    )


def test_check_plugin_against_a_manager_cycles_and_taken_names():
    class First(Capability):
        name: ClassVar[str] = "first"
        runs_before: ClassVar[tuple[str, ...]] = ("second",)

    class Second(Capability):
        name: ClassVar[str] = "second"
        runs_before: ClassVar[tuple[str, ...]] = ("first",)

    manager = PluginManager()
    manager.add_capabilities([First()])
    codes = [p.code for p in check_plugin(Second(), manager=manager)]
    assert codes == ["ordering_cycle"]
    assert "contradict each other" in check_plugin(Second(), manager=manager)[0].message
    codes = [p.code for p in check_plugin(First(), manager=manager)]
    assert codes == ["name_taken", "unknown_order_name"]  # "second" is neither in manager nor installed
    assert check_plugin(First(), known_capabilities=["second"]) == []


def test_check_plugin_known_names_no_hooks_and_optional_hooks():
    class Trimmer(Capability):
        runs_before: ClassVar[tuple[str, ...]] = ("my_other_capability",)

    assert [p.code for p in check_plugin(Trimmer)] == ["unknown_order_name"]
    assert check_plugin(Trimmer, known_capabilities=["my_other_capability"]) == []
    assert {"sliding_window", "summarizing"} <= KNOWN_CAPABILITY_NAMES

    class Nothing:
        pass

    assert [p.code for p in check_plugin(Nothing())] == ["no_hooks"]

    class Optional:
        @hookimpl(optionalhook=True)
        def some_other_projects_hook(self) -> None: ...

    (problem,) = check_plugin(Optional())
    assert (problem.code, problem.severity) == ("optional_unknown_hook", "warning")


def test_every_installed_capability_passes_check_plugin():
    import importlib.metadata

    classes = [ep.load() for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)]
    assert len(classes) >= 6
    for cls in classes:
        assert check_plugin(cls) == [], cls


def test_assert_plugin_valid():
    assert_plugin_valid(Clip)
    assert_plugin_valid(Watcher())
    with pytest.raises(AssertionError, match=r"Typos instance has 5 problem\(s\):\n  - \[error\]"):
        assert_plugin_valid(Typos())

    class Trimmer(Capability):
        runs_before: ClassVar[tuple[str, ...]] = ("absent",)

    with pytest.raises(AssertionError, match="unknown_order_name"):
        assert_plugin_valid(Trimmer)
    assert_plugin_valid(Trimmer, warnings_are_errors=False)


# --------------------------------------------------------------------------------------
# check_capability_invariants
# --------------------------------------------------------------------------------------


class DropPrompts(Capability):
    """Blanks the user prompts of old requests (keeps tool pairs): loses user prompts."""

    async def compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
        edited: list[CanonicalMessage] = []
        for index, message in enumerate(ctx.messages):
            if message.is_request and index < len(ctx.messages) - 1:
                parts = tuple(
                    UserPromptPart("[removed]") if isinstance(p, UserPromptPart) else p for p in message.parts
                )
                if parts != message.parts:
                    message = message.replace(parts=parts)
            edited.append(message)
        ctx.replace_messages(edited, strategy="drop_prompts", reason=reason)


class Flip(Capability):
    """Not idempotent: adds a marker text to the last response every time."""

    async def compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
        for index in range(len(ctx.messages) - 1, -1, -1):
            message = ctx.messages[index]
            if message.kind == "response":
                new = message.replace(parts=(*message.parts, TextPart("again")))
                ctx.replace_messages(
                    [*ctx.messages[:index], new, *ctx.messages[index + 1 :]], strategy="f", reason=reason
                )
                return


SMALL = histories(min_messages=1, max_messages=9)


def test_check_capability_invariants_passes_a_safe_capability():
    # A window drops old prompts by design: only the pair and request properties apply.
    # Clip knows nothing of pins: drawn without pins it is safe, with them the kit catches it.
    check_capability_invariants(
        lambda: Clip(keep=3), max_examples=25, user_prompts=False, idempotent=True, pins=False
    )


def test_check_capability_invariants_pins_random_parts_and_catches_a_capability_that_drops_them():
    with pytest.raises(CapabilityError, match="lost_pinned_part"):
        check_capability_invariants(lambda: Clip(keep=3), max_examples=60, user_prompts=False, shrink=False)


def test_check_capability_invariants_catches_lost_prompts_and_non_idempotence():
    with pytest.raises(AssertionError, match="user prompt"):
        check_capability_invariants(Clip, max_examples=30, histories=SMALL, shrink=False, pins=False)
    with pytest.raises(AssertionError, match="user prompt"):
        check_capability_invariants(
            DropPrompts, max_examples=30, histories=SMALL, force=True, shrink=False, pins=False
        )
    check_capability_invariants(DropPrompts, max_examples=10, force=True, user_prompts=False, pins=False)
    with pytest.raises(AssertionError, match="not idempotent"):
        check_capability_invariants(
            Flip, max_examples=30, histories=SMALL, force=True, idempotent=True, shrink=False, pins=False
        )


def test_check_capability_invariants_reports_the_guard():
    class Splitter(Capability):
        """Drops the first response holding a tool call: its answers are left orphaned."""

        async def compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
            for index, message in enumerate(ctx.messages):
                if any(isinstance(p, ToolCallPart) for p in message.parts):
                    rest = [*ctx.messages[:index], *ctx.messages[index + 1 :]]
                    ctx.replace_messages(rest, strategy="splitter", reason=reason)
                    return

    with pytest.raises(CapabilityError, match="splitter"):
        check_capability_invariants(Splitter, max_examples=50, histories=SMALL, force=True, shrink=False)


# --------------------------------------------------------------------------------------
# The pytest plugin, as a user sees it
# --------------------------------------------------------------------------------------

USER_TESTS = """
import asyncio
from harness import Capability, hookimpl
from harness.core import ModelSettings
from harness.testing import HistoryBuilder, HookRecorder, Registrar, assert_invariants, tool_call

STATE = {}

class Obs:
    @hookimpl
    def on_compaction(self, event):
        pass

class Cap(Capability):
    async def compact(self, ctx, *, reason="forced"):
        ctx.replace_messages(ctx.messages[-1:], strategy="cap", reason=reason)

def test_fixtures(harness_plugin_manager, harness_register, harness_hook_recorder, harness_history,
                  harness_scripted_model, harness_context):
    assert isinstance(harness_register, Registrar)
    assert isinstance(harness_hook_recorder, HookRecorder)
    assert isinstance(harness_history, HistoryBuilder)
    harness_register(Cap())
    harness_register(Obs(), name="obs")
    messages = harness_history.user("a").text("b").user("c").build()
    ctx = harness_context(messages)
    asyncio.run(harness_plugin_manager.run_before_model_request(ctx))
    assert_invariants(ctx.messages)
    assert len(ctx.messages) == 1
    assert harness_hook_recorder.hooks() == ["before_model_request", "on_compaction"]
    model = harness_scripted_model(tool_call("t"), "done")
    assert asyncio.run(model.request(messages, [], ModelSettings())).parts[0].tool_name == "t"
    STATE["manager"] = harness_plugin_manager
    STATE["recorder"] = harness_hook_recorder

def test_teardown_cleaned_up(harness_plugin_manager):
    old = STATE["manager"]
    assert old.list_plugins() == []
    assert not STATE["recorder"].attached
    assert harness_plugin_manager is not old
"""


INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\nfilterwarnings = error\n"


def test_fixtures_are_available_to_a_users_tests(pytester: pytest.Pytester):
    pytester.makeini(INI)
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_the_plugin_can_be_disabled(pytester: pytest.Pytester):
    pytester.makeini(INI)
    pytester.makepyfile(test_user="def test_needs_it(harness_history):\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "no:harness", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'harness_history' not found*"])


def test_fixture_names_do_not_collide_with_the_projects(request: pytest.FixtureRequest):
    names = [
        "harness_plugin_manager",
        "harness_register",
        "harness_hook_recorder",
        "harness_scripted_model",
        "harness_history",
        "harness_context",
    ]
    manager = request.config.pluginmanager
    plugin = manager.get_plugin("harness")
    assert plugin is not None
    assert sorted(plugin.__all__) == sorted(names)
    for name in names:
        definitions = request._fixturemanager.getfixturedefs(name, request.node)
        assert definitions is not None
        assert len(definitions) == 1, name


def test_compact_runs_with_a_registered_stack_and_recorder(harness_plugin_manager: PluginManager):
    recorder = HookRecorder(harness_plugin_manager)
    harness_plugin_manager.add_capabilities([Clip(keep=2)])
    result = asyncio.run(compact(long_history(), None, plugin_manager=harness_plugin_manager, force=True))
    assert len(result.messages) < len(long_history())
    assert recorder.hooks() == ["before_model_request", "on_compaction"]


# --------------------------------------------------------------------------------------
# assert_memo_matches_fresh
# --------------------------------------------------------------------------------------


class _ClearOlderReturns(Capability):
    """Clears every unmarked tool return before the newest message; ``once`` remembers too much."""

    name: ClassVar[str] = "clear_older_returns"

    def __init__(self, *, once: bool = False) -> None:
        self.once = once
        self.done = False

    @hookimpl
    async def before_model_request(self, ctx: RequestContext) -> None:
        if self.once and self.done:
            return  # a memo that never notices new returns
        self.done = True
        await self.compact(ctx)

    async def compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
        spots = clearable_returns(ctx.messages)
        if not spots:
            return
        messages = list(ctx.messages)
        ids: list[str] = []
        for mi, pi in spots:
            parts = list(messages[mi].parts)
            part = parts[pi]
            assert isinstance(part, ToolReturnPart)
            parts[pi] = with_harness_mark(replace(part, content="[gone]"), cleared="older")
            messages[mi] = messages[mi].replace(parts=tuple(parts))
            ids.append(part.tool_call_id)
        ctx.replace_messages(messages, strategy=self.name, reason=reason, cleared_tool_call_ids=ids)


def _three_steps() -> list[CanonicalMessage]:
    builder = HistoryBuilder().user("task")
    for step in range(3):
        builder.call("read_file", {"path": f"f{step}.py"}, result=f"body {step}")
    return builder.build()


def test_memo_matches_fresh_passes_a_capability_without_memo() -> None:
    cap = _ClearOlderReturns()
    assert_memo_matches_fresh(cap, _three_steps(), fresh=_ClearOlderReturns)
    assert_memo_matches_fresh(cap, _three_steps(), fresh=_ClearOlderReturns, interfere=lambda h: None)


def test_memo_matches_fresh_catches_a_stale_memo() -> None:
    with pytest.raises(AssertionError, match=r"request at messages\[\d+\]: the remembered run edited"):
        assert_memo_matches_fresh(_ClearOlderReturns(once=True), _three_steps(), fresh=_ClearOlderReturns)


def test_memo_matches_fresh_applies_the_interfering_clear_to_both_copies() -> None:
    seen: list[list[tuple[int, int]]] = []

    def interfere(history: list[CanonicalMessage]) -> tuple[int, int] | None:
        spots = clearable_returns(history)
        seen.append(spots)
        return spots[0] if spots else None

    assert_memo_matches_fresh(
        _ClearOlderReturns(), _three_steps(), fresh=_ClearOlderReturns, interfere=interfere
    )
    assert any(seen), "some request had a return to clear"
    marks = [harness_mark(p) for p in _three_steps()[2].parts]
    assert marks == [None]  # the input history itself is never edited


def test_clearable_returns_skips_marked_returns_and_the_newest_message() -> None:
    history = _three_steps()
    spots = clearable_returns(history)
    assert spots
    assert all(mi < len(history) - 1 for mi, _ in spots)
    mi, pi = spots[0]
    parts = list(history[mi].parts)
    part = parts[pi]
    assert isinstance(part, ToolReturnPart)
    parts[pi] = with_harness_mark(part, cleared="x")
    history[mi] = history[mi].replace(parts=tuple(parts))
    assert (mi, pi) not in clearable_returns(history)


def test_every_capability_distribution_harness_ships_is_a_known_name() -> None:
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "plugins"
    shipped: set[str] = set()
    for pyproject in root.glob("harness-*/pyproject.toml"):
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
        for name, target in project["entry-points"]["harness"].items():
            if ":" in target:  # a capability class; store plugins point at a module of hooks
                module, attribute = target.split(":")
                if isinstance(getattr(importlib.import_module(module), attribute), type):
                    shipped.add(name)  # an observer (harness-otel) points at an instance
    assert "recall" in shipped
    assert shipped == set(KNOWN_CAPABILITY_NAMES)


def test_pin_parts_and_assert_pins_kept():
    from harness.core import is_pinned
    from harness.testing import assert_pins_kept, pin_parts

    history = [CanonicalMessage.request(UserPromptPart("a"), UserPromptPart("b"))]
    pinned = pin_parts(history, [False, True])
    assert [is_pinned(p) for p in pinned[0].parts] == [False, True]
    assert pin_parts(history, []) is history
    assert_pins_kept(pinned, pinned)
    with pytest.raises(AssertionError, match=r"1 pinned part\(s\) lost or changed:\n  - user-prompt 'b'"):
        assert_pins_kept(pinned, [CanonicalMessage.request(UserPromptPart("a"))])
