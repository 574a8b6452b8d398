"""A run makes every effect through its Effects: units in order, deltas rebuilding requests, clock, ids."""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from harness_clear_tool_results import ClearToolResults
from harness_sliding_window import SlidingWindow
from harness_summarizing import SummarizingCompaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import open_store
from harness.capabilities import RequestContext
from harness.core.effects import InProcessEffects, ModelRequestUnit, RequestDelta, ToolCallUnit, ToolOutcome
from harness.core.messages import (
    CanonicalMessage,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    harness_mark,
)
from harness.hooks import hookimpl
from harness.models.function import FunctionInfo, FunctionModel
from harness.run import Agent
from harness.run.fallback import FALLBACK_ID_PREFIX
from harness.session import Session, SessionStore
from harness.testing import ScriptedCall, scripted_model, tool_call
from harness.testing.models import Step
from harness.tools.tool import Tool

FIXED = datetime(2030, 5, 17, 8, 30, tzinfo=UTC)

Unit = ModelRequestUnit | ToolCallUnit


class Recording(InProcessEffects):
    """Runs everything in process, keeps every unit, and checks each request against the store."""

    deltas = True

    def __init__(self, store: SessionStore | None = None) -> None:
        self.units: list[Unit] = []
        self.store = store
        self.stored_views: list[list[CanonicalMessage]] = []
        self.stored_revisions: list[int] = []

    async def model_request(self, unit: ModelRequestUnit) -> CanonicalMessage:
        self.units.append(unit)
        if self.store is not None and unit.purpose == "request" and unit.session_id is not None:
            stored = Session.open(self.store, unit.session_id)
            self.stored_revisions.append(stored.revision)
            self.stored_views.append(stored.messages)
        return await super().model_request(unit)

    async def tool_call(self, unit: ToolCallUnit) -> ToolOutcome:
        self.units.append(unit)
        return await super().tool_call(unit)

    def requests(self) -> list[ModelRequestUnit]:
        return [u for u in self.units if isinstance(u, ModelRequestUnit) and u.purpose == "request"]


class Fixed(Recording):
    """A fixed clock and counted ids; responses come back without a timestamp."""

    def __init__(self, store: SessionStore | None = None) -> None:
        super().__init__(store)
        self.ids: list[str] = []

    def now(self) -> datetime:
        return FIXED

    def new_id(self) -> str:
        value = f"{len(self.ids) + 1:04x}" * 8
        self.ids.append(value)
        return value

    async def model_request(self, unit: ModelRequestUnit) -> CanonicalMessage:
        response = await super().model_request(unit)
        return response.replace(timestamp=None)


def probe(n: int) -> str:
    """Return a numbered result.

    Args:
        n: The number.
    """
    return f"result {n}: " + "x" * 40


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    opened = open_store(f"sqlite:///{tmp_path / 'sessions.db'}")
    yield opened
    opened.close()


def rebuild(units: Sequence[ModelRequestUnit]) -> list[list[CanonicalMessage]]:
    """Every request rebuilt from the deltas alone, chained from an empty view."""
    rebuilt: list[list[CanonicalMessage]] = []
    view: list[CanonicalMessage] = []
    for unit in units:
        delta = unit.delta
        assert isinstance(delta, RequestDelta), f"request unit {unit.index} has no delta"
        view = delta.view(view)
        rebuilt.append(delta.outgoing(view))
    return rebuilt


def assert_deltas_rebuild(units: Sequence[ModelRequestUnit]) -> None:
    view: list[CanonicalMessage] = []
    for unit, outgoing in zip(units, rebuild(units), strict=True):
        assert unit.delta is not None
        view = unit.delta.view(view)
        assert view == list(unit.view), f"request unit {unit.index}: the rebuilt view differs"
        assert outgoing == list(unit.messages), f"request unit {unit.index}: the rebuilt request differs"


# ---------------------------------------------------------------- units in order


