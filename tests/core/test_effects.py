"""harness.core.effects: the outcome wire format, the attempt loop, request deltas, the default effects."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core._sequences import common_prefix
from harness.core.effects import (
    NON_RETRYABLE,
    Effects,
    InProcessEffects,
    ModelRequestUnit,
    RequestDelta,
    ToolCallUnit,
    ToolOutcome,
    ToolOutcomeKind,
    build_outgoing,
    run_attempts,
)
from harness.core.messages import (
    CanonicalMessage,
    JsonValue,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from harness.core.model import ModelSettings, ToolDefinition
from harness.errors import (
    HarnessError,
    ToolArgumentsError,
    ToolRetry,
    UserAbort,
    WireFormatError,
)
from harness.models.function import FunctionInfo, FunctionModel

# ---------------------------------------------------------------- ToolOutcome JSON

_json_values: st.SearchStrategy[JsonValue] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def outcomes(draw: st.DrawFn) -> ToolOutcome:
    kind: ToolOutcomeKind = draw(st.sampled_from(["returned", "failed", "retry", "unknown"]))
    return ToolOutcome(
        kind,
        content=draw(_json_values) if kind == "returned" else None,
        error=draw(st.none() | st.text(max_size=30)),
        transient=draw(st.booleans()),
        attempts=draw(st.integers(min_value=1, max_value=50)),
        hint=draw(st.booleans()),
    )


@settings(max_examples=300, deadline=None)
@given(outcomes())
def test_an_outcome_survives_its_json_round_trip(outcome: ToolOutcome) -> None:
    data = outcome.to_json()
    text = json.dumps(data, allow_nan=False)  # journaled as JSON text
    assert ToolOutcome.from_json(json.loads(text)) == outcome
    assert data["kind"] == outcome.kind
    assert ("content" in data) == (outcome.kind == "returned")


def test_the_json_of_an_outcome_leaves_out_the_defaults() -> None:
    assert ToolOutcome("returned", content=[1, "a"]).to_json() == {
        "kind": "returned",
        "attempts": 1,
        "content": [1, "a"],
    }
    assert ToolOutcome("retry", error="fix it", hint=False, attempts=2).to_json() == {
        "kind": "retry",
        "attempts": 2,
        "error": "fix it",
        "hint": False,
    }
    assert ToolOutcome("failed", error="OSError: x", transient=True, attempts=3).to_json() == {
        "kind": "failed",
        "attempts": 3,
        "error": "OSError: x",
        "transient": True,
    }
    assert ToolOutcome.from_json({"kind": "unknown"}) == ToolOutcome("unknown")


@pytest.mark.parametrize(
    ("data", "field"),
    [
        pytest.param([], None, id="a-list"),
        pytest.param("returned", None, id="a-string"),
        pytest.param(None, None, id="null"),
        pytest.param({}, "kind", id="no-kind"),
        pytest.param({"kind": "done"}, "kind", id="unknown-kind"),
        pytest.param({"kind": 1}, "kind", id="kind-not-a-string"),
        pytest.param({"kind": "failed", "attempts": 0}, "attempts", id="attempts-zero"),
        pytest.param({"kind": "failed", "attempts": -2}, "attempts", id="attempts-negative"),
        pytest.param({"kind": "failed", "attempts": "2"}, "attempts", id="attempts-a-string"),
        pytest.param({"kind": "failed", "attempts": True}, "attempts", id="attempts-a-bool"),
        pytest.param({"kind": "failed", "attempts": 1.5}, "attempts", id="attempts-a-float"),
        pytest.param({"kind": "failed", "error": 3}, "error", id="error-a-number"),
        pytest.param({"kind": "failed", "error": ["x"]}, "error", id="error-a-list"),
        pytest.param({"kind": "failed", "transient": "false"}, "transient", id="transient-a-string"),
        pytest.param({"kind": "retry", "hint": "false"}, "hint", id="hint-a-string"),
        pytest.param({"kind": "retry", "hint": 0}, "hint", id="hint-a-number"),
    ],
)
def test_a_malformed_outcome_is_a_wire_format_error_naming_the_field(data: object, field: str | None) -> None:
    with pytest.raises(WireFormatError) as caught:
        ToolOutcome.from_json(data)
    message = str(caught.value)
    if field is None:
        assert "must be a JSON object" in message
        assert type(data).__name__ in message
    else:
        assert f"field '{field}'" in message


# ---------------------------------------------------------------- run_attempts


class Attempts:
    """A tool attempt that plays a list of results: an exception is raised, anything else returned."""

    def __init__(self, *results: object) -> None:
        self.results = list(results)
        self.calls = 0

    async def __call__(self) -> JsonValue:
        self.calls += 1
        result = self.results.pop(0) if len(self.results) > 1 else self.results[0]
        if isinstance(result, BaseException):
            raise result
        return cast(JsonValue, result)


def _unit(
    attempt: Attempts,
    *,
    idempotent: bool = True,
    max_attempts: int = 3,
    base_delay: float = 0.0,
) -> ToolCallUnit:
    return ToolCallUnit(
        call=ToolCallPart(tool_call_id="c1", tool_name="probe", args={"x": 1}),
        arguments={"x": 1},
        idempotent=idempotent,
        max_attempts=max_attempts,
        base_delay=base_delay,
        attempt=attempt,
        is_transient=lambda exc: isinstance(exc, ConnectionError),
    )


async def test_a_returned_value_is_the_outcome_content() -> None:
    attempt = Attempts({"rows": [1, 2]})
    assert await run_attempts(_unit(attempt)) == ToolOutcome("returned", content={"rows": [1, 2]})
    assert attempt.calls == 1


@pytest.mark.parametrize("hint", [True, False])
async def test_tool_retry_becomes_a_retry_outcome_keeping_its_hint(hint: bool) -> None:
    attempt = Attempts(ToolRetry("the path must be absolute", hint=hint))
    outcome = await run_attempts(_unit(attempt))
    assert outcome == ToolOutcome("retry", error="the path must be absolute", hint=hint, attempts=1)
    assert attempt.calls == 1  # a retry is the model's to make, never an automatic re-run


async def test_an_argument_error_of_the_tool_becomes_a_retry_outcome() -> None:
    error = ToolArgumentsError("probe", ["x: must be positive"])
    attempt = Attempts(error)
    outcome = await run_attempts(_unit(attempt))
    assert outcome.kind == "retry"
    assert outcome.error == str(error)
    assert "x: must be positive" in (outcome.error or "")
    assert outcome.hint is True
    assert attempt.calls == 1


async def test_a_deterministic_error_fails_at_once() -> None:
    attempt = Attempts(ValueError("bad row"), "never reached")
    outcome = await run_attempts(_unit(attempt, max_attempts=5))
    assert outcome == ToolOutcome("failed", error="ValueError: bad row", transient=False, attempts=1)
    assert attempt.calls == 1


async def test_a_transient_error_is_retried_up_to_max_attempts_then_fails() -> None:
    attempt = Attempts(ConnectionError("reset"))
    outcome = await run_attempts(_unit(attempt, max_attempts=4))
    assert outcome == ToolOutcome("failed", error="ConnectionError: reset", transient=True, attempts=4)
    assert attempt.calls == 4


async def test_a_transient_error_then_a_success_returns_with_the_attempts_made() -> None:
    attempt = Attempts(ConnectionError("1"), ConnectionError("2"), "ok")
    outcome = await run_attempts(_unit(attempt, max_attempts=3))
    assert outcome == ToolOutcome("returned", content="ok", attempts=3)
    assert attempt.calls == 3


async def test_retries_back_off_exponentially() -> None:
    attempt = Attempts(ConnectionError("down"))
    started = time.monotonic()
    await run_attempts(_unit(attempt, max_attempts=3, base_delay=0.02))
    elapsed = time.monotonic() - started
    assert attempt.calls == 3
    assert elapsed >= 0.02 + 0.04  # 0.02, then 0.04 (each up to 10 % more)


@pytest.mark.parametrize("error", [ConnectionError("reset"), ValueError("bad")])
async def test_a_non_idempotent_tool_is_never_retried(error: Exception) -> None:
    attempt = Attempts(error, "never reached")
    outcome = await run_attempts(_unit(attempt, idempotent=False, max_attempts=5))
    assert outcome.kind == "failed"
    assert outcome.attempts == 1
    assert outcome.transient is isinstance(error, ConnectionError)
    assert attempt.calls == 1


async def test_max_attempts_below_one_still_makes_one_attempt() -> None:
    attempt = Attempts(ConnectionError("x"))
    outcome = await run_attempts(_unit(attempt, max_attempts=0))
    assert outcome.attempts == 1
    assert attempt.calls == 1


@pytest.mark.parametrize(
    "error",
    [
        UserAbort("stop"),
        WireFormatError("a harness error that is a ValueError too"),
        HarnessError("plain harness error"),
        asyncio.CancelledError(),
        KeyboardInterrupt(),
    ],
    ids=type,
)
async def test_fatal_errors_propagate_unretried(error: BaseException) -> None:
    assert isinstance(error, NON_RETRYABLE)
    attempt = Attempts(error, "never reached")
    with pytest.raises(type(error)) as caught:
        await run_attempts(_unit(attempt, max_attempts=5))
    assert caught.value is error
    assert attempt.calls == 1


# ---------------------------------------------------------------- RequestDelta


def _request(text: str) -> CanonicalMessage:
    return CanonicalMessage.request(UserPromptPart(text))


def _response(text: str) -> CanonicalMessage:
    return CanonicalMessage.response(TextPart(text))


def _history(labels: Sequence[int]) -> list[CanonicalMessage]:
    return [_request(f"m{n}") if i % 2 == 0 else _response(f"m{n}") for i, n in enumerate(labels)]


def test_a_delta_view_keeps_the_prefix_and_adds_the_rest() -> None:
    previous = _history([1, 2, 3])
    added = tuple(_history([9, 8]))
    delta = RequestDelta(2, added)
    assert delta.view(previous) == [previous[0], previous[1], *added]
    assert delta.view(previous)[0] is previous[0]  # kept messages are the previous view's
    assert RequestDelta(0, added).view([]) == list(added)
    assert RequestDelta(3, ()).view(previous) == previous


def test_a_delta_refuses_a_previous_view_shorter_than_what_it_keeps() -> None:
    with pytest.raises(ValueError, match="keeps 3 messages of the previous view, which has 2"):
        RequestDelta(3, ()).view(_history([1, 2]))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 5), max_size=12),
    st.lists(st.integers(0, 5), max_size=12),
)
def test_a_delta_against_the_common_prefix_rebuilds_the_view(before: list[int], after: list[int]) -> None:
    pool = {n: (_request(f"r{n}"), _response(f"a{n}")) for n in range(6)}
    previous = [pool[n][i % 2] for i, n in enumerate(before)]
    current = [pool[n][i % 2] for i, n in enumerate(after)]
    keep = common_prefix(previous, current)
    delta = RequestDelta(keep, tuple(current[keep:]))
    assert delta.view(previous) == current
    assert keep == 0 or previous[keep - 1] == current[keep - 1]
    assert keep == min(len(previous), len(current)) or previous[keep] != current[keep]


def test_outgoing_puts_the_system_parts_first_and_the_scoped_parts_last() -> None:
    view = _history([1, 2, 3])
    system = (SystemPromptPart("be brief"), SystemPromptPart("dynamic: step 3"))
    scoped = (UserPromptPart("(request-scoped note)"),)
    out = RequestDelta(0, tuple(view), system, scoped).outgoing(view)
    assert len(out) == 3
    assert out[0].parts == (*system, *view[0].parts)
    assert out[1] is view[1]
    assert out[2].parts == (*view[2].parts, *scoped)
    assert view[0].parts == (UserPromptPart("m1"),)  # the view itself is unchanged
    assert out == build_outgoing(view, system, scoped)


def test_outgoing_adds_a_system_request_in_front_of_a_response_and_nothing_when_empty() -> None:
    view = [_response("a"), _request("b")]
    system = (SystemPromptPart("sys"),)
    out = RequestDelta(0, tuple(view), system).outgoing(view)
    assert out == [CanonicalMessage.request(*system), *view]
    assert RequestDelta(0, tuple(view)).outgoing(view) == view
    scoped = UserPromptPart("x")
    assert RequestDelta(0, (), system, (scoped,)).outgoing([]) == [CanonicalMessage.request(*system, scoped)]


# ---------------------------------------------------------------- InProcessEffects


def test_the_default_effects_are_effects_with_the_wall_clock_and_random_ids() -> None:
    effects = InProcessEffects()
    assert isinstance(effects, Effects)
    assert effects.deltas is False
    before = datetime.now(UTC)
    now = effects.now()
    assert now.tzinfo is not None
    assert now.utcoffset() == timedelta(0)
    assert before <= now <= datetime.now(UTC)
    ids = {effects.new_id() for _ in range(50)}
    assert len(ids) == 50
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)


async def test_the_default_effects_send_the_unit_to_its_model_and_run_the_attempt_loop() -> None:
    seen: list[tuple[list[CanonicalMessage], FunctionInfo]] = []

    def respond(messages: list[CanonicalMessage], info: FunctionInfo) -> str:
        seen.append((messages, info))
        return "pong"

    model = FunctionModel(respond, model_name="echo")
    messages = [_request("ping")]
    tools = [ToolDefinition("probe", "probes", {"type": "object", "properties": {}})]
    unit = ModelRequestUnit(
        index=1,
        purpose="request",
        source="agent",
        model=model,
        messages=messages,
        view=messages,
        tools=tools,
        settings=ModelSettings(temperature=0.25),
    )
    response = await InProcessEffects().model_request(unit)
    assert [p.content for p in response.parts if isinstance(p, TextPart)] == ["pong"]
    [(sent, info)] = seen
    assert sent == messages
    assert [t.name for t in info.tools] == ["probe"]
    assert info.settings.temperature == 0.25

    attempt = Attempts(ConnectionError("x"), {"done": True})
    outcome = await InProcessEffects().tool_call(_unit(attempt))
    assert outcome == ToolOutcome("returned", content={"done": True}, attempts=2)


def test_the_outgoing_list_starts_unedited_with_a_system_prompt_and_request_scoped_parts() -> None:
    # Building it is not a wrapper's edit: a request sent with a system prompt through any
    # wrap_model_request middleware (an installed harness-otel) kept its delta only then.
    view = [CanonicalMessage.request(UserPromptPart(content="hi"))]
    out = build_outgoing(view, [SystemPromptPart(content="Be brief.")], [UserPromptPart(content="note")])
    assert len(out[0].parts) == 3
    assert out.changed is False
    assert out.original is None
    out.append(CanonicalMessage.response(TextPart(content="edited")))
    assert out.changed is True
    assert out.before_changes() == out[:1]
