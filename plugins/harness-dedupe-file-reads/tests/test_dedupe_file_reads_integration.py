"""DeduplicateFileReads on the transcript corpus, through harness.run.compaction, and its import warning."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from harness_dedupe_file_reads import DeduplicateFileReads

from harness.capabilities import RequestContext
from harness.core import CanonicalMessage, ToolCallPart, ToolReturnPart, harness_mark
from harness.history import check_invariants
from harness.run import compact, compact_sync
from harness.testing import corpus_files
from harness.tokens import TokenCounter
from harness.wire import dump_messages, load_messages

TEXT = "def handler(request):\n    return respond(request)\n" * 30


def reads(paths: list[str]) -> list[CanonicalMessage]:
    messages = [CanonicalMessage.user("task")]
    for i, path in enumerate(paths):
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"c{i}", tool_name="bash", args={"command": f"cat {path}"})
            )
        )
        messages.append(
            CanonicalMessage.request(ToolReturnPart(tool_call_id=f"c{i}", tool_name="bash", content=TEXT))
        )
    return messages


@pytest.mark.parametrize(
    ("covered", "keeps_directory"),
    [(False, True), (True, True), (True, False)],
    ids=["default", "covered", "covered-fresh-shell"],
)
def test_every_corpus_file(
    corpus_file: Path, covered: bool, keeps_directory: bool, record_property: Callable[[str, object], None]
) -> None:
    messages = load_messages(corpus_file.read_bytes())
    assert check_invariants(messages) == []
    cap = DeduplicateFileReads(supersede_covered_ranges=covered, shell_keeps_directory=keeps_directory)
    ctx = RequestContext(messages=list(messages), token_counter=TokenCounter())
    asyncio.run(cap.compact(ctx, reason="corpus"))
    result = ctx.messages
    assert check_invariants(result) == []
    assert len(result) == len(messages)
    if messages[-1].kind == "request":
        assert result[-1] is messages[-1]
    tokens_before = ctx.count_tokens(messages)
    tokens_after = ctx.count_tokens(result)
    superseded = sum(len(e.cleared_tool_call_ids) for e in ctx.events)
    record_property("tokens_before", tokens_before)
    record_property("tokens_after", tokens_after)
    record_property("superseded_reads", superseded)
    assert tokens_after <= tokens_before
    assert (tokens_after < tokens_before) == (superseded > 0)
    # Every superseded read points to a later read of the same key that kept its content.
    positions = {
        p.tool_call_id: (mi, pi)
        for mi, m in enumerate(result)
        for pi, p in enumerate(m.parts)
        if isinstance(p, ToolReturnPart)
    }
    for mi, message in enumerate(result):
        for pi, part in enumerate(message.parts):
            mark = harness_mark(part)
            if mark is not None:
                later = mark["superseded_by"]
                assert positions[later] > (mi, pi)
                assert harness_mark(result[positions[later][0]].parts[positions[later][1]]) is None
    again = RequestContext(messages=list(result), token_counter=ctx.token_counter)
    asyncio.run(cap.compact(again))
    assert again.events == []


def test_the_corpus_repeats_reads() -> None:
    files = [f for f in corpus_files() if f.name.startswith("mini-swe-agent")]
    if not files:
        pytest.skip("../shared/corpus is absent")
    superseded = 0
    counter = TokenCounter()
    for path in files:
        ctx = RequestContext(messages=load_messages(path.read_bytes()), token_counter=counter)
        asyncio.run(DeduplicateFileReads().compact(ctx))
        superseded += sum(len(e.cleared_tool_call_ids) for e in ctx.events)
    assert superseded >= 30


async def test_through_compact_with_and_without_force() -> None:
    messages = reads(["a.py", "b.py", "a.py"])
    idle = await compact(messages, [DeduplicateFileReads(max_messages=100)], force=False)
    assert not idle.changed
    forced = await compact(messages, [DeduplicateFileReads(max_messages=100)], force=True)
    [event] = forced.events
    assert event.reason == "forced"
    assert event.cleared_tool_call_ids == ("c0",)
    untriggered = await compact(messages, [DeduplicateFileReads()], force=False)
    assert untriggered.events[0].cleared_tool_call_ids == ("c0",)
    assert untriggered.tokens_after < untriggered.tokens_before
    assert messages == reads(["a.py", "b.py", "a.py"])


def test_through_compact_sync() -> None:
    result = compact_sync(reads(["a.py", "a.py", "a.py"]), [DeduplicateFileReads()])
    contents = [p.content for m in result.messages for p in m.parts if isinstance(p, ToolReturnPart)]
    pointer = "[superseded file read: see the later read of a.py (call c2)]"
    assert contents == [pointer, pointer, TEXT]


async def test_stack_with_clear_tool_results_runs_dedupe_first() -> None:
    clear_module = pytest.importorskip("harness_clear_tool_results")  # the other plugin may be absent
    ClearToolResults = clear_module.ClearToolResults  # noqa: N806

    messages = reads(["a.py", "b.py", "a.py", "c.py", "d.py", "e.py"])
    # The user lists clear first; dedupe declares runs_before=clear_tool_results.
    result = await compact(messages, [ClearToolResults(max_messages=1, keep_pairs=3), DeduplicateFileReads()])
    assert [e.strategy for e in result.events] == ["dedupe_file_reads", "clear_tool_results"]
    marks = [harness_mark(p) for m in result.messages for p in m.parts if isinstance(p, ToolReturnPart)]
    assert [m["cleared"] if m else None for m in marks] == [
        "dedupe_file_reads",
        "clear_tool_results",
        "clear_tool_results",
        None,
        None,
        None,
    ]
    assert check_invariants(result.messages) == []


async def test_marks_survive_a_wire_round_trip() -> None:
    result = await compact(reads(["a.py", "a.py"]), [DeduplicateFileReads()])
    loaded = load_messages(dump_messages(result.messages))
    again = await compact(loaded, [DeduplicateFileReads()], force=True)
    assert not again.changed


def test_entry_point_is_registered() -> None:
    from importlib.metadata import entry_points

    [ep] = [ep for ep in entry_points(group="harness") if ep.name == "dedupe_file_reads"]
    assert ep.value == "harness_dedupe_file_reads:DeduplicateFileReads"
    assert ep.load() is DeduplicateFileReads


def test_experimental_warning_on_import() -> None:
    code = (
        "import warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import harness_dedupe_file_reads\n"
        "    import harness_dedupe_file_reads.keys\n"
        "from harness import HarnessExperimentalWarning\n"
        "hits = [w for w in caught if issubclass(w.category, HarnessExperimentalWarning)]\n"
        "assert len(hits) == 1, hits\n"
        "assert 'harness_dedupe_file_reads is experimental' in str(hits[0].message)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
