"""Configuring AnthropicContextManagement: the edits it builds, and clear errors naming the parameter."""

from __future__ import annotations

import importlib
from typing import Any

import harness_anthropic_context
import pytest
from harness_anthropic_context import (
    COMPACTION_BETA,
    COMPACTION_KIND,
    CONTEXT_MANAGEMENT_BETA,
    AnthropicContextManagement,
    applied_edits,
    build_edit,
    is_anthropic,
)

import harness
from harness import Agent, CanonicalMessage, TextPart
from harness.core import ModelSettings, UnknownPart
from harness.errors import StackConfigError
from harness.hooks import PluginManager
from harness.models.anthropic import AnthropicModel
from harness.models.function import FunctionModel
from harness.testing import assert_plugin_valid


def test_the_plugin_is_well_formed() -> None:
    assert_plugin_valid(AnthropicContextManagement)
    assert AnthropicContextManagement.name == "anthropic_context_management"
    assert "model_fallback" in AnthropicContextManagement.runs_after


def test_importing_warns_that_it_is_experimental() -> None:
    with pytest.warns(harness.HarnessExperimentalWarning, match="harness_anthropic_context"):
        importlib.reload(harness_anthropic_context)


def test_shorthands_become_the_api_objects() -> None:
    capability = AnthropicContextManagement(
        clear_tool_uses={
            "trigger": {"type": "tool_uses", "value": 8},
            "keep": 0,
            "clear_tool_inputs": ["bash"],
        },
        clear_thinking={"keep": "all"},
        compaction='{"trigger": 100000}',
    )
    assert capability.clear_tool_uses == {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "tool_uses", "value": 8},
        "keep": {"type": "tool_uses", "value": 0},
        "clear_tool_inputs": ["bash"],
    }
    assert capability.clear_thinking == {"type": "clear_thinking_20251015", "keep": "all"}
    assert capability.compaction == {
        "type": "compact_20260112",
        "trigger": {"type": "input_tokens", "value": 100_000},
    }
    assert build_edit("clear_thinking", {"keep": {"type": "all"}}) == {
        "type": "clear_thinking_20251015",
        "keep": {"type": "all"},
    }
    assert build_edit("clear_thinking", {"keep": 1}) == {
        "type": "clear_thinking_20251015",
        "keep": {"type": "thinking_turns", "value": 1},
    }
    assert build_edit("compaction", False) is None


