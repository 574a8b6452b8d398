"""ClearToolResults on the transcript corpus, through harness.run.compaction, and its import warning."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from harness_clear_tool_results import DEFAULT_PLACEHOLDER, ClearToolResults

from harness.capabilities import CompactionEvent, RequestContext
from harness.core import CanonicalMessage, ToolCallPart, ToolReturnPart, harness_mark
from harness.history import check_invariants
from harness.hooks import PluginManager, hookimpl
from harness.run import compact, compact_sync
from harness.tokens import TokenCounter
from harness.wire import dump_messages, load_messages

BIG = "x = compute(value)\n" * 60


def history(n: int) -> list[CanonicalMessage]:
    messages = [CanonicalMessage.user("start")]
    for i in range(n):
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"c{i}", tool_name="bash", args={"command": f"step {i}"})
            )
        )
        messages.append(
            CanonicalMessage.request(ToolReturnPart(tool_call_id=f"c{i}", tool_name="bash", content=BIG))
        )
    return messages


def test_every_corpus_file(corpus_file: Path, record_property: Callable[[str, object], None]) -> None:
    messages = load_messages(corpus_file.read_bytes())
    violations_before = check_invariants(messages)
    cap = ClearToolResults(max_messages=1, keep_pairs=3, clear_tool_inputs=True)
    ctx = RequestContext(messages=list(messages), token_counter=TokenCounter())
    asyncio.run(cap.compact(ctx, reason="corpus"))
    result = ctx.messages
    assert check_invariants(result) == violations_before == []
    assert len(result) == len(messages)
    if messages[-1].kind == "request":
        assert result[-1] is messages[-1]
    tokens_before = ctx.count_tokens(messages)
    tokens_after = ctx.count_tokens(result)
    record_property("tokens_before", tokens_before)
    record_property("tokens_after", tokens_after)
    pairs = sum(isinstance(p, ToolReturnPart) for m in messages for p in m.parts)
    if pairs > 3:
        [event] = ctx.events
        assert event.tokens_before == tokens_before
        assert event.tokens_after == tokens_after < tokens_before
    # Idempotent on real transcripts too.
    again = RequestContext(messages=list(result), token_counter=ctx.token_counter)
    asyncio.run(cap.compact(again))
    assert again.events == []


async def test_through_compact_with_and_without_force() -> None:
    messages = history(6)
    cap = ClearToolResults(max_messages=100, keep_pairs=2)
    idle = await compact(messages, [cap], force=False)
    assert not idle.changed
    assert idle.messages == messages
    forced = await compact(messages, [cap], force=True)
    assert forced.changed
    [event] = forced.events
    assert event.strategy == "clear_tool_results"
    assert event.reason == "forced"
    assert event.cleared_tool_call_ids == ("c0", "c1", "c2", "c3")
    assert forced.tokens_after < forced.tokens_before
    assert check_invariants(forced.messages) == []
    assert messages == history(6)  # the input is never mutated
    triggered = await compact(messages, [ClearToolResults(max_messages=5, keep_pairs=2)], force=False)
    assert [e.cleared_tool_call_ids for e in triggered.events] == [("c0", "c1", "c2", "c3")]


def test_through_compact_sync() -> None:
    result = compact_sync(history(4), [ClearToolResults(max_messages=1, keep_pairs=1)])
    contents = [p.content for m in result.messages for p in m.parts if isinstance(p, ToolReturnPart)]
    assert contents == [DEFAULT_PLACEHOLDER] * 3 + [BIG]


async def test_events_reach_on_compaction_observers() -> None:
    seen: list[str] = []

    class Observer:
        @hookimpl
        async def on_compaction(self, ctx: RequestContext, event: CompactionEvent) -> None:
            seen.append(event.strategy)

    manager = PluginManager()
    manager.register(Observer())
    await compact(history(5), [ClearToolResults(max_messages=1)], plugin_manager=manager)
    assert seen == ["clear_tool_results"]


async def test_marks_survive_a_wire_round_trip() -> None:
    result = await compact(history(4), [ClearToolResults(max_messages=1, keep_pairs=1)], force=True)
    loaded = load_messages(dump_messages(result.messages))
    cleared = [p for m in loaded for p in m.parts if isinstance(p, ToolReturnPart) and harness_mark(p)]
    assert len(cleared) == 3
    # A reloaded session is recognised as already cleared: nothing more to do.
    again = await compact(loaded, [ClearToolResults(max_messages=1, keep_pairs=1)], force=True)
    assert not again.changed


def test_entry_point_is_registered() -> None:
    from importlib.metadata import entry_points

    [ep] = [ep for ep in entry_points(group="harness") if ep.name == "clear_tool_results"]
    assert ep.value == "harness_clear_tool_results:ClearToolResults"
    assert ep.load() is ClearToolResults


def test_experimental_warning_on_import() -> None:
    code = (
        "import warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import harness_clear_tool_results\n"
        "    import harness_clear_tool_results.capability\n"
        "from harness import HarnessExperimentalWarning\n"
        "hits = [w for w in caught if issubclass(w.category, HarnessExperimentalWarning)]\n"
        "assert len(hits) == 1, hits\n"
        "assert 'harness_clear_tool_results is experimental' in str(hits[0].message)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
