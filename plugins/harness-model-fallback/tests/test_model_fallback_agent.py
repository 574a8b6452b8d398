"""ModelFallback in real runs: agents whose FunctionModels raise the providers' typed errors."""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Sequence
from typing import Any

import pytest
from harness_model_fallback import NOTES_KEY, FallbackRecord, ModelFallback
from harness_summarizing import SummarizingCompaction, find_summary_parts

from harness import Agent, CanonicalMessage, Session, TextPart
from harness.capabilities import RequestContext
from harness.capabilities.calls import ModelCall
from harness.core import ModelSettings, UserPromptPart, harness_mark
from harness.core.streaming import TextDelta
from harness.errors import (
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelContextLengthError,
    ModelError,
    ModelRateLimitError,
    ModelResolutionError,
    ModelTimeoutError,
    ModelUnavailableError,
)
from harness.history import check_invariants
from harness.hooks import hookimpl
from harness.models.function import FunctionInfo, FunctionModel
from harness.run.events import RequestStarted

calls: list[str] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    calls.clear()


def failing(name: str, error: ModelError | Exception) -> FunctionModel:
    """A model that records each call and raises ``error``."""

    def respond(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        calls.append(name)
        raise error

    return FunctionModel(respond, model_name=name)


def answering(name: str, text: str | None = None, seen: list[ModelSettings] | None = None) -> FunctionModel:
    """A model that records each call (and its settings) and answers ``text``."""

    def respond(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        calls.append(name)
        if seen is not None:
            seen.append(info.settings)
        return CanonicalMessage.response(TextPart(text or f"answer from {name}"))

    return FunctionModel(respond, model_name=name)


def rate_limited(name: str) -> FunctionModel:
    return failing(name, ModelRateLimitError("fake", "slow down", status_code=429, model_name=name))


class StateSpy:
    """An outermost wrapper that keeps what the fallback recorded, whatever the call came to."""

    name = "state_spy"
    runs_before = ("model_fallback",)

    def __init__(self) -> None:
        self.records: list[FallbackRecord] = []
        self.requests: list[ModelCall] = []

    @hookimpl(wrapper=True)
    def wrap_model_request(
        self, ctx: RequestContext, request: ModelCall
    ) -> Generator[None, CanonicalMessage, CanonicalMessage]:
        try:
            return (yield)
        finally:
            self.records = list(ModelFallback.records(ctx))
            self.requests.append(request)


async def test_a_rate_limited_call_is_answered_by_the_next_model() -> None:
    spy = StateSpy()
    fallback = ModelFallback(models=[answering("backup")])
    session = Session()
    result = await Agent(rate_limited("primary"), capabilities=[spy, fallback]).run("hi", session=session)
    assert result.output == "answer from backup"
    assert calls == ["primary", "backup"]

    response = session.messages[-1]
    assert response.model_name == "backup"
    mark = harness_mark(response)
    assert mark is not None
    assert mark["answered_by"] == "backup"
    assert mark["fallback_from"] == [{"model": "primary", "kind": "rate_limit", "status": 429}]

    (request,) = spy.requests
    assert request.answered_by == "backup"
    assert request.attempts == 2
    assert request.notes[NOTES_KEY] == {"answered_by": "backup", "failed": ["primary"]}
    (record,) = spy.records
    assert (record.purpose, record.source, record.answered_by) == ("request", "agent", "backup")
    assert [(a.model_name, a.kind, a.error_type) for a in record.failed] == [
        ("primary", "rate_limit", "ModelRateLimitError")
    ]
    assert check_invariants(session.messages) == []


async def test_the_primary_answering_is_recorded_too() -> None:
    session = Session()
    await Agent(answering("primary"), capabilities=[ModelFallback(models=[answering("backup")])]).run(
        "hi", session=session
    )
    assert calls == ["primary"]
    mark = harness_mark(session.messages[-1])
    assert mark is not None
    assert dict(mark) == {"answered_by": "primary", "fallback_from": []}


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (ModelRateLimitError("fake", "429", status_code=429), "rate_limit"),
        (ModelUnavailableError("fake", "overloaded", status_code=529), "unavailable"),
        (ModelTimeoutError("fake", "timed out"), "timeout"),
        (ModelContextLengthError("fake", "prompt is too long", status_code=400), "context_length"),
    ],
)
async def test_each_kind_falls_back(error: ModelError, kind: str) -> None:
    session = Session()
    agent = Agent(failing("primary", error), capabilities=[ModelFallback(models=[answering("backup")])])
    result = await agent.run("hi", session=session)
    assert result.output == "answer from backup"
    mark = harness_mark(session.messages[-1])
    assert mark is not None
    assert mark["fallback_from"][0]["kind"] == kind


