"""Unit tests of harness.history on hand-built histories."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from harness.errors import MessageError
from harness.history import (
    CHANGE_KINDS,
    VIOLATION_KINDS,
    Change,
    HistoryEdit,
    ToolPair,
    Violation,
    answer_dangling_calls,
    check_invariants,
    first_user_request_index,
    is_empty_response,
    is_safe_cutoff,
    is_system_only_request,
    leading_system_request,
    merge_consecutive_requests,
    merge_consecutive_responses,
    merge_trailing_request,
    prune_old_tool_outputs,
    remove_empty_responses,
    remove_orphan_returns,
    rename_duplicate_call_ids,
    run_cleanup_loop,
    safe_cutoff,
    safe_token_cutoff,
    sanitize_for_resume,
    tool_pairs,
    user_prompt_count,
)
from harness.messages import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownPart,
    UserPromptPart,
    harness_mark,
)


def req(*parts: Part, **fields: Any) -> CanonicalMessage:
    return CanonicalMessage.request(*parts, **fields)


def resp(*parts: Part, **fields: Any) -> CanonicalMessage:
    return CanonicalMessage.response(*parts, **fields)


def user(text: str = "hi") -> UserPromptPart:
    return UserPromptPart(text)


def call(call_id: str, name: str = "bash") -> ToolCallPart:
    return ToolCallPart(call_id, name, {"cmd": "ls"})


def ret(call_id: str, content: Any = "ok", name: str | None = "bash") -> ToolReturnPart:
    return ToolReturnPart(call_id, name, content)


def retry(call_id: str | None, name: str | None = "bash") -> RetryPromptPart:
    return RetryPromptPart("try again", tool_name=name, tool_call_id=call_id)


def kinds(messages: Sequence[CanonicalMessage], *, persisted: bool = False) -> list[str]:
    return [v.kind for v in check_invariants(messages, persisted=persisted)]


def same_objects(a: Sequence[object], b: Sequence[object]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


# --------------------------------------------------------------------------- check_invariants


def test_empty_history_is_valid() -> None:
    assert check_invariants([]) == []


def test_unanswered_trailing_request_is_valid() -> None:
    assert check_invariants([req(user())]) == []
    history = [req(user()), resp(call("a")), req(ret("a")), resp(TextPart("done")), req(user("next"))]
    assert check_invariants(history) == []


def test_distant_answers_and_retry_then_return_are_valid() -> None:
    history = [
        req(user()),
        resp(call("a"), call("b")),
        req(ret("a"), retry("b")),
        resp(TextPart("waiting")),
        req(user("more")),
        resp(TextPart("still")),
        req(ret("b")),
    ]
    assert check_invariants(history) == []


def test_dangling_call_reported_with_location() -> None:
    history = [req(user()), resp(TextPart("x"), call("a")), req(user("again"))]
    assert check_invariants(history) == [
        Violation("dangling_call", 1, 1, "a", "tool call 'a' (bash) has no return or retry after it")
    ]


def test_call_answered_only_by_a_retry_is_not_dangling() -> None:
    assert check_invariants([req(user()), resp(call("a")), req(retry("a"))]) == []


def test_call_whose_answer_comes_before_it_is_dangling_and_answer_is_early() -> None:
    history = [req(user()), resp(TextPart("x")), req(ret("a")), resp(call("a"))]
    violations = check_invariants(history)
    assert [(v.kind, v.message_index, v.part_index, v.tool_call_id) for v in violations] == [
        ("return_before_call", 2, 0, "a"),
        ("dangling_call", 3, 0, "a"),
    ]


def test_orphan_returns_and_retries() -> None:
    history = [
        req(user()),
        resp(call("a")),
        req(ret("a"), ret("ghost"), retry("ghost2"), retry(None), retry("x", name=None)),
    ]
    violations = check_invariants(history)
    assert [(v.kind, v.part_index, v.tool_call_id) for v in violations] == [
        ("orphan_return", 1, "ghost"),
        ("orphan_return", 2, "ghost2"),
        ("orphan_return", 3, ""),  # names a tool, but no id: answers nothing
    ]
    # a general retry (no tool name) is fine, whatever its id


def test_duplicate_call_id_reported_at_later_call() -> None:
    history = [req(user()), resp(call("a")), req(ret("a")), resp(TextPart("t"), call("a")), req(ret("a"))]
    violations = check_invariants(history)
    assert [(v.kind, v.message_index, v.part_index, v.tool_call_id) for v in violations] == [
        ("duplicate_call_id", 3, 1, "a")
    ]


def test_duplicate_call_id_in_one_response() -> None:
    history = [req(user()), resp(call("a"), call("a")), req(ret("a"), ret("a"))]
    assert kinds(history) == ["duplicate_call_id"]


def test_consecutive_messages() -> None:
    history = [req(user()), req(user("b")), resp(TextPart("x")), resp(TextPart("y"))]
    violations = check_invariants(history)
    assert [(v.kind, v.message_index, v.part_index) for v in violations] == [
        ("consecutive_requests", 1, None),
        ("consecutive_responses", 3, None),
    ]


@pytest.mark.parametrize(
    ("parts", "empty"),
    [
        ((), True),
        ((TextPart(""),), True),
        ((TextPart("  \n"), TextPart("")), True),
        ((TextPart("x"),), False),
        ((ThoughtPart("thinking only"),), False),
        ((ThoughtPart(""),), False),
        ((call("a"),), False),
        ((UnknownPart("builtin-tool-call", {"x": 1}),), False),
    ],
)
def test_empty_response_definition(parts: tuple[Part, ...], empty: bool) -> None:
    message = resp(*parts)
    assert is_empty_response(message) is empty
    assert ("empty_response" in kinds([req(user()), message, req(user())])) is empty


def test_requests_are_never_empty_responses() -> None:
    assert not is_empty_response(req())


def test_persisted_system_prompt_only_when_persisted() -> None:
    history = [req(SystemPromptPart("be nice"), user()), resp(TextPart("x"))]
    assert check_invariants(history) == []
    assert [(v.kind, v.message_index, v.part_index) for v in check_invariants(history, persisted=True)] == [
        ("persisted_system_prompt", 0, 0)
    ]


def test_violation_kinds_constant_lists_every_kind() -> None:
    history = [
        req(SystemPromptPart("s"), ret("early")),
        req(ret("ghost")),
        resp(call("early"), call("d")),
        resp(),
        resp(call("d")),
    ]
    assert set(kinds(history, persisted=True)) == VIOLATION_KINDS


# --------------------------------------------------------------------------- rename_duplicate_call_ids


def test_rename_duplicates_sequential_pairs() -> None:
    first = resp(call("a"))
    history = [req(user()), first, req(ret("a", "1")), resp(call("a")), req(retry("a"), ret("a", "2"))]
    edit = rename_duplicate_call_ids(history)
    assert edit.changes == (
        Change("renamed_duplicate_call_id", 3, ("a", "a~1"), "tool call id 'a' reused; renamed to 'a~1'"),
    )
    out = edit.messages
    assert out[0] is history[0]
    assert out[1] is first
    assert out[2] is history[2]
    assert out[3].parts == (ToolCallPart("a~1", "bash", {"cmd": "ls"}),)
    assert [p.tool_call_id for p in out[4].parts if isinstance(p, (ToolReturnPart, RetryPromptPart))] == [
        "a~1",
        "a~1",
    ]
    assert check_invariants(out) == []


def test_rename_duplicates_parallel_in_one_response() -> None:
    history = [req(user()), resp(call("a"), call("a")), req(ret("a", "1"), ret("a", "2"))]
    edit = rename_duplicate_call_ids(history)
    out = edit.messages
    assert [p.tool_call_id for p in out[1].parts if isinstance(p, ToolCallPart)] == ["a", "a~1"]
    assert [(p.tool_call_id, p.content) for p in out[2].parts if isinstance(p, ToolReturnPart)] == [
        ("a", "1"),
        ("a~1", "2"),
    ]
    assert check_invariants(out) == []


def test_rename_avoids_existing_ids() -> None:
    history = [req(user()), resp(call("a"), call("a~1")), req(ret("a"), ret("a~1")), resp(call("a"))]
    out = rename_duplicate_call_ids(history).messages
    assert [p.tool_call_id for p in out[3].parts if isinstance(p, ToolCallPart)] == ["a~2"]


def test_rename_without_duplicates_is_identity() -> None:
    history = [req(user()), resp(call("a")), req(ret("a"))]
    edit = rename_duplicate_call_ids(history)
    assert not edit.changed
    assert same_objects(edit.messages, history)
    assert edit.messages is not history


# --------------------------------------------------------------------------- answer_dangling_calls


def test_answer_inserts_after_returns_before_user_prompt() -> None:
    response = resp(call("a", "read"), call("b", "grep"), call("c"))
    following = req(ret("a"), user("next"))
    history = [req(user()), response, following]
    edit = answer_dangling_calls(history)
    out = edit.messages
    assert len(out) == 3
    assert out[0] is history[0]
    assert out[1] is response
    parts = out[2].parts
    assert parts[0] is following.parts[0]
    assert [type(p).__name__ for p in parts] == [
        "ToolReturnPart",
        "ToolReturnPart",
        "ToolReturnPart",
        "UserPromptPart",
    ]
    synthetic = parts[1]
    assert isinstance(synthetic, ToolReturnPart)
    assert (synthetic.tool_call_id, synthetic.tool_name, synthetic.content) == (
        "b",
        "grep",
        "Tool execution aborted",
    )
    assert harness_mark(synthetic) == {"synthetic": True, "reason": "dangling"}
    assert edit.changes == (
        Change("answered_dangling_call", 1, ("b", "c"), "added 2 synthetic tool return(s) into request 2"),
    )
    assert check_invariants(out) == []


def test_answer_goes_after_system_prompt_when_request_has_no_returns() -> None:
    history = [req(user()), resp(call("a")), req(SystemPromptPart("s"), user("x"))]
    parts = answer_dangling_calls(history).messages[2].parts
    assert [p.part_kind for p in parts] == ["system-prompt", "tool-return", "user-prompt"]


def test_answer_inserts_new_request_between_responses() -> None:
    history = [req(user()), resp(call("a")), resp(TextPart("later"))]
    out = answer_dangling_calls(history, content="interrupted").messages
    assert len(out) == 4
    assert out[1] is history[1]
    assert out[3] is history[2]
    inserted = out[2]
    assert inserted.is_request
    assert harness_mark(inserted) == {"synthetic": True, "reason": "dangling"}
    assert inserted.parts[0] == ToolReturnPart(
        "a", "bash", "interrupted", metadata={"harness": {"synthetic": True, "reason": "dangling"}}
    )


def test_answer_appends_request_after_trailing_response() -> None:
    history = [req(user()), resp(call("a"))]
    edit = answer_dangling_calls(history)
    assert len(edit.messages) == 3
    assert edit.messages[2].is_request
    assert check_invariants(edit.messages) == []
    assert edit.changes[0].detail == "added 1 synthetic tool return(s) in a new request"


def test_answer_does_nothing_without_dangling_calls() -> None:
    history = [req(user()), resp(call("a")), req(ret("a"))]
    edit = answer_dangling_calls(history)
    assert not edit.changed
    assert same_objects(edit.messages, history)


def test_remove_mode_deletes_call_and_its_parts() -> None:
    history = [
        req(user(), retry("a")),  # an answer before the call carries the id too
        resp(TextPart("x"), call("a")),
        resp(call("b")),
        req(user("next")),
    ]
    edit = answer_dangling_calls(history, mode="remove")
    out = edit.messages
    assert [m.parts for m in out] == [(user(),), (TextPart("x"),), (user("next"),)]
    assert out[2] is history[3]
    assert edit.removed_tool_call_ids == ("a", "b")
    assert [c.message_index for c in edit.changes] == [0, 1, 2]
    assert edit.changes[2].detail.endswith("message dropped (left empty)")


def test_remove_mode_keeps_answers_of_an_answered_call_with_same_id() -> None:
    history = [req(user()), resp(call("a")), req(ret("a")), resp(call("a"))]
    out = answer_dangling_calls(history, mode="remove").messages
    assert [m.parts for m in out] == [(user(),), (call("a"),), (ret("a"),)]


def test_remove_mode_uses_positions_not_object_identity() -> None:
    shared = call("a")  # the same part object in an answered and in a dangling response
    history = [req(user()), resp(shared), req(ret("a")), resp(TextPart("t"), shared)]
    out = answer_dangling_calls(history, mode="remove").messages
    assert [m.parts for m in out] == [(user(),), (shared,), (ret("a"),), (TextPart("t"),)]
    assert out[1] is history[1]


def test_answer_dangling_rejects_unknown_mode() -> None:
    with pytest.raises(ValueError, match="mode"):
        answer_dangling_calls([], mode="drop")  # pyright: ignore[reportArgumentType]


# --------------------------------------------------------------------------- remove_orphan_returns


def test_remove_orphans_and_early_answers() -> None:
    keep = req(user(), ret("a"), retry(None, name=None))
    history = [
        req(user(), ret("early")),
        resp(call("a"), call("early")),
        keep,
        req(ret("ghost")),
        resp(TextPart("x")),
        req(retry("ghost2"), retry(None), ret("early")),
    ]
    edit = remove_orphan_returns(history)
    out = edit.messages
    assert [m.parts for m in out] == [
        (user(),),
        (call("a"), call("early")),
        keep.parts,
        (TextPart("x"),),
        (ret("early"),),
    ]
    assert out[2] is keep
    assert out[1] is history[1]
    assert [(c.message_index, c.tool_call_ids) for c in edit.changes] == [
        (0, ("early",)),
        (3, ("ghost",)),
        (5, ("ghost2", "")),
    ]
    assert edit.removed_tool_call_ids == ("early", "ghost", "ghost2", "")


# --------------------------------------------------------------------------- empty / merges


def test_remove_empty_responses() -> None:
    thinking = resp(ThoughtPart("hmm"))
    history = [req(user()), resp(), req(user()), resp(TextPart(" ")), req(user()), thinking]
    edit = remove_empty_responses(history)
    assert same_objects(edit.messages, [history[0], history[2], history[4], thinking])
    assert [c.message_index for c in edit.changes] == [1, 3]


def test_merge_consecutive_requests_keeps_every_part_and_first_fields() -> None:
    a = req(user("a"), run_id="r1", instructions="first")
    b = req(ret("x"), run_id="r2")
    c = req(user("c"))
    r = resp(TextPart("t"))
    edit = merge_consecutive_requests([a, b, c, r, req(user("d"))])
    out = edit.messages
    assert len(out) == 3
    assert out[0].parts == (*a.parts, *b.parts, *c.parts)
    assert (out[0].run_id, out[0].instructions) == ("r1", "first")
    assert out[1] is r
    assert [(c.kind, c.message_index, c.tool_call_ids) for c in edit.changes] == [("merged_requests", 0, ())]


def test_merge_consecutive_responses() -> None:
    first = resp(ThoughtPart("t"), model_name="m1")
    second = resp(call("a"), model_name="m2")
    edit = merge_consecutive_responses([req(user()), first, second, req(ret("a"))])
    out = edit.messages
    assert len(out) == 3
    assert out[1].parts == (ThoughtPart("t"), call("a"))
    assert out[1].model_name == "m1"
    assert [(c.kind, c.message_index) for c in edit.changes] == [("merged_responses", 1)]
    assert not merge_consecutive_responses(out).changed


def test_merge_trailing_request_merges() -> None:
    history = [req(user("a")), resp(TextPart("b")), req(user("interrupted"), run_id="old")]
    new = req(user("new"), run_id="new", instructions="inst")
    edit = merge_trailing_request(history, new)
    out = edit.messages
    assert len(out) == 3
    assert out[0] is history[0]
    assert out[1] is history[1]
    assert out[2].parts == (user("interrupted"), user("new"))
    assert (out[2].run_id, out[2].instructions) == ("new", "inst")
    assert edit.changes[0].kind == "merged_trailing_request"
    assert len(history) == 3  # input untouched


def test_merge_trailing_request_appends() -> None:
    new = req(user("new"))
    for history in ([], [req(user()), resp(TextPart("x"))]):
        edit = merge_trailing_request(history, new)
        assert edit.messages[-1] is new
        assert len(edit.messages) == len(history) + 1
        assert edit.changes[0].kind == "appended_request"


def test_merge_trailing_request_rejects_response() -> None:
    with pytest.raises(MessageError, match="new_request must be a request"):
        merge_trailing_request([], resp(TextPart("x")))


# --------------------------------------------------------------------------- sanitize


def test_sanitize_for_resume() -> None:
    plain = resp(TextPart("x"))
    history = [
        req(SystemPromptPart("only")),
        req(SystemPromptPart("s"), user(), run_id="r"),
        plain,
        resp(TextPart("y"), run_id="r"),
    ]
    edit = sanitize_for_resume(history)
    out = edit.messages
    assert [m.parts for m in out] == [(user(),), (TextPart("x"),), (TextPart("y"),)]
    assert all(m.run_id is None for m in out)
    assert out[1] is plain
    assert [c.kind for c in edit.changes] == [
        "stripped_system_prompt",
        "stripped_system_prompt",
        "cleared_run_id",
        "cleared_run_id",
    ]
    assert check_invariants(out, persisted=True) == [
        Violation("consecutive_responses", 2, None, None, "message 2 follows another response")
    ]


def test_sanitize_keeps_identity_when_clean() -> None:
    history = [req(user()), resp(TextPart("x")), req()]
    edit = sanitize_for_resume(history)
    assert not edit.changed
    assert same_objects(edit.messages, history)


# --------------------------------------------------------------------------- prune_old_tool_outputs


class CharCounter:
    """One token per character of string content; 1 for anything else."""

    def __init__(self) -> None:
        self.calls = 0

    def count_part(self, part: Part) -> int:
        self.calls += 1
        content = getattr(part, "content", "")
        return len(content) if isinstance(content, str) else 1


def tool_turns(sizes: Sequence[int]) -> list[CanonicalMessage]:
    """user, then one call/return pair per size (oldest first), then a user prompt."""
    history: list[CanonicalMessage] = [req(user("start"))]
    for index, size in enumerate(sizes):
        history.append(resp(call(f"c{index}")))
        history.append(req(ret(f"c{index}", "x" * size)))
    history.append(resp(TextPart("done")))
    history.append(req(user("next")))
    return history


def cleared_ids(messages: Sequence[CanonicalMessage]) -> list[str]:
    return [
        p.tool_call_id
        for m in messages
        for p in m.parts
        if isinstance(p, ToolReturnPart) and (harness_mark(p) or {}).get("cleared") == "pruned"
    ]


def test_prune_clears_from_the_boundary_back() -> None:
    history = tool_turns([50, 50, 50, 50, 50])  # newest first: c4 c3 c2 c1 c0
    # running totals 50, 100, 150 > 120 -> c2 crosses: c2, c1, c0 are candidates (150 tokens)
    edit = prune_old_tool_outputs(history, counter=CharCounter(), protect_tokens=120, minimum_savings=100)
    assert cleared_ids(edit.messages) == ["c0", "c1", "c2"]
    placeholder = "[Old tool result content cleared]"
    assert edit.tokens_reclaimed == 3 * (50 - len(placeholder))
    assert edit.cleared_tool_call_ids == ("c0", "c1", "c2")
    assert [c.kind for c in edit.changes] == ["pruned_tool_output"] * 3
    # only the three returns' requests changed
    changed = [i for i, (a, b) in enumerate(zip(history, edit.messages, strict=True)) if a is not b]
    assert changed == [2, 4, 6]
    part = edit.messages[2].parts[0]
    assert isinstance(part, ToolReturnPart)
    assert (part.tool_call_id, part.tool_name, part.content) == ("c0", "bash", placeholder)
    assert check_invariants(edit.messages) == []


def test_prune_needs_minimum_savings() -> None:
    history = tool_turns([50, 50, 50, 50, 50])
    edit = prune_old_tool_outputs(history, counter=CharCounter(), protect_tokens=120, minimum_savings=151)
    assert not edit.changed
    assert same_objects(edit.messages, history)


def test_prune_needs_user_turns() -> None:
    history = tool_turns([500, 500])[:-1]  # only one user prompt
    edit = prune_old_tool_outputs(history, counter=CharCounter(), protect_tokens=10, minimum_savings=1)
    assert not edit.changed
    edit = prune_old_tool_outputs(
        history, counter=CharCounter(), protect_tokens=10, minimum_savings=1, min_user_turns=1
    )
    assert cleared_ids(edit.messages) == ["c0"]


def test_prune_never_clears_the_newest_result() -> None:
    history = tool_turns([300, 700])  # newest (c1) alone exceeds protect_tokens
    edit = prune_old_tool_outputs(history, counter=CharCounter(), protect_tokens=500, minimum_savings=100)
    assert cleared_ids(edit.messages) == ["c0"]
    only_one = tool_turns([700])
    assert not prune_old_tool_outputs(
        only_one, counter=CharCounter(), protect_tokens=1, minimum_savings=0
    ).changed


def test_prune_is_idempotent_and_skips_unmarkable_parts() -> None:
    history = tool_turns([100, 100, 100])
    odd = req(ToolReturnPart("c0", "bash", "y" * 100, metadata="not a mapping"))
    history[2] = odd
    counter = CharCounter()
    edit = prune_old_tool_outputs(history, counter=counter, protect_tokens=50, minimum_savings=10)
    assert cleared_ids(edit.messages) == ["c1"]
    assert edit.messages[2] is odd
    again = prune_old_tool_outputs(edit.messages, counter=counter, protect_tokens=50, minimum_savings=10)
    assert not again.changed


def test_prune_custom_placeholder_and_default_counter() -> None:
    history = tool_turns([4000, 4000, 4000])
    edit = prune_old_tool_outputs(history, protect_tokens=100, minimum_savings=10, placeholder="[gone]")
    assert cleared_ids(edit.messages) == ["c0", "c1"]
    assert edit.tokens_reclaimed > 0
    part = edit.messages[2].parts[0]
    assert isinstance(part, ToolReturnPart)
    assert part.content == "[gone]"


# --------------------------------------------------------------------------- run_cleanup_loop


def test_cleanup_loop_repairs_everything() -> None:
    history = [
        req(user("a"), ret("ghost")),
        req(user("b")),
        resp(call("x"), call("y")),
        resp(),
        req(ret("x")),
        resp(call("x")),
        resp(TextPart("t")),
    ]
    edit = run_cleanup_loop(history)
    assert check_invariants(edit.messages) == []
    assert edit.changed
    assert {c.kind for c in edit.changes} <= CHANGE_KINDS
    user_texts = [p.content for m in edit.messages for p in m.parts if isinstance(p, UserPromptPart)]
    assert user_texts == ["a", "b"]
    assert not run_cleanup_loop(edit.messages).changed


def test_cleanup_loop_remove_mode() -> None:
    history = [req(user()), resp(call("a")), req(user("again"))]
    edit = run_cleanup_loop(history, dangling="remove")
    assert [m.parts for m in edit.messages] == [(user(), user("again"))]
    assert edit.removed_tool_call_ids == ("a",)


def test_cleanup_loop_noop_on_valid_history() -> None:
    history = [req(user()), resp(call("a")), req(ret("a"))]
    edit = run_cleanup_loop(history)
    assert not edit.changed
    assert same_objects(edit.messages, history)


def test_cleanup_loop_validates_passes() -> None:
    with pytest.raises(ValueError, match="max_passes"):
        run_cleanup_loop([], max_passes=0)
    with pytest.raises(ValueError, match="dangling"):
        run_cleanup_loop([], dangling="drop")  # pyright: ignore[reportArgumentType]


def test_cleanup_loop_respects_max_passes() -> None:
    history = [req(user()), resp(call("a")), resp(), req(ret("ghost"))]
    edit = run_cleanup_loop(history, max_passes=1)
    assert check_invariants(edit.messages) == []  # one pass is enough here
    # removing the dangling call drops its response, which leaves two requests adjacent:
    # a second pass merges them
    history = [req(user()), resp(call("a")), req(user("b"))]
    one = run_cleanup_loop(history, dangling="remove", max_passes=1)
    assert kinds(one.messages) == ["consecutive_requests"]
    full = run_cleanup_loop(history, dangling="remove")
    assert [c.kind for c in full.changes] == ["removed_dangling_call", "merged_requests"]
    assert check_invariants(full.messages) == []


def test_history_edit_defaults() -> None:
    edit = HistoryEdit([])
    assert not edit.changed
    assert edit.tokens_reclaimed == 0
    assert edit.removed_tool_call_ids == () == edit.cleared_tool_call_ids


# --------------------------------------------------------------------------- cut points


def test_tool_pairs() -> None:
    history = [
        req(user(), ret("orphan")),
        resp(call("a"), call("b")),
        req(ret("a"), retry("b")),
        resp(TextPart("x")),
        req(ret("b"), ret("b")),
    ]
    assert tool_pairs(history) == {"a": ToolPair(1, (2,)), "b": ToolPair(1, (2, 4))}


def test_is_safe_cutoff() -> None:
    history = [req(user()), resp(call("a")), req(user("x")), resp(TextPart("t")), req(ret("a"))]
    assert [is_safe_cutoff(history, c) for c in range(6)] == [True, True, False, False, False, True]
    with pytest.raises(ValueError, match="cut"):
        is_safe_cutoff(history, 6)
    with pytest.raises(ValueError, match="cut"):
        is_safe_cutoff(history, -1)


def test_safe_cutoff_keeps_distant_pair_the_reference_splits() -> None:
    # call at index 0, its (deferred) return at index 8; the reference only looks +-5
    # messages around the cut and keeps the return without its call.
    history = [
        resp(call("far")),
        req(user("u0")),
        resp(TextPart("t0")),
        req(user("u1")),
        resp(TextPart("t1")),
        req(user("u2")),
        resp(TextPart("t2")),
        req(user("u3")),
        req(ret("far")),
    ]
    assert not is_safe_cutoff(history, 6)  # where keep=3 would cut
    cut = safe_cutoff(history, 3)
    assert cut == 0
    kept = history[cut:]
    assert history[0] in kept
    assert history[8] in kept


def test_safe_cutoff_basic_rules() -> None:
    history = [req(user()), resp(TextPart("a")), req(user()), resp(TextPart("b")), req(user())]
    assert safe_cutoff(history, 2) == 3
    assert safe_cutoff(history, 0) == 4  # the request being sent is always kept
    assert safe_cutoff(history, -5) == 4
    assert safe_cutoff(history, 5) == 0
    assert safe_cutoff(history, 50) == 0
    assert safe_cutoff([], 0) == 0
    assert safe_cutoff([], 3) == 0


def test_safe_cutoff_parallel_calls_walks_back() -> None:
    history = [
        req(user()),
        resp(call("a"), call("b"), call("c")),
        req(ret("a"), ret("b")),
        resp(TextPart("partial")),
        req(ret("c")),
        resp(TextPart("done")),
        req(user("next")),
    ]
    assert safe_cutoff(history, 3) == 1
    assert safe_cutoff(history, 2) == 5
    assert safe_cutoff(history, 5) == 1


def test_safe_token_cutoff() -> None:
    history = [req(user()), resp(call("a")), req(ret("a")), resp(TextPart("t")), req(user())]
    sizes = [10, 10, 10, 10, 10]
    counted: list[int] = []

    def count(message: CanonicalMessage) -> int:
        index = next(i for i, m in enumerate(history) if m is message)
        counted.append(index)
        return sizes[index]

    assert safe_token_cutoff(history, 50, count) == 0
    counted.clear()
    assert safe_token_cutoff(history, 20, count) == 3
    assert counted == [4, 3, 2]  # stops at the first message that does not fit
    # fits from index 2, but 2 splits the pair: move forward to the next safe cut
    assert safe_token_cutoff(history, 30, count) == 3
    assert safe_token_cutoff(history, 5, count) == 4  # the last message alone is too big: still kept
    assert safe_token_cutoff([], 10, count) == 0


def test_safe_token_cutoff_falls_back_below_when_no_fitting_cut_is_safe() -> None:
    history = [req(user()), resp(TextPart("x")), req(user()), resp(call("a")), req(ret("a"))]

    def count(message: CanonicalMessage) -> int:
        return 100 if message is history[-1] else 1

    # nothing fits (last message 100 > 50); cut 4 splits the pair -> walk back to 3
    assert safe_token_cutoff(history, 50, count) == 3
    assert safe_token_cutoff(history, 101, count) == 3  # fits from 3 on; 3 is safe
    assert safe_token_cutoff(history, 1000, count) == 0


# --------------------------------------------------------------------------- small helpers


def test_user_and_system_helpers() -> None:
    system = req(SystemPromptPart("rules"))
    history = [system, req(user("a")), resp(TextPart("x")), req(ret("q"), user("b")), req(ret("z"))]
    assert first_user_request_index(history) == 1
    assert first_user_request_index([resp(TextPart("x"))]) is None
    assert user_prompt_count(history) == 2
    assert is_system_only_request(system)
    assert not is_system_only_request(req())
    assert not is_system_only_request(req(SystemPromptPart("s"), user()))
    assert not is_system_only_request(resp(TextPart("x")))
    assert leading_system_request(history)
    assert not leading_system_request(history[1:])
    assert not leading_system_request([])
