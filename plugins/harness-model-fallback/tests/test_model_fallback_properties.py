"""Hypothesis properties of ModelFallback and of the strip rules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from harness_model_fallback import KINDS, PROVIDER_SETTINGS, FallbackKind, ModelFallback, strip_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import Agent, CanonicalMessage, Session, TextPart
from harness.core import ModelSettings, harness_mark
from harness.errors import (
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelContextLengthError,
    ModelError,
    ModelRateLimitError,
    ModelTimeoutError,
    ModelUnavailableError,
)
from harness.history import check_invariants
from harness.models.function import FunctionInfo, FunctionModel

ERRORS: dict[str, Callable[[str], ModelError]] = {
    "rate_limit": lambda name: ModelRateLimitError("fake", "slow down", status_code=429, model_name=name),
    "unavailable": lambda name: ModelUnavailableError("fake", "overloaded", status_code=529, model_name=name),
    "timeout": lambda name: ModelTimeoutError("fake", "timed out", model_name=name),
    "context_length": lambda name: ModelContextLengthError(
        "fake", "too long", status_code=400, model_name=name
    ),
    "bad_request": lambda name: ModelBadRequestError("fake", "bad field", status_code=400, model_name=name),
    "auth": lambda name: ModelAuthenticationError("fake", "bad key", status_code=401, model_name=name),
}
OUTCOMES = ["ok", *ERRORS]


def model(name: str, outcome: str, called: list[str]) -> FunctionModel:
    def respond(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        called.append(name)
        if outcome == "ok":
            return CanonicalMessage.response(TextPart(f"answer from {name}"))
        raise ERRORS[outcome](name)

    return FunctionModel(respond, model_name=name)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    outcomes=st.lists(st.sampled_from(OUTCOMES), min_size=2, max_size=6),
    on=st.sets(st.sampled_from(KINDS), min_size=1),
)
async def test_the_first_model_not_failing_with_a_configured_kind_decides(
    outcomes: list[str], on: set[FallbackKind]
) -> None:
    """Models are tried in order while they fail with a configured kind; the first that does not
    decides the call: it answers, or its error propagates. Nothing after it is ever called."""
    called: list[str] = []
    names = [f"m{i}" for i in range(len(outcomes))]
    models = [model(name, outcome, called) for name, outcome in zip(names, outcomes, strict=True)]
    agent = Agent(models[0], capabilities=[ModelFallback(models=models[1:], on=on)])
    decisive = next((i for i, outcome in enumerate(outcomes) if outcome not in on), None)
    session = Session()
    if decisive is not None and outcomes[decisive] == "ok":
        result = await agent.run("hi", session=session)
        assert called == names[: decisive + 1]
        assert result.output == f"answer from {names[decisive]}"
        mark = harness_mark(session.messages[-1])
        assert mark is not None
        assert mark["answered_by"] == names[decisive]
        assert [(e["model"], e["kind"]) for e in mark["fallback_from"]] == list(
            zip(names[:decisive], outcomes[:decisive], strict=True)
        )
    else:
        last = len(outcomes) - 1 if decisive is None else decisive
        with pytest.raises(ModelError) as caught:
            await agent.run("hi", session=session)
        assert called == names[: last + 1]
        assert type(caught.value) is type(ERRORS[outcomes[last]]("x"))
        assert caught.value.model_name == names[last]
        notes = getattr(caught.value, "__notes__", [])
        if last == 0:
            assert notes == []
        else:
            (note,) = notes
            assert f"tried {last + 1} models" in note
            for name in names[: last + 1]:
                assert f"{name!r} (" in note
    assert check_invariants(session.messages) == []


FAMILIES = st.sampled_from(["openai", "anthropic", "other", None])
LISTED = sorted({key for keys in PROVIDER_SETTINGS.values() for key in keys})
KEYS = st.sampled_from([*LISTED, "top_p", "x_custom", "extra_headers"])


@settings(max_examples=300, deadline=None)
@given(extra=st.dictionaries(KEYS, st.integers(), max_size=8), origin=FAMILIES, target=FAMILIES)
def test_strip_only_ever_removes_keys_written_for_another_family(
    extra: dict[str, Any], origin: str | None, target: str | None
) -> None:
    original = ModelSettings(max_tokens=10, temperature=0.5, timeout=3.0, extra=extra)
    stripped = strip_settings(original, origin, target)
    assert (stripped.max_tokens, stripped.temperature, stripped.timeout) == (10, 0.5, 3.0)
    assert set(stripped.extra) <= set(extra)
    assert all(stripped.extra[key] == extra[key] for key in stripped.extra)
    for key in extra:
        if key not in LISTED:
            assert key in stripped.extra, "keys no rule lists are always kept"
    if origin is not None and origin == target:
        assert stripped is original
    elif origin is not None and origin in PROVIDER_SETTINGS:
        assert not set(stripped.extra) & PROVIDER_SETTINGS[origin]
    else:  # settings of unknown origin: whatever another family owns, the target does not, goes
        own = PROVIDER_SETTINGS.get(target or "", frozenset())
        assert all(key in own or key not in LISTED for key in stripped.extra)
    if set(stripped.extra) == set(extra):
        assert stripped is original
    assert strip_settings(stripped, origin, target) == stripped  # idempotent