async def test_the_chain_goes_on_until_a_model_answers() -> None:
    fallback = ModelFallback(
        models=[
            failing("second", ModelUnavailableError("fake", "overloaded", status_code=529)),
            failing("third", ModelTimeoutError("fake", "timed out")),
            answering("fourth"),
            answering("fifth"),
        ]
    )
    session = Session()
    result = await Agent(rate_limited("first"), capabilities=[fallback]).run("hi", session=session)
    assert result.output == "answer from fourth"
    assert calls == ["first", "second", "third", "fourth"]
    mark = harness_mark(session.messages[-1])
    assert mark is not None
    assert [entry["model"] for entry in mark["fallback_from"]] == ["first", "second", "third"]
    assert [entry["kind"] for entry in mark["fallback_from"]] == ["rate_limit", "unavailable", "timeout"]


@pytest.mark.parametrize(
    "error",
    [
        ModelAuthenticationError("fake", "invalid x-api-key", status_code=401),
        ModelBadRequestError("fake", "messages: unexpected role", status_code=400),
        RuntimeError("not a model error"),
    ],
    ids=["auth", "bad-request", "other"],
)
async def test_other_errors_propagate_at_once(error: Exception) -> None:
    session = Session()
    agent = Agent(failing("primary", error), capabilities=[ModelFallback(models=[answering("backup")])])
    with pytest.raises(type(error)) as caught:
        await agent.run("hi", session=session)
    assert caught.value is error
    assert calls == ["primary"]
    assert not getattr(caught.value, "__notes__", [])  # nothing was tried besides the primary
    assert check_invariants(session.messages) == []


async def test_a_kind_not_configured_propagates() -> None:
    timeout = ModelTimeoutError("fake", "timed out")
    agent = Agent(
        failing("primary", timeout),
        capabilities=[ModelFallback(models=[answering("backup")], on=["rate_limit"])],
    )
    with pytest.raises(ModelTimeoutError):
        await agent.run("hi")
    assert calls == ["primary"]


async def test_an_unconfigured_error_after_a_fallback_propagates_with_the_note() -> None:
    auth = ModelAuthenticationError("fake", "bad key", status_code=401, model_name="second")
    fallback = ModelFallback(models=[failing("second", auth), answering("third")])
    with pytest.raises(ModelAuthenticationError) as caught:
        await Agent(rate_limited("first"), capabilities=[fallback]).run("hi")
    assert caught.value is auth
    assert calls == ["first", "second"]
    (note,) = caught.value.__notes__
    assert "the last error is not one it falls back on" in note
    assert "'first' (rate_limit:" in note
    assert "'second' (ModelAuthenticationError:" in note


async def test_when_every_model_fails_the_last_error_propagates_with_every_reason() -> None:
    last = ModelTimeoutError("fake", "third timed out", model_name="third")
    spy = StateSpy()
    fallback = ModelFallback(
        models=[
            failing("second", ModelUnavailableError("fake", "down", status_code=503)),
            failing("third", last),
        ]
    )
    session = Session()
    with pytest.raises(ModelTimeoutError) as caught:
        await Agent(rate_limited("first"), capabilities=[spy, fallback]).run("hi", session=session)
    assert caught.value is last
    assert calls == ["first", "second", "third"]
    (note,) = caught.value.__notes__
    assert note.startswith("harness-model-fallback tried 3 models (every model failed):")
    lines = note.splitlines()[1:]
    assert lines[0] == "  1. 'first' (rate_limit: fake model 'first' (HTTP 429): slow down)"
    assert lines[1] == "  2. 'second' (unavailable: fake (HTTP 503): down)"
    assert lines[2] == "  3. 'third' (timeout: fake model 'third': third timed out)"
    (record,) = spy.records
    assert record.answered_by is None
    assert [a.model_name for a in record.failed] == ["first", "second", "third"]
    assert check_invariants(session.messages) == []
    assert [m.kind for m in session.messages] == ["request"]