async def test_every_model_request_and_tool_call_is_a_unit_in_order(store: SessionStore) -> None:
    model = scripted_model(
        tool_call("probe", {"n": 1}),
        [tool_call("probe", {"n": 2}), tool_call("probe", {"n": 3})],
        "done",
    )
    writer = Tool.from_function(probe, name="write", idempotent=False)
    agent = Agent(
        model,
        tools=[probe, writer],
        system_prompt="be brief",
        max_parallel_tools=1,
        tool_max_retries=4,
        tool_retry_base_delay=0.25,
    )
    session = Session.create(store=store)
    effects = Recording(store)
    result = await agent.run("go", session, effects=effects)
    assert result.output == "done"
    kinds = [
        (u.index, u.purpose, u.source) if isinstance(u, ModelRequestUnit) else u.call.tool_call_id
        for u in effects.units
    ]
    assert kinds == [
        (1, "request", "agent"),
        "scripted_1",
        (2, "request", "agent"),
        "scripted_2",
        "scripted_3",
        (3, "request", "agent"),
    ]
    requests = effects.requests()
    assert [r.model for r in requests] == [model] * 3
    assert all(r.session_id == session.session_id for r in requests)
    assert [t.name for t in requests[0].tools] == ["probe", "write"]
    # what was sent is what the model received
    assert [list(r.messages) for r in requests] == model.requests
    tool_units = [u for u in effects.units if isinstance(u, ToolCallUnit)]
    assert [dict(u.arguments) for u in tool_units] == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert all(u.idempotent and u.max_attempts == 4 and u.base_delay == 0.25 for u in tool_units)
    assert all(u.session_id == session.session_id for u in tool_units)
    assert all(u.revision is not None and u.revision > 0 for u in tool_units)
    # the units' results are the run's: each tool's return is in the history
    returns = [p for m in result.all_messages for p in m.parts if isinstance(p, ToolReturnPart)]
    assert [p.content for p in returns] == [probe(1), probe(2), probe(3)]


async def test_a_non_idempotent_tool_unit_gets_one_attempt() -> None:
    writer = Tool.from_function(probe, name="write", idempotent=False)
    effects = Recording()
    agent = Agent(scripted_model(tool_call("write", {"n": 1}), "ok"), tools=[writer], tool_max_retries=5)
    await agent.run("go", effects=effects)
    [unit] = [u for u in effects.units if isinstance(u, ToolCallUnit)]
    assert unit.idempotent is False
    assert unit.max_attempts == 1
    assert unit.revision is None  # no store


async def test_an_effects_outcome_is_what_the_model_reads() -> None:
    class Answering(Recording):
        async def tool_call(self, unit: ToolCallUnit) -> ToolOutcome:
            self.units.append(unit)
            if unit.arguments["n"] == 1:
                return ToolOutcome("returned", content={"from": "journal"})
            if unit.arguments["n"] == 2:
                return ToolOutcome("retry", error="n=2 is not allowed", hint=False)
            return ToolOutcome("unknown")

    model = scripted_model(
        [tool_call("probe", {"n": 1}), tool_call("probe", {"n": 2}), tool_call("probe", {"n": 3})], "ok"
    )
    result = await Agent(model, tools=[probe]).run("go", effects=Answering())
    answers = {
        p.tool_call_id: p
        for m in result.all_messages
        for p in m.parts
        if isinstance(p, ToolReturnPart | RetryPromptPart)
    }
    first, second, third = answers["scripted_1"], answers["scripted_2"], answers["scripted_3"]
    assert isinstance(first, ToolReturnPart)
    assert first.content == {"from": "journal"}
    assert isinstance(second, RetryPromptPart)
    assert second.content == "n=2 is not allowed"  # hint=False: no "Fix the errors" appended
    assert isinstance(third, ToolReturnPart)
    mark = harness_mark(third)
    assert mark is not None
    assert mark.get("outcome_unknown") is True


# ---------------------------------------------------------------- capability units


def summarizer_model() -> FunctionModel:
    count = 0

    def summarize(messages: list[CanonicalMessage], info: FunctionInfo) -> str:
        nonlocal count
        del messages, info
        count += 1
        return f"Summary number {count}: the probes returned their numbered results so far."

    return FunctionModel(summarize, model_name="summarizer")


