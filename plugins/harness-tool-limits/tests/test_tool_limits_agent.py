"""ToolLimits in real runs: agents driven by FunctionModels calling real tools."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Generator, Sequence
from pathlib import Path
from typing import Any

import pytest
from harness_tool_limits import NOTES_KEY, CallCounts, LimitHit, ToolLimitExceeded, ToolLimits

from harness import Agent, CanonicalMessage, Session, TextPart, ToolCallPart, ToolReturnPart, open_store
from harness.capabilities.calls import ToolCall
from harness.core import RetryPromptPart, ToolOutcome
from harness.errors import CapabilityError, HarnessError, RunStopped, ToolRetry, UserAbort
from harness.history import check_invariants
from harness.hooks import PluginManager, hookimpl
from harness.models.function import FunctionInfo, FunctionModel
from harness.run import ABORTED_TOOL_CONTENT
from harness.tools import RunContext

ran: list[str] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def search(query: str) -> str:
    """Search.

    Args:
        query: What to look for.
    """
    ran.append(f"search:{query}")
    return f"found {query}"


def fetch(url: str) -> str:
    """Fetch a page.

    Args:
        url: The page.
    """
    ran.append(f"fetch:{url}")
    return f"page {url}"


def flaky(n: int) -> str:
    """Always fails.

    Args:
        n: Anything.
    """
    ran.append(f"flaky:{n}")
    raise RuntimeError("backend down")


def picky(n: int) -> str:
    """Asks the model to retry for odd numbers.

    Args:
        n: A number.
    """
    ran.append(f"picky:{n}")
    if n % 2:
        raise ToolRetry("give me an even number")
    return f"even {n}"


def scripted(*batches: Sequence[ToolCallPart], answer: str = "done") -> FunctionModel:
    """A model that sends ``batches`` one response each, then answers ``answer``."""
    sent: list[int] = []

    def respond(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        del messages, info
        sent.append(1)
        if len(sent) <= len(batches):
            return CanonicalMessage.response(*batches[len(sent) - 1])
        return CanonicalMessage.response(TextPart(answer))

    return FunctionModel(respond)


def calls(
    tool: str, count: int, *, prefix: str = "c", args: dict[str, Any] | None = None
) -> list[ToolCallPart]:
    return [
        ToolCallPart(tool_call_id=f"{prefix}{i}", tool_name=tool, args=args or {"query": f"q{i}"})
        for i in range(count)
    ]


def answers(messages: Sequence[CanonicalMessage]) -> dict[str, object]:
    """Each call's answer by call id: the tool return's content or the retry prompt's."""
    found: dict[str, object] = {}
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolReturnPart | RetryPromptPart) and part.tool_call_id is not None:
                assert part.tool_call_id not in found, f"{part.tool_call_id} answered twice"
                found[part.tool_call_id] = part.content
    return found


async def test_a_per_tool_limit_blocks_the_next_call_and_tells_the_model_why() -> None:
    batches = [[call] for call in calls("search", 4)]
    agent = Agent(scripted(*batches), tools=[search], capabilities=[ToolLimits(per_tool={"search": 2})])
    result = await agent.run("look it up")
    assert ran == ["search:q0", "search:q1"]
    got = answers(result.all_messages)
    assert got["c0"] == "found q0"
    assert got["c1"] == "found q1"
    for blocked in ("c2", "c3"):
        text = str(got[blocked])
        assert text.startswith("call refused by the tool-call limits: ")
        assert "tool 'search' may be called at most 2 times per run" in text
        assert "already called 2 times in this run" in text
        assert "This call was not run" in text
        assert "Do not call 'search' again in this run" in text
    assert result.output == "done"
    assert check_invariants(result.all_messages) == []