async def test_a_model_listed_twice_or_the_primary_listed_again_is_tried_once() -> None:
    primary = rate_limited("primary")
    backup = rate_limited("backup")
    with pytest.raises(ModelRateLimitError) as caught:
        await Agent(primary, capabilities=[ModelFallback(models=[primary, backup, backup])]).run("hi")
    assert calls == ["primary", "backup"]
    assert "tried 2 models" in caught.value.__notes__[0]


async def test_every_request_of_a_run_falls_back_on_its_own() -> None:
    answers = iter(["one", "two"])
    flaky_calls: list[int] = []

    def flaky(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        flaky_calls.append(1)
        if len(flaky_calls) == 1:
            raise ModelRateLimitError("fake", "slow down", status_code=429)
        return CanonicalMessage.response(TextPart(next(answers)))

    session = Session()
    agent = Agent(
        FunctionModel(flaky, model_name="flaky"), capabilities=[ModelFallback(models=[answering("backup")])]
    )
    await agent.run("first", session=session)
    await agent.run("second", session=session)
    marks = [harness_mark(m) for m in session.messages if m.kind == "response"]
    assert [m["answered_by"] if m else None for m in marks] == ["backup", "flaky"]
    assert calls == ["backup"]


async def test_model_strings_are_resolved_at_construction() -> None:
    fallback = ModelFallback(models=["test:spare"])
    assert [m.model_name for m in fallback.models] == ["spare"]
    result = await Agent(rate_limited("primary"), capabilities=[fallback]).run("hi")
    assert result.output is not None
    with pytest.raises(ModelResolutionError, match="nope:model"):
        ModelFallback(models=["nope:model"])


async def test_a_stack_string_builds_the_fallback() -> None:
    agent = Agent(rate_limited("primary"), capabilities=["model_fallback:models=test:a|test:b,on=rate_limit"])
    (fallback,) = [c for c in agent.plugin_manager.capabilities if isinstance(c, ModelFallback)]
    assert [m.model_name for m in fallback.models] == ["a", "b"]
    assert fallback.on == ("rate_limit",)
    session = Session()
    await agent.run("hi", session=session)
    mark = harness_mark(session.messages[-1])
    assert mark is not None
    assert mark["answered_by"] == "a"


# -- capability calls ---------------------------------------------------------------------


def long_history() -> list[CanonicalMessage]:
    messages: list[CanonicalMessage] = []
    for i in range(6):
        messages.append(CanonicalMessage.user(f"question {i} " + "words " * 30))
        messages.append(CanonicalMessage.response(TextPart(f"answer {i} " + "more " * 30)))
    return messages


def summary_text(messages: Sequence[CanonicalMessage]) -> str:
    ((message, part),) = find_summary_parts(messages)
    summary = messages[message].parts[part]
    assert isinstance(summary, UserPromptPart)
    return summary.text


async def test_a_capability_call_falls_back_too() -> None:
    spy = StateSpy()
    summarizer = SummarizingCompaction(max_messages=4, keep_messages=2, model=rate_limited("summarizer"))
    backup = answering("backup", text="A summary written by the backup model, long enough to keep.")
    session = Session(messages=long_history())
    agent = Agent(answering("agent"), capabilities=[summarizer, spy, ModelFallback(models=[backup])])
    await agent.run("next", session=session)
    assert calls == ["summarizer", "backup", "agent"]
    assert "A summary written by the backup model" in summary_text(session.messages)
    capability = next(r for r in spy.records if r.purpose == "capability")
    assert (capability.source, capability.answered_by) == ("summarizing", "backup")
    assert [a.model_name for a in capability.failed] == ["summarizer"]
    assert check_invariants(session.messages) == []


async def test_requests_only_leaves_capability_calls_alone() -> None:
    summarizer = SummarizingCompaction(max_messages=4, keep_messages=2, model=rate_limited("summarizer"))
    backup = answering("backup", text="A summary written by the backup model, long enough to keep.")
    session = Session(messages=long_history())
    agent = Agent(
        rate_limited("agent"), capabilities=[summarizer, ModelFallback(models=[backup], requests_only=True)]
    )
    result = await agent.run("next", session=session)
    # The summarizer's failure reached it (it fell back to its digest); the agent's request fell back.
    assert calls == ["summarizer", "agent", "backup"]
    assert "Structural digest of" in summary_text(session.messages)
    assert result.output == "A summary written by the backup model, long enough to keep."


# -- settings -------------------------------------------------------------------------------


def family_by_prefix(model: Any) -> str | None:
    """Families for FunctionModels: the part of the name before the first '-'."""
    name: str = model.model_name
    return name.split("-")[0] if "-" in name else None


async def test_settings_for_another_family_lose_the_keys_written_for_the_original() -> None:
    seen_anthropic: list[ModelSettings] = []
    seen_openai: list[ModelSettings] = []
    settings = ModelSettings(
        max_tokens=300,
        temperature=0.4,
        extra={"reasoning_effort": "low", "parallel_tool_calls": False, "top_p": 0.9, "x_custom": 1},
    )
    fallback = ModelFallback(
        models=[
            failing("anthropic-busy", ModelUnavailableError("fake", "overloaded", status_code=529)),
            answering("openai-spare", seen=seen_openai),
        ],
        family_of=family_by_prefix,
    )
    # First: the anthropic backup fails (it got the stripped settings), then an openai model answers
    # with the settings untouched (same family as the original).
    await Agent(rate_limited("openai-main"), capabilities=[fallback], settings=settings).run("hi")
    assert calls == ["openai-main", "anthropic-busy", "openai-spare"]
    assert seen_openai == [settings]

    strip_only = ModelFallback(
        models=[answering("anthropic-spare", seen=seen_anthropic)], family_of=family_by_prefix
    )
    await Agent(rate_limited("openai-main"), capabilities=[strip_only], settings=settings).run("hi")
    (sent,) = seen_anthropic
    assert sent.max_tokens == 300
    assert sent.temperature == 0.4
    assert dict(sent.extra) == {"top_p": 0.9, "x_custom": 1}


async def test_the_strip_rules_are_a_parameter() -> None:
    seen: list[ModelSettings] = []
    settings = ModelSettings(extra={"reasoning_effort": "low", "x_custom": 1})
    fallback = ModelFallback(
        models=[answering("anthropic-spare", seen=seen)],
        family_of=family_by_prefix,
        strip={"openai": ["x_custom"]},
    )
    await Agent(rate_limited("openai-main"), capabilities=[fallback], settings=settings).run("hi")
    assert dict(seen[0].extra) == {"reasoning_effort": "low"}

    seen.clear()
    keep_all = ModelFallback(
        models=[answering("anthropic-spare", seen=seen)], family_of=family_by_prefix, strip={}
    )
    await Agent(rate_limited("openai-main"), capabilities=[keep_all], settings=settings).run("hi")
    assert seen == [settings]


async def test_adapt_settings_replaces_the_rules() -> None:
    seen: list[ModelSettings] = []
    adapted: list[tuple[str, str]] = []

    def adapt(settings: ModelSettings, original: Any, model: Any) -> ModelSettings:
        adapted.append((original.model_name, model.model_name))
        return ModelSettings(max_tokens=7)

    fallback = ModelFallback(models=[answering("spare", seen=seen)], adapt_settings=adapt)
    await Agent(rate_limited("main"), capabilities=[fallback], settings=ModelSettings(max_tokens=1000)).run(
        "hi"
    )
    assert adapted == [("main", "spare")]
    assert seen == [ModelSettings(max_tokens=7)]


# -- streaming --------------------------------------------------------------------------------


async def test_a_streamed_run_falls_back_and_streams_the_answer() -> None:
    async def stream_backup(messages: list[CanonicalMessage], info: FunctionInfo) -> AsyncIterator[str]:
        calls.append("backup")
        for chunk in ("from ", "the ", "backup"):
            yield chunk

    backup = FunctionModel(stream_function=stream_backup, model_name="backup")
    agent = Agent(rate_limited("primary"), capabilities=[ModelFallback(models=[backup])])
    started: list[str] = []
    text: list[str] = []
    async with agent.run_stream("hi") as stream:
        async for event in stream:
            if isinstance(event, RequestStarted):
                started.append(event.model_name)
            elif isinstance(event, TextDelta):
                text.append(event.text)
    assert started == ["primary", "backup"]
    assert "".join(text) == "from the backup"
    assert stream.result.output == "from the backup"
    mark = harness_mark(stream.result.all_messages[-1])
    assert mark is not None
    assert mark["answered_by"] == "backup"


def _names(models: Sequence[Any]) -> list[str]:
    return [m.model_name for m in models]


def test_chain_order() -> None:
    a, b, c = answering("a"), answering("b"), answering("c")
    fallback = ModelFallback(models=[b, a, c, b])
    assert _names(fallback.chain(a)) == ["a", "b", "c"]
    assert _names(fallback.chain(c)) == ["c", "b", "a"]
