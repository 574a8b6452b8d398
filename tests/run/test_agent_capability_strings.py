"""``Agent(capabilities=[...])``: stack strings through the ``--stack`` grammar, anything else refused."""

from __future__ import annotations

import types
import warnings
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.capabilities import Capability, RequestContext
from harness.config import StackEntry, build_stack, format_stack, parse_stack
from harness.core import CanonicalMessage
from harness.errors import CapabilityError, StackConfigError
from harness.hooks import PluginManager, hookimpl
from harness.models.function import FunctionInfo, FunctionModel
from harness.run import Agent
from harness.session import Session
from harness.testing import HistoryBuilder

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from harness_clear_tool_results import ClearToolResults
    from harness_dedupe_file_reads import DeduplicateFileReads
    from harness_sliding_window import SlidingWindow

WINDOW = "sliding_window:max_messages=10,keep_messages=4"


def _model() -> FunctionModel:
    return FunctionModel.from_responses("done")


def _long_session(turns: int = 15) -> Session:
    builder = HistoryBuilder()
    for turn in range(turns):
        builder.user(f"question {turn}").text(f"answer {turn}")
    return Session(messages=builder.build())


def test_a_stack_string_is_built_like_the_command_line_and_does_its_work() -> None:
    seen: list[int] = []

    def reply(messages: list[CanonicalMessage], info: FunctionInfo) -> str:
        seen.append(len(messages))
        return "done"

    agent = Agent(FunctionModel(reply), capabilities=[WINDOW])
    (window,) = agent.plugin_manager.capabilities
    assert isinstance(window, SlidingWindow)
    (expected,) = build_stack(parse_stack(WINDOW))
    assert repr(window) == repr(expected)
    assert (window.max_messages, window.keep_messages) == (10, 4)
    agent.run_sync("and now?", session=_long_session())
    assert len(seen) == 1
    assert seen[0] <= 6  # 31 messages before the window; without it, nothing happens


def test_strings_entries_and_objects_mix_in_order() -> None:
    clear = ClearToolResults(keep_pairs=2, max_messages=50)
    agent = Agent(
        _model(),
        capabilities=[
            "dedupe_file_reads",
            clear,
            StackEntry("sliding_window", {"max_messages": 80, "keep_messages": 10}),
        ],
    )
    capabilities = agent.plugin_manager.capabilities
    assert [type(c) for c in capabilities] == [DeduplicateFileReads, ClearToolResults, SlidingWindow]
    assert capabilities[1] is clear


def test_one_string_may_hold_a_whole_stack_and_stand_alone() -> None:
    agent = Agent(_model(), capabilities=f"dedupe_file_reads {WINDOW}")
    assert [type(c) for c in agent.plugin_manager.capabilities] == [DeduplicateFileReads, SlidingWindow]
    assert Agent(_model(), capabilities="").plugin_manager.capabilities == ()


@pytest.mark.parametrize(
    ("item", "shown"),
    [(42, "int 42"), (object(), "object <object object at"), (3.5, "float 3.5"), (b"x", "bytes b'x'")],
)
def test_anything_else_is_a_type_error_naming_its_index_and_type(item: object, shown: str) -> None:
    with pytest.raises(TypeError, match=r"^capabilities\[1\] is ") as caught:
        Agent(_model(), capabilities=[WINDOW, item])
    assert shown in str(caught.value)
    assert "not a capability" in str(caught.value)


def test_an_object_implementing_no_hook_is_refused_but_any_hook_implementation_is_a_capability() -> None:
    class Nothing:
        name = "nothing"

    class Observer:
        @hookimpl
        def before_model_request(self, ctx: RequestContext) -> None:
            del ctx

    with pytest.raises(TypeError, match=r"capabilities\[0\] is .*Nothing"):
        Agent(_model(), capabilities=[Nothing()])
    with pytest.raises(TypeError, match=r"capabilities\[0\] is module"):
        Agent(_model(), capabilities=[types.ModuleType("empty")])
    observer = Observer()
    assert Agent(_model(), capabilities=[observer]).plugin_manager.capabilities == (observer,)


