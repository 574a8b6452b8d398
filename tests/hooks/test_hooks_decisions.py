"""The decision hooks (``count_tokens``, ``resolve_model``): order, answers, failures naming the plugin."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness import Agent
from harness.core.markers import PROJECT_NAME
from harness.errors import CapabilityError, HarnessError, PluginLoadError
from harness.hooks import ASYNC_HOOKS, DECISION_HOOKS, PluginManager, hookimpl
from harness.hooks import specs as hookspecs
from harness.hooks.middleware import WRAPPER_HOOKS
from harness.models.resolve import resolve_model
from harness.models.test import TestModel


class Counts:
    """Answers ``count_tokens`` with a fixed number (or ``None``) and records that it was asked."""

    def __init__(self, name: str, answer: object, asked: list[str]) -> None:
        self.name = name
        self.answer = answer
        self.asked = asked

    @hookimpl
    def count_tokens(self, text: str) -> object:
        del text
        self.asked.append(self.name)
        return self.answer


class RaisingCounter:
    def __init__(self, name: str, error: BaseException, asked: list[str] | None = None) -> None:
        self.name = name
        self.error = error
        self.asked = [] if asked is None else asked

    @hookimpl
    def count_tokens(self) -> int:
        self.asked.append(self.name)
        raise self.error


class RaisingResolver:
    name = "my_provider"

    @hookimpl
    def resolve_model(self, model_string: str) -> object:
        raise KeyError(f"no credentials for {model_string}")


def test_a_failing_count_tokens_is_a_harness_error_naming_the_plugin_chained() -> None:
    asked: list[str] = []
    pm = PluginManager()
    pm.register(RaisingCounter("tokenizer", KeyError("gpt-9"), asked))
    pm.register(Counts("abstains", None, asked))  # registered last, so asked first
    with pytest.raises(CapabilityError) as info:
        pm.count_tokens("hello", "gpt-9")
    error = info.value
    assert isinstance(error, HarnessError)
    assert error.capability == "tokenizer"
    assert "count_tokens raised KeyError: 'gpt-9'" in str(error)
    assert isinstance(error.__cause__, KeyError)
    assert asked == ["abstains", "tokenizer"]


def test_the_token_counter_a_manager_hands_out_raises_the_same_error() -> None:
    pm = PluginManager()
    pm.register(RaisingCounter("tokenizer", ValueError("cannot count")))
    counter = pm.token_counter("some-model")
    with pytest.raises(CapabilityError, match="'tokenizer': count_tokens raised ValueError") as info:
        counter.count_text("hello")
    assert isinstance(info.value.__cause__, ValueError)


def test_the_first_failure_stops_the_call_and_later_implementations_are_not_asked() -> None:
    asked: list[str] = []
    pm = PluginManager()
    pm.register(Counts("would_answer", 7, asked))
    pm.register(RaisingCounter("fails", RuntimeError("boom"), asked))
    with pytest.raises(CapabilityError) as info:
        pm.count_tokens("x", None)
    assert info.value.capability == "fails"
    assert asked == ["fails"]


def test_decision_hooks_keep_pluggys_order() -> None:
    class Early(Counts):
        @hookimpl(tryfirst=True)
        def count_tokens(self, text: str) -> object:
            return super().count_tokens(text)

    class Late(Counts):
        @hookimpl(trylast=True)
        def count_tokens(self, text: str) -> object:
            return super().count_tokens(text)

    asked: list[str] = []
    pm = PluginManager()
    pm.register(Late("late", 1, asked))
    pm.register(Early("early", None, asked))
    pm.register(Counts("older", None, asked))
    pm.register(Counts("newer", None, asked))
    assert pm.count_tokens("x", None) == 1
    assert asked == ["early", "newer", "older", "late"]
    asked.clear()
    pm.register(Counts("newest", 5, asked))
    assert pm.count_tokens("x", None) == 5
    assert asked == ["early", "newest"]


@pytest.mark.parametrize("answer", [-1, 2.5, "3", True])
def test_a_bad_token_count_names_the_plugin_that_answered(answer: object) -> None:
    pm = PluginManager()
    pm.register(Counts("sloppy", answer, []))
    pm.register(Counts("abstains", None, []))
    with pytest.raises(CapabilityError, match=r"expected a non-negative int") as info:
        pm.count_tokens("x", None)
    assert info.value.capability == "sloppy"
    assert f"count_tokens returned {answer!r}" in str(info.value)


def test_a_capability_error_raised_by_an_implementation_passes_through() -> None:
    own = CapabilityError("inner", "already explained")
    pm = PluginManager()
    pm.register(RaisingCounter("outer", own))
    with pytest.raises(CapabilityError) as info:
        pm.count_tokens("x", None)
    assert info.value is own


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_interrupts_propagate_unchanged(interrupt: type[BaseException]) -> None:
    pm = PluginManager()
    pm.register(RaisingCounter("stopped", interrupt()))
    with pytest.raises(interrupt):
        pm.count_tokens("x", None)


def test_a_failing_resolve_model_names_the_plugin_through_resolution_and_agent() -> None:
    pm = PluginManager()
    pm.register(RaisingResolver())
    with pytest.raises(CapabilityError) as info:
        resolve_model("mine:fast", plugin_manager=pm)
    assert info.value.capability == "my_provider"
    assert "resolve_model raised KeyError" in str(info.value)
    assert isinstance(info.value.__cause__, KeyError)
    with pytest.raises(CapabilityError, match="'my_provider': resolve_model raised KeyError"):
        Agent("mine:fast", plugin_manager=pm)


def test_resolve_model_returns_the_first_answer_in_pluggys_order() -> None:
    model = TestModel()

    class Answers:
        name = "answers"

        @hookimpl
        def resolve_model(self) -> object:
            return model

    class Abstains:
        name = "abstains"

        @hookimpl
        def resolve_model(self) -> None:
            return None

    pm = PluginManager()
    assert pm.resolve_model("x") is None
    pm.register(Answers())
    pm.register(Abstains())
    assert pm.resolve_model("x") is model
    pm.register(RaisingResolver())  # registered last: asked first
    with pytest.raises(CapabilityError):
        pm.resolve_model("x")


@pytest.mark.parametrize("style", ["wrapper", "hookwrapper"])
@pytest.mark.parametrize("hook", ["count_tokens", "resolve_model"])
def test_wrappers_on_decision_hooks_are_rejected(style: str, hook: str) -> None:
    def wrapping(self: object) -> Iterator[None]:
        del self
        yield

    if style == "wrapper":
        marked = hookimpl(specname=hook, wrapper=True)(wrapping)
    else:
        marked = hookimpl(specname=hook, hookwrapper=True)(wrapping)
    plugin = type("Wrapping", (), {"wrapping": marked})()
    with pytest.raises(PluginLoadError, match=f"{hook} cannot be a wrapper implementation") as info:
        PluginManager().register(plugin)
    assert info.value.plugin_name == "Wrapping"
    assert "names its plugin" in str(info.value)


def test_every_hook_is_dispatched_by_the_manager_one_way_or_the_other() -> None:
    spec_names = {name for name, value in vars(hookspecs).items() if hasattr(value, f"{PROJECT_NAME}_spec")}
    assert spec_names == ASYNC_HOOKS | DECISION_HOOKS | WRAPPER_HOOKS
    assert not ASYNC_HOOKS & DECISION_HOOKS
    assert not WRAPPER_HOOKS & (ASYNC_HOOKS | DECISION_HOOKS)
