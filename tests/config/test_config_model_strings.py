"""Model strings as capability parameters: ``summarizing:model=openai:gpt-4o`` builds with a model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from harness_summarizing import SummarizingCompaction

from harness import Agent
from harness.capabilities import Capability
from harness.config import build_stack, parse_stack, resolve_stack
from harness.core import Model
from harness.errors import StackConfigError
from harness.hooks import PluginManager
from harness.models.openai import OpenAIModel
from harness.models.test import TestModel


class Picky(Capability):
    """Refuses its ``model`` with a message that also names ``context_window``."""

    name = "picky"

    def __init__(self, *, model: Any = None, context_window: int | None = None) -> None:
        raise ValueError("model must be a harness Model (model_name, context_window, async request())")


class Loose(Capability):
    """Takes a ``model`` that may also be a plain string."""

    name = "loose"

    def __init__(self, *, model: Model | str | None = None) -> None:
        self.model = model


class _Manager(PluginManager):
    def available_capabilities(self) -> dict[str, type]:
        return {"picky": Picky, "loose": Loose, "summarizing": SummarizingCompaction}


def test_a_model_string_in_a_stack_becomes_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    (capability,) = build_stack(parse_stack("summarizing:model=openai:gpt-4o-mini"))
    assert isinstance(capability, SummarizingCompaction)
    assert isinstance(capability.model, OpenAIModel)
    assert capability.model.model_name == "gpt-4o-mini"


def test_nested_tiers_and_toml_values_resolve_too(tmp_path: Path) -> None:
    config = tmp_path / "harness.toml"
    config.write_text('[[stack]]\nname = "summarizing"\nmodel = "test:summarizer"\n')
    (from_file,), _ = resolve_stack(config=config)
    assert isinstance(from_file, SummarizingCompaction)
    assert isinstance(from_file.model, TestModel)
    assert from_file.model.model_name == "summarizer"
    (tiered,) = build_stack(parse_stack("tiered[summarizing:model=test:inner]:target_tokens=1000"))
    (tier,) = tiered.tiers  # pyright: ignore[reportAttributeAccessIssue, reportUnknownVariableType]
    assert isinstance(tier, SummarizingCompaction)
    assert isinstance(tier.model, TestModel)


def test_a_plugins_resolve_model_hook_is_asked_first() -> None:
    answered = TestModel(model_name="from-the-plugin")

    class Provider:
        from harness.core.markers import hookimpl

        @hookimpl
        def resolve_model(self, model_string: str) -> Model | None:
            return answered if model_string == "house:summarizer" else None

    manager = _Manager()
    manager.register(Provider(), name="house_models")
    (capability,) = build_stack(parse_stack("summarizing:model=house:summarizer"), plugin_manager=manager)
    assert isinstance(capability, SummarizingCompaction)
    assert capability.model is answered


def test_an_unknown_model_string_is_blamed_on_the_model_parameter() -> None:
    with pytest.raises(StackConfigError) as caught:
        build_stack(parse_stack("summarizing:model=nope:x"), context_window=8000)
    message = str(caught.value)
    assert "parameter 'model'" in message
    assert "cannot resolve model 'nope:x'" in message
    assert "context_window" not in message
    with pytest.raises(StackConfigError, match=r"parameter 'model': .*did you mean 'openai:gpt-4o'\?"):
        build_stack(parse_stack("summarizing:model=gpt-4o"))


def test_a_value_that_is_no_model_string_is_a_type_error_of_the_parameter() -> None:
    with pytest.raises(StackConfigError, match=r"parameter 'model': expected Model \| None, got 5"):
        build_stack(parse_stack("summarizing:model=5"))


def test_a_parameter_that_also_takes_text_keeps_the_text() -> None:
    (capability,) = build_stack(parse_stack("loose:model=openai:gpt-4o"), plugin_manager=_Manager())
    assert isinstance(capability, Loose)
    assert capability.model == "openai:gpt-4o"


def test_a_constructor_error_blames_the_parameter_it_names_first() -> None:
    with pytest.raises(StackConfigError) as caught:
        build_stack(parse_stack("picky:model=1"), plugin_manager=_Manager(), context_window=8000)
    assert "parameter 'model'" in str(caught.value)
    assert "parameter 'context_window'" not in str(caught.value)


def test_agent_capability_strings_resolve_model_strings() -> None:
    agent = Agent(TestModel(), capabilities=["summarizing:model=test:tiny"])
    (capability,) = [c for c in agent.plugin_manager.capabilities if isinstance(c, SummarizingCompaction)]
    assert isinstance(capability.model, TestModel)
    assert capability.model.model_name == "tiny"


def test_the_command_line_resolves_a_model_string_in_the_stack(tmp_path: Path) -> None:
    history = tmp_path / "history.json"
    history.write_text(
        json.dumps(
            [
                {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hello " * 50}]},
                {"kind": "response", "parts": [{"part_kind": "text", "content": "world " * 50}]},
                {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "again"}]},
            ]
        )
    )
    completed = subprocess.run(
        [
            str(Path(sys.executable).with_name("harness")),
            "compact",
            str(history),
            "--stack",
            "summarizing:model=test:tiny,keep_messages=1,min_summary_chars=1",
            "--window",
            "100000",
            "--dry-run",
            "--json",
        ],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))},
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    assert report["stack"] == "summarizing:model=test:tiny,keep_messages=1,min_summary_chars=1"
    (edit,) = report["edits"]
    assert edit["capability"] == "summarizing"
    assert "model:tiny" in json.dumps(edit["details"])  # the summary came from the resolved model