def test_a_class_instead_of_an_instance_keeps_its_own_message() -> None:
    with pytest.raises(CapabilityError, match="pass SlidingWindow"):
        Agent(_model(), capabilities=[SlidingWindow])


def test_a_single_capability_not_in_a_list_is_refused() -> None:
    with pytest.raises(TypeError, match=r"capabilities must be a list .* got SlidingWindow"):
        Agent(_model(), capabilities=SlidingWindow(max_messages=50, keep_messages=5))  # pyright: ignore[reportArgumentType]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "sliding_window:max_mesages=10",
            r"capabilities\[0\] entry 1 \(sliding_window\): unknown parameter 'max_mesages'; "
            r"did you mean 'max_messages'\?",
        ),
        ("sliding_windo", r"capabilities\[0\] entry 1: unknown capability 'sliding_windo'; did you mean"),
        (
            "sliding_window:max_messages=ten",
            r"capabilities\[0\] entry 1 \(sliding_window\): parameter 'max_messages': expected",
        ),
        ("dedupe_file_reads sliding_window:max_messages=", r"capabilities\[0\] entry 2 \(sliding_window\)"),
        ("sliding_window[", r"capabilities\[0\]: missing '\]'"),
    ],
)
def test_invalid_strings_fail_like_the_command_line(spec: str, message: str) -> None:
    with pytest.raises(StackConfigError, match=message) as caught:
        Agent(_model(), capabilities=[spec])
    assert caught.value.source.startswith("capabilities[0]")


def test_nothing_is_registered_when_one_item_is_invalid() -> None:
    pm = PluginManager()
    with pytest.raises(TypeError):
        pm.add_capabilities([WINDOW, 42])
    assert pm.capabilities == ()


def test_the_plugin_manager_resolves_strings_from_its_own_entry_points() -> None:
    pm = PluginManager()
    pm.load_entrypoint_plugins(allow=["dedupe_file_reads"])
    pm.add_capabilities(["dedupe_file_reads"])
    assert [type(c) for c in pm.capabilities] == [DeduplicateFileReads]
    with pytest.raises(
        StackConfigError, match=r"unknown capability 'sliding_window' \(installed: dedupe_file_reads\)"
    ):
        pm.add_capabilities([WINDOW])


def test_a_custom_capability_class_of_a_manager_is_named_by_strings() -> None:
    class Counter(Capability):
        name = "counter"

        def __init__(self, limit: int) -> None:
            self.limit = limit

    pm = PluginManager()
    pm.load_entrypoint_plugins(allow=[])
    pm._available["counter"] = Counter  # pyright: ignore[reportPrivateUsage]
    agent = Agent(_model(), capabilities=["counter:limit=3"], plugin_manager=pm)
    (counter,) = agent.plugin_manager.capabilities
    assert isinstance(counter, Counter)
    assert counter.limit == 3


_ENTRIES = st.lists(
    st.one_of(
        st.just(StackEntry("dedupe_file_reads", {})),
        st.builds(
            lambda n, k: StackEntry("sliding_window", {"max_messages": n, "keep_messages": k}),
            st.integers(51, 500),
            st.integers(0, 50),
        ),
        st.builds(
            lambda n, k: StackEntry("clear_tool_results", {"max_messages": n, "keep_pairs": k}),
            st.integers(1, 500),
            st.integers(0, 20),
        ),
    ),
    max_size=3,
    unique_by=lambda entry: entry.name,
)


@settings(max_examples=40, deadline=None)
@given(entries=_ENTRIES, one_string=st.booleans())
def test_any_stack_string_gives_what_the_stack_builds(entries: list[StackEntry], one_string: bool) -> None:
    spec: Any = format_stack(entries) if one_string else [format_stack([entry]) for entry in entries]
    built = Agent(_model(), capabilities=spec).plugin_manager.capabilities
    expected = PluginManager()
    expected.add_capabilities(build_stack(entries))  # the same order: declarations reorder both
    assert [repr(c) for c in built] == [repr(c) for c in expected.capabilities]