def test_flat_keywords_set_fields_over_the_mapping() -> None:
    capability = AnthropicContextManagement(
        clear_tool_uses={"trigger": 50_000, "keep": 5}, clear_tool_uses_keep=2, clear_thinking_keep=3
    )
    assert capability.clear_tool_uses == {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "input_tokens", "value": 50_000},
        "keep": {"type": "tool_uses", "value": 2},
    }
    assert capability.clear_thinking == {
        "type": "clear_thinking_20251015",
        "keep": {"type": "thinking_turns", "value": 3},
    }
    assert capability.compaction is None


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({}, ValueError, "configure at least one of clear_tool_uses, clear_thinking or compaction"),
        (
            {"clear_tool_uses": {"keeep": 3}},
            ValueError,
            "clear_tool_uses: unknown field 'keeep'; did you mean 'keep'?",
        ),
        ({"clear_tool_uses": {"keep": -1}}, ValueError, "clear_tool_uses.keep must be at least 0, got -1"),
        (
            {"clear_tool_uses": {"trigger": 0}},
            ValueError,
            "clear_tool_uses.trigger must be at least 1, got 0",
        ),
        ({"clear_tool_uses": {"trigger": "big"}}, TypeError, "clear_tool_uses.trigger must be an integer"),
        (
            {"clear_tool_uses": {"trigger": {"type": "messages", "value": 3}}},
            ValueError,
            "clear_tool_uses.trigger.type must be 'input_tokens' or 'tool_uses', got 'messages'",
        ),
        (
            {"clear_tool_uses": {"exclude_tools": "bash"}},
            TypeError,
            "clear_tool_uses.exclude_tools must be a list",
        ),
        (
            {"clear_tool_uses": {"exclude_tools": [""]}},
            ValueError,
            "clear_tool_uses.exclude_tools[0] must be a tool",
        ),
        ({"clear_thinking": {"keep": 0}}, ValueError, "clear_thinking.keep must be at least 1, got 0"),
        ({"clear_thinking": {"keep": "some"}}, TypeError, "clear_thinking.keep must be an integer"),
        (
            {"compaction": {"instructions": "  "}},
            ValueError,
            "compaction.instructions must be a non-blank string",
        ),
        (
            {"compaction": {"pause_after_compaction": "yes"}},
            TypeError,
            "compaction.pause_after_compaction must be",
        ),
        ({"compaction": "[1]"}, ValueError, "compaction must be a JSON object"),
        ({"compaction": 3}, TypeError, "compaction must be a mapping of its fields"),
        (
            {"compaction": False, "compaction_trigger": 10},
            ValueError,
            "compaction is false but compaction_trigger",
        ),
        ({"compaction": True, "report": "no"}, TypeError, "report must be true or false"),
        ({"compaction": True, "calls": "some"}, ValueError, "calls must be 'requests' or 'all'"),
    ],
)
def test_bad_parameters_name_the_parameter_and_the_field(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as raised:
        AnthropicContextManagement(**kwargs)
    assert message in str(raised.value)


def test_a_bad_stack_string_names_the_entry_and_the_field() -> None:
    model = AnthropicModel("claude-sonnet-4-6", api_key="sk-ant-test")
    with pytest.raises(StackConfigError) as raised:
        Agent(model, capabilities="anthropic_context_management:clear_tool_uses_keep=-2")
    assert "anthropic_context_management" in str(raised.value)
    assert "clear_tool_uses.keep must be at least 0, got -2" in str(raised.value)
    with pytest.raises(StackConfigError) as typo:
        Agent(model, capabilities="anthropic_context_management:clear_tool_use_keep=2")
    assert "clear_tool_use_keep" in str(typo.value)


def test_settings_for_adds_the_parameter_and_keeps_everything_else() -> None:
    capability = AnthropicContextManagement(clear_tool_uses=True)
    settings = ModelSettings(max_tokens=100, extra={"top_k": 5})
    new = capability.settings_for(settings)
    assert new.max_tokens == 100
    assert new.extra == {
        "top_k": 5,
        "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
        "extra_headers": {"anthropic-beta": CONTEXT_MANAGEMENT_BETA},
    }
    assert settings.extra == {"top_k": 5}, "the settings given are not changed"
    again = capability.settings_for(new)
    assert again.extra == new.extra, "applying it twice sends the same parameters"


def test_only_anthropic_models_are_recognised() -> None:
    assert is_anthropic(AnthropicModel("claude-sonnet-4-6", api_key="k"))
    assert not is_anthropic(FunctionModel(lambda m, i: "x"))


def test_a_function_model_gets_untouched_settings() -> None:
    seen: list[ModelSettings] = []

    def answer(messages: list[CanonicalMessage], info: Any) -> CanonicalMessage:
        seen.append(info.settings)
        return CanonicalMessage.response(TextPart("ok"))

    manager = PluginManager()
    agent = Agent(
        FunctionModel(answer),
        capabilities=[AnthropicContextManagement(compaction=True)],
        plugin_manager=manager,
        settings=ModelSettings(extra={"seed": 1}),
    )
    assert agent.run_sync("hi").output == "ok"
    assert [s.extra for s in seen] == [{"seed": 1}]


def test_applied_edits_reads_only_well_formed_details() -> None:
    assert applied_edits(CanonicalMessage.response(TextPart("x"))) == []
    odd = CanonicalMessage.response(TextPart("x"), extra={"provider_details": {"context_management": "?"}})
    assert applied_edits(odd) == []


def test_a_history_holding_a_compaction_block_gets_the_compaction_beta_even_with_compaction_off() -> None:
    block = {"type": "compaction", "content": "earlier work", "part_kind": COMPACTION_KIND}
    history = [
        CanonicalMessage.user("go"),
        CanonicalMessage.response(UnknownPart(COMPACTION_KIND, data=block), TextPart("ok")),
        CanonicalMessage.user("more"),
    ]
    capability = AnthropicContextManagement(clear_tool_uses=True)
    without = capability.settings_for(ModelSettings())
    with_block = capability.settings_for(ModelSettings(), history)
    assert without.extra["extra_headers"] == {"anthropic-beta": CONTEXT_MANAGEMENT_BETA}
    assert with_block.extra["extra_headers"] == {
        "anthropic-beta": f"{CONTEXT_MANAGEMENT_BETA},{COMPACTION_BETA}"
    }
    assert with_block.extra["context_management"] == {"edits": [{"type": "clear_tool_uses_20250919"}]}
