"""The recall and search_history answers on a real SQLite store: content, paging, bad input."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import pytest
from harness_recall import TOOL_NAMES, Recall, read_reference, search_log
from harness_recall.render import render_message

from harness import CanonicalMessage, RunContext, Session, TextPart, ToolCallPart, ToolRetry, ToolReturnPart
from harness.models.function import FunctionModel
from harness.session import SessionStore

LONG = "".join(f"line {i:05d} of the big file\n" for i in range(400))  # 10,800 characters
Stored = Callable[[Sequence[CanonicalMessage]], Session]


def history() -> list[CanonicalMessage]:
    return [
        CanonicalMessage.user("task"),  # r0
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="c0", tool_name="read_file", args={"path": "big.txt"})
        ),  # r1
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="c0", tool_name="read_file", content=LONG)
        ),  # r2
        CanonicalMessage.response(
            TextPart("looking"), ToolCallPart(tool_call_id="c1", tool_name="bash", args={"command": "grep"})
        ),  # r3
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="c1", tool_name="bash", content="match: needle-omega here")
        ),  # r4
        CanonicalMessage.response(TextPart("done")),  # r5
        CanonicalMessage.user("next"),  # r6
    ]


def body(answer: str) -> str:
    """An answer without its header line and its paging note."""
    text = answer.split("\n", 1)[1]
    return re.sub(r"\n\[characters [^\]]*\]$", "", text)


def test_a_part_reference_returns_the_original_content(each_stored: Stored) -> None:
    session = each_stored(history())
    answer = read_reference(session, "r4.0", max_chars=4000)
    assert answer == "r4.0 tool-return of bash (call c1):\nmatch: needle-omega here"


def test_a_call_id_finds_the_calls_result_in_the_log(each_stored: Stored) -> None:
    session = each_stored(history())
    assert read_reference(session, "c1", max_chars=4000) == read_reference(session, "r4.0", max_chars=4000)
    assert read_reference(session, "call:c1", max_chars=4000).startswith("r4.0 ")


def test_a_message_reference_renders_every_part_under_its_reference(stored: Stored) -> None:
    session = stored(history())
    answer = read_reference(session, "r3", max_chars=4000)
    assert answer == (
        "r3:\n== r3 response ==\n-- r3.0 text:\nlooking\n"
        '-- r3.1 tool-call bash (call c1):\n{"command": "grep"}\n'
    )


def test_long_content_is_paged_and_the_pages_put_together_are_the_original(each_stored: Stored) -> None:
    session = each_stored(history())
    pages: list[str] = []
    offset = 0
    while True:
        answer = read_reference(session, "r2.0", offset, max_chars=1000)
        pages.append(body(answer))
        follow = re.search(r'next: recall\("r2\.0", offset=(\d+)\)\]$', answer)
        if follow is None:
            break
        assert f"characters {offset:,}-{offset + 1000:,} of {len(LONG):,}" in answer
        offset = int(follow.group(1))
    assert len(pages) == 11
    assert "".join(pages) == LONG


def test_a_range_is_paged_too(stored: Stored) -> None:
    messages = history()
    session = stored(messages)
    whole = "".join(render_message(seq, m) for seq, m in enumerate(messages[:5]))
    pages: list[str] = []
    offset = 0
    while True:
        answer = read_reference(session, "r0-r4", offset, max_chars=3000)
        assert answer.startswith("r0-r4 (log messages 0 to 4)")
        pages.append(body(answer))
        follow = re.search(r"offset=(\d+)\)\]$", answer)
        if follow is None:
            break
        offset = int(follow.group(1))
    assert len(pages) == 4
    assert "".join(pages) == whole


@pytest.mark.parametrize(
    ("ref", "offset", "problem"),
    [
        ("r99", 0, "r99 is not in this session's log (it holds 7 messages: r0 to r6)"),
        ("r99.0", 0, "r99 is not in this session's log"),
        ("r2.5", 0, "r2 has 1 parts (r2.0 to r2.0); there is no r2.5"),
        ("r50-r60", 0, "r50 is not in this session's log"),
        ("unknown_call", 0, "no result of a tool call with id 'unknown_call'"),
        ("r40-r10", 0, "ends (r10) before it starts (r40)"),
        ("not a ref", 0, "is not a reference"),
        ("r2.0", -1, "offset must be 0 or more"),
        ("r2.0", 20_000, "offset 20000 is past the end of r2.0 (10,800 characters)"),
        ("r0-r1", 5_000, "offset 5000 is past the end of r0-r1"),
    ],
)
def test_bad_references_and_offsets_are_a_retry_prompt_saying_what_to_fix(
    stored: Stored, ref: str, offset: int, problem: str
) -> None:
    session = stored(history())
    with pytest.raises(ToolRetry) as raised:
        read_reference(session, ref, offset, max_chars=4000)
    assert problem in raised.value.message


def test_a_pruned_log_says_so(stored: Stored, store: SessionStore) -> None:
    session = stored(history())
    session.messages = [session.messages[0], *session.messages[3:]]  # the view drops r1 and r2
    session.checkpoint()
    store.prune(keep_last=0, drop_log=True)
    with pytest.raises(ToolRetry, match=r"r2 was pruned from this session's log"):
        read_reference(session, "r2.0", max_chars=4000)
    assert read_reference(session, "r4.0", max_chars=4000).endswith("needle-omega here")


def test_without_a_store_there_is_nothing_to_recall() -> None:
    for call in (
        lambda: read_reference(Session(), "r1", max_chars=4000),
        lambda: search_log(Session(), "x", 5, max_results=10),
        lambda: read_reference(None, "r1", max_chars=4000),
    ):
        with pytest.raises(ToolRetry, match="not kept in a session store"):
            call()


def test_search_names_the_part_that_matched(each_stored: Stored) -> None:
    session = each_stored(history())
    answer = search_log(session, "needle-omega", 5, max_results=10)
    lines = answer.splitlines()
    assert lines[0] == "1 match for 'needle-omega', best first (read one with recall(ref)):"
    assert lines[1].startswith("- r4.0 tool-return of bash (call c1): ")
    assert "needle-omega" in lines[1]
    assert search_log(session, "line 00399", 5, max_results=10).splitlines()[1].startswith("- r2.0 ")


def test_search_without_a_match_and_bad_queries(stored: Stored) -> None:
    session = stored(history())
    assert search_log(session, "nowhere-to-be-found", 5, max_results=10) == (
        "No message of this session's history matches 'nowhere-to-be-found'."
    )
    with pytest.raises(ToolRetry, match="at least one word"):
        search_log(session, ' "" * ', 5, max_results=10)
    with pytest.raises(ToolRetry, match="limit must be at least 1"):
        search_log(session, "task", 0, max_results=10)


def test_search_lists_at_most_max_results_and_skips_earlier_recall_answers(stored: Stored) -> None:
    messages = [CanonicalMessage.user("task")]
    for i in range(8):
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"c{i}", tool_name="bash", args={"command": "ls"})
            )
        )
        messages.append(
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=f"c{i}", tool_name="bash", content=f"kiwi {i}")
            )
        )
    messages.append(
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="s", tool_name="search_history", args={"query": "kiwi"})
        )
    )
    messages.append(
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="s", tool_name="search_history", content="- r2.0 kiwi 0")
        )
    )
    messages.append(CanonicalMessage.user("next"))
    session = stored(messages)
    lines = search_log(session, "kiwi", 50, max_results=3).splitlines()
    assert lines[0].startswith("3 matches")
    assert len(lines) == 4
    everything = search_log(session, "kiwi", 20, max_results=20)
    assert "search_history" not in everything  # the recall tools' own calls and answers are skipped
    assert everything.count("\n- r") == 8
    assert {"recall", "search_history"} == TOOL_NAMES


async def test_the_tools_read_the_runs_session(stored: Stored) -> None:
    session = stored(history())
    recall, search = Recall(max_chars=200).tools
    assert (recall.name, search.name) == ("recall", "search_history")
    assert set(recall.parameters_json_schema["properties"]) == {"ref", "offset"}
    assert recall.parameters_json_schema["required"] == ["ref"]
    assert set(search.parameters_json_schema["properties"]) == {"query", "limit"}
    assert "[recall: r12.0]" in recall.description
    ctx = RunContext(model=FunctionModel(lambda m, i: "x"), session=session)
    answer = await recall.call(recall.validate({"ref": "r2.0", "offset": 200}), ctx)
    assert answer.startswith("r2.0 tool-return of read_file (call c0), characters 200-400 of 10,800:\n")
    assert answer.endswith('[characters 200-400 of 10,800; next: recall("r2.0", offset=400)]')
    found = await search.call(search.validate({"query": "needle-omega"}), ctx)
    assert "- r4.0 " in found
    capability = Recall()
    assert capability.tools is capability.tools  # the same objects every time
    assert [t.name for t in Recall(search=False).tools] == ["recall"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_chars": 99}, "max_chars must be at least 100, got 99."),
        ({"max_chars": "big"}, "max_chars must be an integer, got 'big'."),
        ({"max_results": 0}, "max_results must be at least 1, got 0."),
        ({"max_results": True}, "max_results must be an integer, got True."),
        ({"search": "yes"}, "search must be True or False, got 'yes'."),
    ],
)
def test_parameters_are_validated(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        Recall(**kwargs)  # pyright: ignore[reportArgumentType]
