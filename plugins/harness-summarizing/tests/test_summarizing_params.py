"""Parameters, defaults, validation messages, trigger, packaging of SummarizingCompaction."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from importlib.metadata import entry_points

import pytest
from harness_summarizing import (
    DEFAULT_INSTRUCTIONS,
    DEFAULT_SUMMARY_PROMPT,
    StructuralDigest,
    SummarizingCompaction,
)

from harness.capabilities import RequestContext
from harness.core import CanonicalMessage, TextPart
from harness.errors import CapabilityError
from harness.models.function import FunctionModel
from harness.tokens import TokenCounter


def _ctx(n: int, *, context_window: int | None = None) -> RequestContext:
    messages: list[CanonicalMessage] = []
    for i in range(n):
        messages.append(
            CanonicalMessage.user(f"question {i}")
            if i % 2 == 0
            else CanonicalMessage.response(TextPart("ok"))
        )
    return RequestContext(messages=messages, token_counter=TokenCounter(), context_window=context_window)


def test_defaults() -> None:
    cap = SummarizingCompaction()
    assert cap.name == "summarizing"
    assert cap.keep_messages == 20
    assert cap.keep_tokens is None
    assert cap.model is None
    assert cap.summarizer is None
    assert cap.summary_prompt == DEFAULT_SUMMARY_PROMPT
    assert cap.instructions == DEFAULT_INSTRUCTIONS
    assert cap.incremental is True
    assert cap.preserve_first_user_message is True
    assert cap.keep_user_messages is False
    assert cap.tool_return_max_chars == 500
    assert cap.timeout == 60.0
    assert cap.fallback == "digest"
    assert cap.min_summary_chars == 20
    assert isinstance(cap.digest, StructuralDigest)
    assert not cap.trigger.configured
    assert "SummarizingCompaction(" in repr(cap)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_messages": 0}, "max_messages must be positive."),
        ({"max_tokens": 0}, "max_tokens must be positive."),
        ({"max_tokens": 10, "max_fraction": 0.5}, "Set at most one of max_tokens or max_fraction."),
        ({"max_fraction": 1.5}, "max_fraction must be in (0, 1]."),
        ({"context_window": 0}, "context_window must be positive."),
        ({"keep_messages": -1}, "keep_messages must be non-negative."),
        ({"keep_tokens": -1}, "keep_tokens must be non-negative."),
        ({"min_summary_chars": -1}, "min_summary_chars must be non-negative."),
        ({"tool_return_max_chars": 0}, "tool_return_max_chars must be positive or None."),
        ({"timeout": 0}, "timeout must be positive or None."),
        ({"timeout": -1.0}, "timeout must be positive or None."),
        ({"fallback": "bogus"}, "fallback must be 'digest', 'sliding' or None"),
        (
            {"summary_prompt": "no placeholder here"},
            "summary_prompt must contain the {messages} placeholder.",
        ),
        ({"summary_prompt": "{{messages}}"}, "summary_prompt must contain the {messages} placeholder."),
        ({"summary_prompt": 3}, "summary_prompt must be a string"),
        ({"instructions": None}, "instructions must be a string."),
        ({"summarizer": 42}, "summarizer must be callable, got int"),
        ({"model": "openai:gpt-4o"}, "model must be a harness Model"),
    ],
)
def test_validation_messages(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as info:
        SummarizingCompaction(**kwargs)  # pyright: ignore[reportArgumentType]
    assert message in str(info.value)


def test_model_and_summarizer_are_exclusive() -> None:
    model = FunctionModel(lambda messages, info: "x")
    with pytest.raises(ValueError, match=r"Set at most one of model or summarizer\."):
        SummarizingCompaction(model=model, summarizer=StructuralDigest())


def test_digest_limits_validated() -> None:
    with pytest.raises(ValueError, match=r"StructuralDigest.max_files must be a positive integer"):
        StructuralDigest(max_files=0)


def test_accepted_optional_values() -> None:
    cap = SummarizingCompaction(
        tool_return_max_chars=None, timeout=None, fallback=None, keep_messages=0, summary_prompt="{messages}"
    )
    assert cap.tool_return_max_chars is None
    assert cap.timeout is None
    assert cap.fallback is None
    sliding = SummarizingCompaction(fallback="sliding")
    assert sliding.fallback == "sliding"


def test_no_trigger_never_fires_by_itself() -> None:
    assert SummarizingCompaction().should_compact(_ctx(100)) is None


def test_message_trigger() -> None:
    cap = SummarizingCompaction(max_messages=5)
    assert cap.should_compact(_ctx(5)) is None
    reason = cap.should_compact(_ctx(7))
    assert reason is not None
    assert "max_messages 5" in reason


def test_token_trigger() -> None:
    cap = SummarizingCompaction(max_tokens=10)
    assert cap.should_compact(_ctx(1)) is None
    assert cap.should_compact(_ctx(40)) is not None


def test_fraction_trigger_uses_context_window() -> None:
    cap = SummarizingCompaction(max_fraction=0.5, context_window=20)
    assert cap.should_compact(_ctx(40)) is not None
    uses_model_window = SummarizingCompaction(max_fraction=0.5)
    assert uses_model_window.should_compact(_ctx(1, context_window=1000)) is None
    with pytest.raises(CapabilityError, match="context_window"):
        uses_model_window.should_compact(_ctx(3))


async def test_hook_runs_compact_when_trigger_fires() -> None:
    cap = SummarizingCompaction(max_messages=10, keep_messages=3)
    ctx = _ctx(21)
    await cap.before_model_request(ctx)
    assert len(ctx.messages) == 3
    assert ctx.events[0].reason.startswith("21 messages")
    idle = _ctx(9)
    await cap.before_model_request(idle)
    assert len(idle.messages) == 9
    assert idle.events == []


def test_entry_point_registered() -> None:
    found = {ep.name: ep.value for ep in entry_points(group="harness")}
    assert found.get("summarizing") == "harness_summarizing:SummarizingCompaction"


def test_import_emits_experimental_warning() -> None:
    code = (
        "import warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import harness_summarizing\n"
        "names = [type(w.message).__name__ for w in caught]\n"
        "texts = [str(w.message) for w in caught]\n"
        "assert 'HarnessExperimentalWarning' in names, names\n"
        "assert any('harness_summarizing is experimental' in t for t in texts), texts\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_summarizer_digest_string_never_calls_the_agents_model() -> None:
    calls: list[int] = []

    def agent_model(messages: object, info: object) -> str:
        calls.append(1)
        return "a model summary that is long enough to count"

    cap = SummarizingCompaction(keep_messages=2, summarizer="digest")
    assert cap.summarizer is cap.digest
    ctx = _ctx(10)
    ctx.model = FunctionModel(agent_model)
    before = len(ctx.messages)
    asyncio.run(cap.compact(ctx))
    assert calls == []
    assert len(ctx.messages) < before
    assert [event.details["summarizer"] for event in ctx.events] == ["digest"]


def test_summarizer_model_string_is_the_default_behaviour() -> None:
    assert SummarizingCompaction(summarizer="model").summarizer is None
    model = FunctionModel(lambda messages, info: "x")
    assert SummarizingCompaction(summarizer="model", model=model).model is model


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"summarizer": "llm"}, "summarizer must be 'digest', 'model' or a callable, got 'llm'."),
        ({"summarizer": "digest", "model": FunctionModel(lambda m, i: "x")}, "Set at most one of model"),
    ],
)
def test_summarizer_string_validation(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as info:
        SummarizingCompaction(**kwargs)  # pyright: ignore[reportArgumentType]
    assert message in str(info.value)
