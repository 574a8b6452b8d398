"""Construction and validation messages of LimitWarner."""

from __future__ import annotations

import re
from typing import Any

import pytest
from harness_limit_warner import KINDS, LimitWarner

from harness.capabilities import Capability


def test_defaults() -> None:
    warner = LimitWarner(max_iterations=20)
    assert warner.max_iterations == 20
    assert warner.max_context_tokens is None
    assert warner.max_context_fraction is None
    assert warner.context_window is None
    assert warner.max_total_tokens is None
    assert warner.warn_on is None
    assert warner.warning_threshold == 0.7
    assert warner.critical_remaining_iterations == 3
    assert warner.role == "user"
    assert warner.name == "limit_warner"
    assert isinstance(warner, Capability)
    assert "sliding_window" in warner.runs_after
    assert KINDS == ("iterations", "context_window", "total_tokens")


def test_keyword_only_frozen_and_identity_equality() -> None:
    with pytest.raises(TypeError):
        LimitWarner(20)  # pyright: ignore[reportCallIssue]
    warner = LimitWarner(max_iterations=20)
    with pytest.raises(AttributeError):
        warner.max_iterations = 3  # pyright: ignore[reportAttributeAccessIssue]
    assert warner != LimitWarner(max_iterations=20)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {},
            "At least one of max_iterations, max_context_tokens, max_context_fraction, or max_total_tokens "
            "must be set (or warn_on=['iterations'] to use the agent's max_iterations).",
        ),
        ({"max_iterations": 0}, "max_iterations must be positive."),
        ({"max_iterations": -1}, "max_iterations must be positive."),
        ({"max_context_tokens": 0}, "max_context_tokens must be positive."),
        ({"max_total_tokens": 0}, "max_total_tokens must be positive."),
        ({"max_context_fraction": 0.0}, "max_context_fraction must be in (0, 1]."),
        ({"max_context_fraction": 1.01}, "max_context_fraction must be in (0, 1]."),
        (
            {"max_context_tokens": 100, "max_context_fraction": 0.5},
            "Set at most one of max_context_tokens or max_context_fraction.",
        ),
        ({"max_context_fraction": 0.5, "context_window": 0}, "context_window must be positive."),
        ({"max_iterations": 5, "warn_on": []}, "warn_on must not be empty."),
        (
            {"max_iterations": 5, "warn_on": ["iterations", "tokens"]},
            "warn_on: unknown limit kind 'tokens'; expected one of 'iterations', 'context_window', "
            "'total_tokens'.",
        ),
        (
            {"max_iterations": 5, "warn_on": ["context_window"]},
            "'context_window' requires its corresponding max_* limit to be configured.",
        ),
        (
            {"max_iterations": 5, "warn_on": ["total_tokens"]},
            "'total_tokens' requires its corresponding max_* limit to be configured.",
        ),
        ({"max_iterations": 5, "warning_threshold": 0}, "warning_threshold must be in (0, 1]."),
        ({"max_iterations": 5, "warning_threshold": 1.5}, "warning_threshold must be in (0, 1]."),
        (
            {"max_iterations": 5, "critical_remaining_iterations": -1},
            "critical_remaining_iterations must be non-negative.",
        ),
        ({"max_iterations": 5, "role": "assistant"}, "role must be 'user' or 'system', got 'assistant'."),
    ],
)
def test_validation_messages(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        LimitWarner(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"max_iterations": 2.5}, "max_iterations"),
        ({"max_iterations": True}, "max_iterations"),
        ({"max_context_tokens": "100"}, "max_context_tokens"),
        ({"max_total_tokens": 1e6}, "max_total_tokens"),
        ({"max_iterations": 5, "critical_remaining_iterations": 1.0}, "critical_remaining_iterations"),
    ],
)
def test_wrong_types_name_the_parameter(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(TypeError, match=f"^{name} must be an int"):
        LimitWarner(**kwargs)


def test_warn_on_as_a_bare_string_is_refused() -> None:
    with pytest.raises(TypeError, match=r"warn_on must be a sequence of limit kinds, not a string"):
        LimitWarner(max_iterations=5, warn_on="iterations")  # pyright: ignore[reportArgumentType]


def test_warn_on_is_normalised_to_the_fixed_order_without_duplicates() -> None:
    warner = LimitWarner(
        max_iterations=5,
        max_total_tokens=10,
        max_context_tokens=10,
        warn_on=["total_tokens", "iterations", "total_tokens", "context_window"],
    )
    assert warner.warn_on == ("iterations", "context_window", "total_tokens")


def test_iterations_alone_may_rely_on_the_agents_limit() -> None:
    warner = LimitWarner(warn_on=["iterations"])
    assert warner.max_iterations is None
    assert warner.warn_on == ("iterations",)


def test_valid_edge_values() -> None:
    assert LimitWarner(max_context_fraction=1.0).max_context_fraction == 1.0
    assert LimitWarner(max_iterations=1, warning_threshold=1.0).warning_threshold == 1.0
    assert LimitWarner(max_iterations=1, critical_remaining_iterations=0).critical_remaining_iterations == 0
    assert LimitWarner(max_total_tokens=1, role="system").role == "system"