async def test_the_model_reads_the_block_message_in_its_next_request() -> None:
    seen: list[list[CanonicalMessage]] = []

    def respond(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        seen.append(list(messages))
        if len(seen) == 1:
            return CanonicalMessage.response(*calls("search", 2))
        return CanonicalMessage.response(TextPart("ok"))

    agent = Agent(FunctionModel(respond), tools=[search], capabilities=[ToolLimits(per_tool={"search": 1})])
    await agent.run("go")
    last = seen[-1][-1]
    returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
    assert returns[0].content == "found q0"
    assert "may be called at most once per run, and it was already called once" in str(returns[1].content)


async def test_a_per_run_limit_counts_every_tool_together() -> None:
    batches = [
        [ToolCallPart(tool_call_id="s1", tool_name="search", args={"query": "a"})],
        [ToolCallPart(tool_call_id="f1", tool_name="fetch", args={"url": "u"})],
        [ToolCallPart(tool_call_id="s2", tool_name="search", args={"query": "b"})],
    ]
    agent = Agent(scripted(*batches), tools=[search, fetch], capabilities=[ToolLimits(per_run=2)])
    result = await agent.run("go")
    assert ran == ["search:a", "fetch:u"]
    text = str(answers(result.all_messages)["s2"])
    assert "this run may make at most 2 tool calls in all, and 2 tool calls were already made" in text
    assert "Do not call any tool again in this run" in text


async def test_the_tool_limit_is_checked_before_the_run_limit() -> None:
    batches = [
        [ToolCallPart(tool_call_id="s1", tool_name="search", args={"query": "a"})],
        [ToolCallPart(tool_call_id="s2", tool_name="search", args={"query": "b"})],
    ]
    hits: list[LimitHit] = []

    def message(hit: LimitHit) -> str:
        hits.append(hit)
        return f"no: {hit.scope}"

    limits = ToolLimits(per_tool={"search": 1}, per_run=1, message=message)
    result = await Agent(scripted(*batches), tools=[search], capabilities=[limits]).run("go")
    assert answers(result.all_messages)["s2"] == "no: tool"
    assert hits == [LimitHit("search", "s2", "tool", 1, 1)]


async def test_tools_without_a_limit_run_freely() -> None:
    batches = [
        [ToolCallPart(tool_call_id=f"f{i}", tool_name="fetch", args={"url": str(i)})] for i in range(4)
    ]
    agent = Agent(
        scripted(*batches), tools=[search, fetch], capabilities=[ToolLimits(per_tool={"search": 0})]
    )
    await agent.run("go")
    assert ran == ["fetch:0", "fetch:1", "fetch:2", "fetch:3"]


async def test_a_zero_limit_forbids_the_tool() -> None:
    agent = Agent(
        scripted(calls("search", 1)), tools=[search], capabilities=[ToolLimits(per_tool={"search": 0})]
    )
    result = await agent.run("go")
    assert ran == []
    assert "at most 0 times per run" in str(answers(result.all_messages)["c0"])


async def test_calls_with_invalid_arguments_are_not_counted() -> None:
    """They never run the tool: the model gets the core's retry prompt and the budget is intact."""
    batches = [
        [ToolCallPart(tool_call_id="bad1", tool_name="search", args={"wrong": 1})],
        [ToolCallPart(tool_call_id="bad2", tool_name="search", args="{not json")],
        [ToolCallPart(tool_call_id="ok1", tool_name="search", args={"query": "a"})],
        [ToolCallPart(tool_call_id="ok2", tool_name="search", args={"query": "b"})],
        [ToolCallPart(tool_call_id="over", tool_name="search", args={"query": "c"})],
    ]
    agent = Agent(
        scripted(*batches),
        tools=[search],
        capabilities=[ToolLimits(per_tool={"search": 2})],
        tool_retry_budget=5,
    )
    result = await agent.run("go")
    assert ran == ["search:a", "search:b"]
    retries = [p.tool_call_id for m in result.all_messages for p in m.parts if isinstance(p, RetryPromptPart)]
    assert retries == ["bad1", "bad2"]
    assert "already called 2 times" in str(answers(result.all_messages)["over"])


async def test_a_call_to_an_unknown_tool_passes_through_uncounted() -> None:
    batches = [
        [ToolCallPart(tool_call_id="x", tool_name="nope", args={})],
        [ToolCallPart(tool_call_id="s", tool_name="search", args={"query": "a"})],
    ]
    agent = Agent(scripted(*batches), tools=[search], capabilities=[ToolLimits(per_run=1)])
    result = await agent.run("go")
    assert "Unknown tool name: 'nope'" in str(answers(result.all_messages)["x"])
    assert ran == ["search:a"]


async def test_failed_calls_count_unless_count_failed_is_false() -> None:
    batches = [[ToolCallPart(tool_call_id=f"f{i}", tool_name="flaky", args={"n": i})] for i in range(3)]
    result = await Agent(
        scripted(*batches),
        tools=[flaky],
        capabilities=[ToolLimits(per_tool={"flaky": 1})],
        tool_max_retries=1,
    ).run("go")
    assert ran == ["flaky:0"]
    assert "at most once per run" in str(answers(result.all_messages)["f1"])

    ran.clear()
    lenient = ToolLimits(per_tool={"flaky": 1}, count_failed=False)
    result = await Agent(scripted(*batches), tools=[flaky], capabilities=[lenient], tool_max_retries=1).run(
        "go"
    )
    assert ran == ["flaky:0", "flaky:1", "flaky:2"]
    assert all("backend down" in str(v) for v in answers(result.all_messages).values())


async def test_a_retry_the_tool_asks_for_counts_since_the_tool_ran() -> None:
    batches = [
        [ToolCallPart(tool_call_id="p1", tool_name="picky", args={"n": 1})],
        [ToolCallPart(tool_call_id="p2", tool_name="picky", args={"n": 2})],
    ]
    result = await Agent(
        scripted(*batches), tools=[picky], capabilities=[ToolLimits(per_tool={"picky": 1})]
    ).run("go")
    assert ran == ["picky:1"]
    assert "at most once per run" in str(answers(result.all_messages)["p2"])


async def test_counts_are_per_run_and_start_again_in_the_next_run() -> None:
    limits = ToolLimits(per_tool={"counted": 1})
    seen: list[CallCounts] = []

    def counted(ctx: RunContext, query: str) -> str:
        """Search and report the counts.

        Args:
            query: What to look for.
        """
        ran.append(query)
        seen.append(limits.counts(ctx))
        return query

    def model(prompt_calls: int) -> FunctionModel:
        return scripted(
            *[
                [
                    ToolCallPart(
                        tool_call_id=f"r{prompt_calls}-{i}", tool_name="counted", args={"query": str(i)}
                    )
                ]
                for i in range(2)
            ]
        )

    session = Session()
    await Agent(model(1), tools=[counted], capabilities=[limits]).run("first", session=session)
    await Agent(model(2), tools=[counted], capabilities=[limits]).run("second", session=session)
    assert ran == ["0", "0"]  # one call per run went through, the second of each run was blocked
    assert len(seen) == 2
    assert seen[0] is not seen[1]  # a fresh record for each run
    assert seen[0].per_tool == {"counted": 1}
    assert seen[1].per_tool == {"counted": 1}  # read during the call: counted before it ran
    assert [hit.tool_call_id for hit in seen[0].blocked] == ["r1-1"]
    assert check_invariants(session.messages) == []


async def test_parallel_calls_in_one_response_are_counted_one_by_one() -> None:
    running = 0
    peak = 0

    async def slow_search(query: str) -> str:
        """Search slowly.

        Args:
            query: What to look for.
        """
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.02)
        running -= 1
        ran.append(query)
        return query

    batch = [
        ToolCallPart(tool_call_id=f"p{i}", tool_name="slow_search", args={"query": f"q{i}"}) for i in range(6)
    ]
    agent = Agent(
        scripted(batch),
        tools=[slow_search],
        capabilities=[ToolLimits(per_tool={"slow_search": 3})],
        max_parallel_tools=6,
    )
    result = await agent.run("go")
    assert peak == 3  # the admitted calls did run at the same time
    assert sorted(ran) == ["q0", "q1", "q2"]
    got = answers(result.all_messages)
    assert [got[f"p{i}"] for i in range(3)] == ["q0", "q1", "q2"]
    for i in range(3, 6):
        assert "already called 3 times" in str(got[f"p{i}"])
    assert check_invariants(result.all_messages) == []