async def test_the_summarizers_call_is_a_capability_unit_between_requests(store: SessionStore) -> None:
    summarizer = summarizer_model()
    steps: list[ScriptedCall | str] = [tool_call("probe", {"n": n}) for n in range(1, 7)]
    agent = Agent(
        scripted_model(*steps, "done"),
        tools=[probe],
        capabilities=[SummarizingCompaction(max_messages=6, keep_messages=2, model=summarizer)],
    )
    effects = Recording(store)
    session = Session.create(store=store)
    result = await agent.run("go", session, effects=effects)
    assert result.output == "done"
    model_units = [u for u in effects.units if isinstance(u, ModelRequestUnit)]
    assert [u.index for u in model_units] == list(range(1, len(model_units) + 1))
    capability = [u for u in model_units if u.purpose == "capability"]
    assert capability, "the summarizer never ran"
    assert len(summarizer.requests) == len(capability)
    for unit, sent in zip(capability, summarizer.requests, strict=True):
        assert unit.source == "summarizing"
        assert unit.model is summarizer
        assert unit.delta is None
        assert unit.revision is None
        assert unit.session_id == session.session_id
        assert list(unit.messages) == sent
        assert list(unit.view) == sent
        # the next unit is the agent's request that carries the summary
        following = model_units[unit.index]
        assert following.purpose == "request"
        assert any(
            "Summary number" in str(getattr(p, "content", "")) for m in following.view for p in m.parts
        )
    assert_deltas_rebuild(effects.requests())


# ---------------------------------------------------------------- deltas rebuild every request


async def test_deltas_rebuild_every_request_across_compactions_and_nudges(store: SessionStore) -> None:
    blank = CanonicalMessage.response(TextPart("  "))
    steps: list[Step] = []
    for n in range(1, 9):
        steps.append(tool_call("probe", {"n": n}))
        if n in (3, 6):
            steps.append(blank)
    model = scripted_model(*steps, "done")
    agent = Agent(
        model,
        tools=[probe],
        system_prompt="be brief",
        instructions=lambda ctx: f"iteration {ctx.run.current_iteration}",
        capabilities=[
            ClearToolResults(max_messages=4, keep_pairs=1),
            SlidingWindow(max_messages=9, keep_messages=5),
        ],
    )
    effects = Recording(store)
    session = Session.create(store=store)
    result = await agent.run("go", session, effects=effects)
    assert result.output == "done"
    requests = effects.requests()
    assert len(requests) == 11
    assert_deltas_rebuild(requests)
    deltas = [r.delta for r in requests]
    assert all(d is not None for d in deltas)
    views = [list(r.view) for r in requests]
    keeps = [d.keep for d in deltas if d is not None]
    assert keeps[0] == 0
    # the front was rewritten at least once (a delta keeping less than the previous view minus one)
    assert any(k < len(v) - 1 for k, v in zip(keeps[1:], views, strict=False))
    # a nudge rewrote the last message of the previous view: only the messages before it were kept
    nudged = [i for i, v in enumerate(views) if any(_is_nudge(p) for p in v[-1].parts)]
    assert nudged
    for i in nudged:
        assert keeps[i] <= len(views[i - 1]) - 1
    # system parts: the static prompt and this request's instructions
    for r in requests:
        assert r.delta is not None
        texts = [p.content for p in r.delta.system]
        assert texts[0] == "be brief"
        assert texts[-1].startswith("iteration ")
    # when the session is stored, each request's revision is the stored one and its view the stored view
    assert [r.revision for r in requests] == effects.stored_revisions
    assert [list(r.view) for r in requests] == effects.stored_views


def _is_nudge(part: object) -> bool:
    mark = harness_mark(part) if isinstance(part, RetryPromptPart) else None
    return mark is not None and "empty_response" in mark