async def test_stop_mode_raises_after_saving_a_valid_resumable_history(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    store = open_store(url)
    session = Session.create(store=store)
    batches = [[call] for call in calls("search", 3)]
    agent = Agent(
        scripted(*batches), tools=[search], capabilities=[ToolLimits(per_tool={"search": 2}, on_limit="stop")]
    )
    with pytest.raises(ToolLimitExceeded) as caught:
        await agent.run("look it up", session=session)
    error = caught.value
    assert isinstance(error, RunStopped)
    assert (error.tool_name, error.tool_call_id, error.scope, error.limit, error.count) == (
        "search",
        "c2",
        "tool",
        2,
        2,
    )
    assert "per_tool['search']=2" in str(error)
    assert "call 'c2' to 'search'" in str(error)
    assert ran == ["search:q0", "search:q1"]

    reopened = Session.open(open_store(url), session.session_id)
    assert check_invariants(reopened.messages) == []
    saved = answers(reopened.messages)
    assert saved["c0"] == "found q0"
    assert saved["c1"] == "found q1"
    assert saved["c2"] == ABORTED_TOOL_CONTENT  # the refused call is answered, not left dangling

    follow_up = Agent(scripted(answer="finished"), tools=[search], capabilities=[ToolLimits(per_run=1)])
    result = await follow_up.run("go on", session=reopened)
    assert result.output == "finished"
    assert check_invariants(result.all_messages) == []
    store.close()


async def test_stop_mode_on_the_run_limit_names_it() -> None:
    batches = [
        [ToolCallPart(tool_call_id="a", tool_name="search", args={"query": "a"})],
        [ToolCallPart(tool_call_id="b", tool_name="fetch", args={"url": "b"})],
    ]
    agent = Agent(
        scripted(*batches), tools=[search, fetch], capabilities=[ToolLimits(per_run=1, on_limit="stop")]
    )
    with pytest.raises(ToolLimitExceeded, match=r"per_run=1") as caught:
        await agent.run("go")
    assert caught.value.scope == "run"
    assert caught.value.tool_name == "fetch"
    assert caught.value.session is not None
    assert check_invariants(caught.value.session.messages) == []


async def test_the_decision_is_recorded_in_the_call_notes() -> None:
    notes: list[dict[str, Any]] = []

    class Spy:
        name = "spy"

        @hookimpl(wrapper=True)
        def wrap_tool_call(self, call: ToolCall) -> Generator[None, ToolOutcome, object]:
            result = yield
            notes.append(dict(call.notes[NOTES_KEY]))
            return result

    pm = PluginManager()
    pm.register(Spy())
    agent = Agent(
        scripted(*[[c] for c in calls("search", 2)]),
        tools=[search],
        capabilities=[ToolLimits(per_tool={"search": 1})],
        plugin_manager=pm,
    )
    await agent.run("go")
    # The spy is inner: the blocked call never reached it, and it reads the note set before the call.
    assert notes == [{"blocked": False, "count": 1, "total": 1}]


async def test_notes_say_when_a_call_is_blocked_or_taken_back() -> None:
    notes: dict[str, dict[str, Any]] = {}

    class Outer:
        name = "outer"
        runs_before = ("tool_limits",)

        @hookimpl(wrapper=True)
        def wrap_tool_call(self, call: ToolCall) -> Generator[None, ToolOutcome, object]:
            result = yield
            notes[call.tool_call_id] = dict(call.notes[NOTES_KEY])
            return result

    batches = [
        [ToolCallPart(tool_call_id="bad", tool_name="search", args={"wrong": 1})],
        [ToolCallPart(tool_call_id="ok", tool_name="search", args={"query": "a"})],
        [ToolCallPart(tool_call_id="over", tool_name="search", args={"query": "b"})],
    ]
    agent = Agent(
        scripted(*batches), tools=[search], capabilities=[Outer(), ToolLimits(per_tool={"search": 1})]
    )
    await agent.run("go")
    assert notes == {
        "bad": {"blocked": False, "count": 0, "total": 0, "uncounted": "did not run"},
        "ok": {"blocked": False, "count": 1, "total": 1},
        "over": {"blocked": True, "scope": "tool", "limit": 1, "count": 1},
    }


async def test_a_stack_string_builds_the_limits() -> None:
    batches = [[call] for call in calls("search", 2)]
    agent = Agent(scripted(*batches), tools=[search], capabilities=["tool_limits:per_run=1"])
    result = await agent.run("go")
    assert ran == ["search:q0"]
    assert "at most 1 tool call in all" in str(answers(result.all_messages)["c1"])


async def test_streamed_runs_report_the_block_as_the_call_result() -> None:
    from harness.run.events import ToolResult

    agent = Agent(
        scripted(calls("search", 2)), tools=[search], capabilities=[ToolLimits(per_tool={"search": 1})]
    )
    results: list[ToolResult] = []
    async with agent.run_stream("go") as stream:
        async for event in stream:
            if isinstance(event, ToolResult):
                results.append(event)
    assert stream.result.output == "done"
    by_id = {r.tool_call_id: r.part.content for r in results}  # in the order they finished
    assert by_id["c0"] == "found q0"
    assert "already called once" in str(by_id["c1"])


async def test_with_tool_approval_held_calls_are_counted_when_they_run() -> None:
    """ToolApproval wraps ToolLimits (it declares runs_before=("tool_limits",)): a held call never
    reaches the limits; once approved, in the resumed run, it is counted like any call."""
    from harness_tool_approval import Approve, ToolApproval

    def send(to: str) -> str:
        """Send mail.

        Args:
            to: The recipient.
        """
        ran.append(f"send:{to}")
        return f"sent to {to}"

    batch = [
        ToolCallPart(tool_call_id="m1", tool_name="send", args={"to": "ann"}),
        ToolCallPart(tool_call_id="m2", tool_name="send", args={"to": "bob"}),
    ]
    agent = Agent(
        scripted(batch),
        tools=[send],
        capabilities=[ToolLimits(per_tool={"send": 1}), ToolApproval(tools=["send"])],
    )
    paused = await agent.run("mail them")
    assert paused.status == "awaiting_approval"
    assert ran == []
    done = await agent.run(None, session=paused.session, approvals={"m1": Approve(), "m2": Approve()})
    assert done.status == "completed"
    assert ran == ["send:ann"]
    got = answers(done.all_messages)
    assert got["m1"] == "sent to ann"
    assert "tool 'send' may be called at most once per run" in str(got["m2"])
    assert check_invariants(done.all_messages) == []


class _StopBeforeRunning:
    """An inner wrapper that stops the call before the tool runs: a fatal error, or an abort."""

    name = "stopper"
    runs_after = ("tool_limits",)

    def __init__(self, error: BaseException | None, agent: list[Agent]) -> None:
        self.error = error
        self.agent = agent

    @hookimpl(wrapper=True)
    async def wrap_tool_call(self, call: ToolCall) -> AsyncGenerator[None, ToolOutcome]:
        if self.error is not None:
            raise self.error
        self.agent[0].abort()  # the cancellation lands in the sleep, before the tool ran
        await asyncio.sleep(1)
        yield


class _Watch:
    """An outer wrapper recording the call's notes and the counts after the error went through."""

    name = "watch"
    runs_before = ("tool_limits",)

    def __init__(self, limits: ToolLimits) -> None:
        self.limits = limits
        self.seen: list[tuple[dict[str, Any], dict[str, int], int]] = []

    @hookimpl(wrapper=True)
    def wrap_tool_call(self, ctx: RunContext, call: ToolCall) -> Generator[None, ToolOutcome, object]:
        try:
            return (yield)
        finally:
            counts = self.limits.counts(ctx)
            self.seen.append((dict(call.notes[NOTES_KEY]), dict(counts.per_tool), counts.total))


@pytest.mark.parametrize(
    ("error", "raised"),
    [
        (None, UserAbort),
        (RunStopped("stopped by policy"), RunStopped),
        (HarnessError("bad"), CapabilityError),
    ],
    ids=["abort", "run-stopped", "fatal"],
)
async def test_an_abort_or_a_fatal_error_before_the_tool_ran_is_not_counted(
    error: BaseException | None, raised: type[BaseException]
) -> None:
    limits = ToolLimits(per_tool={"search": 1})
    watch = _Watch(limits)
    agent_box: list[Agent] = []
    agent = Agent(
        scripted([ToolCallPart(tool_name="search", args={"query": "a"}, tool_call_id="c0")]),
        tools=[search],
        capabilities=[watch, limits, _StopBeforeRunning(error, agent_box)],
    )
    agent_box.append(agent)
    with pytest.raises(raised):
        await agent.run("go")
    assert ran == []
    assert watch.seen == [
        ({"blocked": False, "count": 0, "total": 0, "uncounted": "did not run"}, {"search": 0}, 0)
    ]


def fatal_search(query: str) -> str:
    """Search, then fail fatally.

    Args:
        query: What to look for.
    """
    ran.append(f"fatal:{query}")
    raise HarnessError("the backend is misconfigured")


@pytest.mark.parametrize("count_failed", [True, False])
async def test_a_fatal_error_the_tool_raised_counts_unless_count_failed_is_false(count_failed: bool) -> None:
    limits = ToolLimits(per_tool={"fatal_search": 1}, count_failed=count_failed)
    watch = _Watch(limits)
    agent = Agent(
        scripted([ToolCallPart(tool_name="fatal_search", args={"query": "a"}, tool_call_id="c0")]),
        tools=[fatal_search],
        capabilities=[watch, limits],
    )
    with pytest.raises(HarnessError, match="misconfigured"):
        await agent.run("go")
    assert ran == ["fatal:a"]
    notes, per_tool, _total = watch.seen[0]
    if count_failed:
        assert (notes, per_tool) == ({"blocked": False, "count": 1, "total": 1}, {"fatal_search": 1})
    else:
        assert notes["uncounted"] == "failed"
        assert per_tool == {"fatal_search": 0}


async def test_an_abort_while_the_tool_runs_leaves_it_counted() -> None:
    """The tool began: it may have taken effect, so the call counts against the limit."""
    limits = ToolLimits(per_tool={"slow": 1})
    watch = _Watch(limits)
    agent_box: list[Agent] = []

    async def slow(query: str) -> str:
        """Aborts the run while it runs.

        Args:
            query: What to look for.
        """
        ran.append(f"slow:{query}")
        agent_box[0].abort()
        await asyncio.sleep(1)
        return "late"

    agent = Agent(
        scripted([ToolCallPart(tool_name="slow", args={"query": "a"}, tool_call_id="c0")]),
        tools=[slow],
        capabilities=[watch, limits],
    )
    agent_box.append(agent)
    with pytest.raises(UserAbort):
        await agent.run("go")
    assert watch.seen == [({"blocked": False, "count": 1, "total": 1}, {"slow": 1}, 1)]