_step = st.one_of(
    st.integers(1, 3).map(lambda k: ("calls", k)),
    st.just(("empty", 0)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(_step, min_size=1, max_size=8).filter(
        lambda s: all(not (a[0] == b[0] == "empty") for a, b in itertools.pairwise(s))
    ),
    capability=st.sampled_from(["none", "clear", "sliding", "both"]),
    stored=st.booleans(),
    scoped=st.booleans(),
)
def test_property_deltas_chained_from_nothing_rebuild_every_request(
    steps: list[tuple[str, int]], capability: str, stored: bool, scoped: bool
) -> None:
    script: list[Step] = []
    n = 0
    for kind, k in steps:
        if kind == "empty":
            script.append(CanonicalMessage.response(TextPart("")))
        else:
            calls: list[ScriptedCall] = []
            for _ in range(k):
                n += 1
                calls.append(tool_call("probe", {"n": n}))
            script.append(calls)
    script.append("done")
    capabilities: list[object] = []
    if capability in ("clear", "both"):
        capabilities.append(ClearToolResults(max_messages=3, keep_pairs=1))
    if capability in ("sliding", "both"):
        capabilities.append(SlidingWindow(max_messages=6, keep_messages=3))
    if scoped:
        capabilities.append(_Scoped())
    agent = Agent(
        scripted_model(*script),
        tools=[probe],
        system_prompt="sys",
        instructions=lambda ctx: f"step {ctx.run.current_iteration}",
        capabilities=capabilities,
        max_iterations=50,
    )

    async def run(store: SessionStore | None) -> Recording:
        effects = Recording(store)
        session = Session.create(store=store) if store is not None else Session()
        await agent.run("go", session, effects=effects)
        return effects

    if stored:
        with tempfile.TemporaryDirectory() as folder:
            opened = open_store(f"sqlite:///{folder}/s.db")
            try:
                effects = asyncio.run(run(opened))
            finally:
                opened.close()
        assert [r.revision for r in effects.requests()] == effects.stored_revisions
        assert [list(r.view) for r in effects.requests()] == effects.stored_views
    else:
        effects = asyncio.run(run(None))
        assert all(r.revision is None for r in effects.requests())
    requests = effects.requests()
    assert len(requests) == len(script)
    assert [r.index for r in requests] == list(range(1, len(requests) + 1))
    assert_deltas_rebuild(requests)
    if scoped:
        # The scoped part comes first; a compacting request also carries the receipt after it.
        assert all(r.delta is not None and r.delta.scoped[:1] == (_Scoped.PART,) for r in requests)


class _Scoped:
    """Adds a request-scoped part to every request."""

    name = "scoped_note"
    PART = UserPromptPart("(scoped note: answer briefly)")

    @hookimpl
    def before_model_request(self, ctx: RequestContext) -> None:
        ctx.request_scoped.append(self.PART)


# ---------------------------------------------------------------- deltas off


async def test_effects_without_deltas_get_units_without_deltas() -> None:
    class NoDeltas(Recording):
        deltas = False

    effects = NoDeltas()
    await Agent(scripted_model(tool_call("probe", {"n": 1}), "ok"), tools=[probe]).run("go", effects=effects)
    requests = effects.requests()
    assert len(requests) == 2
    assert all(r.delta is None for r in requests)


async def test_effects_without_the_attribute_get_deltas() -> None:
    """``deltas`` absent means on: an engine's effects need not know the attribute."""

    class Bare:  # the protocol only: no InProcessEffects base, no ``deltas``
        def __init__(self) -> None:
            self.inner = InProcessEffects()
            self.requests: list[ModelRequestUnit] = []

        def now(self) -> datetime:
            return self.inner.now()

        def new_id(self) -> str:
            return self.inner.new_id()

        async def model_request(self, unit: ModelRequestUnit) -> CanonicalMessage:
            self.requests.append(unit)
            return await self.inner.model_request(unit)

        async def tool_call(self, unit: ToolCallUnit) -> ToolOutcome:
            return await self.inner.tool_call(unit)

    effects = Bare()
    await Agent(scripted_model(tool_call("probe", {"n": 1}), "ok"), tools=[probe]).run("go", effects=effects)
    assert len(effects.requests) == 2
    assert_deltas_rebuild(effects.requests)


async def test_the_default_effects_make_no_deltas() -> None:
    class Plain(InProcessEffects):
        def __init__(self) -> None:
            self.requests: list[ModelRequestUnit] = []

        async def model_request(self, unit: ModelRequestUnit) -> CanonicalMessage:
            self.requests.append(unit)
            return await super().model_request(unit)

    effects = Plain()
    await Agent(scripted_model(tool_call("probe", {"n": 1}), "ok"), tools=[probe]).run("go", effects=effects)
    assert [r.delta for r in effects.requests] == [None, None]


# ---------------------------------------------------------------- the clock and the ids


def _timestamps(messages: Sequence[CanonicalMessage]) -> list[datetime | None]:
    stamps: list[datetime | None] = []
    for message in messages:
        if message.kind == "response":
            stamps.append(message.timestamp)
        for part in message.parts:
            if isinstance(part, UserPromptPart | ToolReturnPart | RetryPromptPart):
                stamps.append(part.timestamp)
    return stamps


@pytest.mark.parametrize("stored", [True, False], ids=["stored", "in-memory"])
async def test_the_run_takes_its_time_and_ids_from_the_effects(tmp_path: Path, stored: bool) -> None:
    store = open_store(f"sqlite:///{tmp_path / 's.db'}") if stored else None
    try:
        blank = CanonicalMessage.response(TextPart(""))
        model = scripted_model(
            tool_call("probe", {"n": 1}),
            blank,
            [tool_call("probe", {"n": "not a number"}), tool_call("probe", {"n": 2})],
            "done",
        )
        agent = Agent(model, tools=[probe])
        effects = Fixed(store)
        session = Session.create(store=store) if store is not None else Session()
        result = await agent.run("go", session, effects=effects)
        stamps = _timestamps(result.all_messages)
        assert len(stamps) >= 8  # prompt, 4 responses, 2 returns, a retry prompt, the nudge
        assert set(stamps) == {FIXED}
        assert result.request_id == effects.ids[0][:8]
        records = list(result.state.tool_registry)
        assert records
        for record in records:
            assert record.registered_at == FIXED
            assert record.completed_at == FIXED
        if store is not None:
            reopened = Session.open(store, session.session_id)
            assert set(_timestamps(reopened.messages)) == {FIXED}
            for entry in reopened.ledger.values():
                assert entry.started_at == FIXED
                assert entry.ended_at in (None, FIXED)
    finally:
        if store is not None:
            store.close()


async def test_a_reused_tool_call_id_is_renamed_with_a_fresh_id_from_the_effects() -> None:
    session = Session()
    await Agent(scripted_model(tool_call("probe", {"n": 1}), "one"), tools=[probe]).run("go", session)
    effects = Fixed()
    # the scripted model of the second run reuses the id "scripted_1"
    result = await Agent(scripted_model(tool_call("probe", {"n": 2}), "two"), tools=[probe]).run(
        "again", session, effects=effects
    )
    calls = [p for m in result.new_messages for p in m.parts if isinstance(p, ToolCallPart)]
    [renamed] = calls
    assert renamed.tool_call_id != "scripted_1"
    assert renamed.tool_call_id.startswith("scripted_1_")
    suffix = renamed.tool_call_id.removeprefix("scripted_1_")
    assert suffix in {i[:8] for i in effects.ids[1:]}  # ids[0] is the request id


async def test_a_tool_call_written_as_text_gets_its_id_from_the_effects() -> None:
    text = '<tool_call>{"name": "probe", "arguments": {"n": 4}}</tool_call>'
    effects = Fixed()
    result = await Agent(scripted_model(text, "done"), tools=[probe]).run("go", effects=effects)
    calls = [p for m in result.all_messages for p in m.parts if isinstance(p, ToolCallPart)]
    assert calls, "the text tool call was not parsed"
    assert calls[0].tool_call_id == f"{FALLBACK_ID_PREFIX}{effects.ids[1]}"


class _RemoteAttempts(InProcessEffects):
    """Runs each tool itself once but reports three attempts, as an engine retrying out of process would."""

    async def tool_call(self, unit: ToolCallUnit) -> ToolOutcome:
        return ToolOutcome("returned", content="done elsewhere", attempts=3)


async def test_attempts_made_out_of_process_are_counted_in_the_registry() -> None:
    calls: list[str] = []

    def probe() -> str:
        """Probe."""
        calls.append("ran")
        return "here"

    agent = Agent(scripted_model(tool_call("probe", {}), "done"), tools=[probe])
    result = await agent.run("go", effects=_RemoteAttempts())
    [record] = list(result.state.tool_registry)
    assert calls == []
    assert record.attempts == 3
    returns = [p for m in result.all_messages for p in m.parts if isinstance(p, ToolReturnPart)]
    assert [p.content for p in returns] == ["done elsewhere"]


async def test_attempts_made_in_process_are_counted_once() -> None:
    agent = Agent(
        scripted_model(tool_call("probe", {}), "done"), tools=[Tool.from_function(lambda: "x", name="probe")]
    )
    result = await agent.run("go", effects=InProcessEffects())
    [record] = list(result.state.tool_registry)
    assert record.attempts == 1
