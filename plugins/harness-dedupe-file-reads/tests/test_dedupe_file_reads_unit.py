"""Unit tests of DeduplicateFileReads: validation, parameters, supersession rules, reporting."""

from __future__ import annotations

from typing import Any

import pytest
from harness_dedupe_file_reads import DEFAULT_PLACEHOLDER, DeduplicateFileReads, FileKey, render_placeholder

from harness.capabilities import RequestContext
from harness.core import (
    CanonicalMessage,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    harness_mark,
    with_harness_mark,
)
from harness.errors import CapabilityError
from harness.tokens import TokenCounter

TEXT = "def f():\n    return 1\n" * 40


def ctx_for(messages: list[CanonicalMessage], **kw: Any) -> RequestContext:
    return RequestContext(messages=list(messages), token_counter=TokenCounter(), **kw)


def read(
    call_id: str, path: str, content: str = TEXT, tool: str = "read_file", **extra: Any
) -> list[CanonicalMessage]:
    return [
        CanonicalMessage.response(
            ToolCallPart(tool_call_id=call_id, tool_name=tool, args={"path": path, **extra})
        ),
        CanonicalMessage.request(ToolReturnPart(tool_call_id=call_id, tool_name=tool, content=content)),
    ]


def shell(call_id: str, command: str, content: str = TEXT) -> list[CanonicalMessage]:
    return [
        CanonicalMessage.response(
            ToolCallPart(tool_call_id=call_id, tool_name="bash", args={"command": command})
        ),
        CanonicalMessage.request(ToolReturnPart(tool_call_id=call_id, tool_name="bash", content=content)),
    ]


def contents(messages: list[CanonicalMessage]) -> dict[str, Any]:
    return {p.tool_call_id: p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)}


def pointer(path: str, call_id: str) -> str:
    return f"[superseded file read: see the later read of {path} (call {call_id})]"


async def run(cap: DeduplicateFileReads, messages: list[CanonicalMessage]) -> RequestContext:
    ctx = ctx_for(messages)
    await cap.compact(ctx, reason="test")
    return ctx


def start() -> list[CanonicalMessage]:
    return [CanonicalMessage.user("task")]


def end() -> list[CanonicalMessage]:
    return [CanonicalMessage.response(TextPart("thinking")), CanonicalMessage.user("go on")]


# -- validation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"file_key": "nope"},
            "file_key must be a callable or one of 'auto', 'read_tool', 'shell_cat'; got 'nope'.",
        ),
        ({"file_key": 3}, "file_key must be a callable or one of 'auto', 'read_tool', 'shell_cat'; got 3."),
        ({"placeholder": ""}, "placeholder must be a non-empty string."),
        ({"max_messages": 0}, "max_messages must be positive."),
        ({"max_tokens": 0}, "max_tokens must be positive."),
        ({"max_tokens": 5, "max_fraction": 0.5}, "Set at most one of max_tokens or max_fraction."),
        ({"max_fraction": 0}, "max_fraction must be in (0, 1]."),
        ({"context_window": 0}, "context_window must be positive."),
    ],
)
def test_validation_messages(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        DeduplicateFileReads(**kwargs)
    assert str(info.value) == message


def test_defaults() -> None:
    cap = DeduplicateFileReads()
    assert cap.file_key == "auto"
    assert cap.placeholder == DEFAULT_PLACEHOLDER
    assert not cap.trigger.configured
    assert cap.name == "dedupe_file_reads"
    assert "clear_tool_results" in cap.runs_before


def test_file_key_by_name_and_callable() -> None:
    assert (
        DeduplicateFileReads("read_tool").key_of(
            ToolCallPart(tool_call_id="a", tool_name="bash", args={"command": "cat x"})
        )
        is None
    )
    assert (
        DeduplicateFileReads("shell_cat").key_of(
            ToolCallPart(tool_call_id="a", tool_name="bash", args={"command": "cat x"})
        )
        is not None
    )
    custom = DeduplicateFileReads(lambda call: call.tool_name if call.tool_name.startswith("r") else None)
    assert custom.key_of(ToolCallPart(tool_call_id="a", tool_name="read_file", args={})) == "read_file"
    assert custom.key_of(ToolCallPart(tool_call_id="a", tool_name="grep", args={})) is None


# -- supersession ------------------------------------------------------------------------------


async def test_earlier_read_points_to_the_latest() -> None:
    messages = [*start(), *read("r1", "a.py"), *read("r2", "b.py"), *read("r3", "a.py"), *end()]
    ctx = await run(DeduplicateFileReads(), messages)
    assert contents(ctx.messages) == {"r1": pointer("a.py", "r3"), "r2": TEXT, "r3": TEXT}
    [event] = ctx.events
    assert event.strategy == "dedupe_file_reads"
    assert event.reason == "test"
    assert event.cleared_tool_call_ids == ("r1",)
    assert event.removed_tool_call_ids == ()
    assert event.details == {"superseded_reads": 1}
    assert event.tokens_after < event.tokens_before


async def test_three_reads_keep_only_the_latest() -> None:
    messages = [*start(), *read("r1", "a.py"), *read("r2", "a.py"), *read("r3", "a.py"), *end()]
    ctx = await run(DeduplicateFileReads(), messages)
    assert contents(ctx.messages) == {"r1": pointer("a.py", "r3"), "r2": pointer("a.py", "r3"), "r3": TEXT}


async def test_pointers_chain_when_a_newer_read_arrives() -> None:
    cap = DeduplicateFileReads()
    ctx = await run(cap, [*start(), *read("r1", "a.py"), *read("r2", "a.py"), *end()])
    ctx.messages.extend([*read("r3", "a.py"), *end()])
    await cap.compact(ctx)
    # r1 keeps its pointer (a stable prefix); r2 now points to r3.
    assert contents(ctx.messages) == {"r1": pointer("a.py", "r2"), "r2": pointer("a.py", "r3"), "r3": TEXT}
    assert ctx.events[-1].cleared_tool_call_ids == ("r2",)


async def test_stale_read_before_an_edit_is_superseded() -> None:
    edit = [
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="e1", tool_name="write_file", args={"path": "a.py", "content": "new"})
        ),
        CanonicalMessage.request(ToolReturnPart(tool_call_id="e1", tool_name="write_file", content="ok")),
    ]
    messages = [*start(), *read("r1", "a.py", "old " * 50), *edit, *read("r2", "a.py", "new" * 50), *end()]
    ctx = await run(DeduplicateFileReads(placeholder="[gone]"), messages)
    assert contents(ctx.messages) == {"r1": "[gone]", "e1": "ok", "r2": "new" * 50}


async def test_different_ranges_never_supersede_each_other() -> None:
    messages = [
        *start(),
        *shell("s1", "sed -n '1,20p' a.py"),
        *shell("s2", "sed -n '10,30p' a.py"),
        *shell("s3", "cat a.py"),
        *read("r1", "a.py", offset=1),
        *end(),
    ]
    ctx = await run(DeduplicateFileReads(), messages)
    assert ctx.events == []


async def test_equivalent_shell_reads_supersede() -> None:
    messages = [
        *start(),
        *shell("s1", "head -n 20 /testbed/a.py"),
        *shell("s2", "cd /testbed && sed -n '1,20p' a.py"),
        *end(),
    ]
    ctx = await run(DeduplicateFileReads(), messages)
    assert contents(ctx.messages)["s1"] == pointer("/testbed/a.py", "s2")


async def test_non_file_tools_are_ignored() -> None:
    messages = [*start(), *shell("g1", "grep -rn foo ."), *shell("g2", "grep -rn foo ."), *end()]
    ctx = await run(DeduplicateFileReads(), messages)
    assert ctx.events == []


async def test_current_step_returns_are_never_changed() -> None:
    # Two parallel reads of the same file in the request being sent: both stay.
    messages = [
        *start(),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="p1", tool_name="read_file", args={"path": "a.py"}),
            ToolCallPart(tool_call_id="p2", tool_name="read_file", args={"path": "a.py"}),
        ),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="p1", tool_name="read_file", content=TEXT),
            ToolReturnPart(tool_call_id="p2", tool_name="read_file", content=TEXT),
        ),
    ]
    ctx = await run(DeduplicateFileReads(), messages)
    assert ctx.events == []
    assert ctx.messages[-1] is messages[-1]


async def test_current_step_read_supersedes_older_reads() -> None:
    messages = [*start(), *read("r1", "a.py"), *read("r2", "a.py")]
    ctx = await run(DeduplicateFileReads(), messages)
    assert contents(ctx.messages) == {"r1": pointer("a.py", "r2"), "r2": TEXT}
    assert ctx.messages[-1] is messages[-1]


async def test_latest_is_by_return_position() -> None:
    # r1 is called first but answered after r2: r1 is the latest read.
    messages = [
        *start(),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="r1", tool_name="read_file", args={"path": "a.py"}),
            ToolCallPart(tool_call_id="x", tool_name="grep", args={}),
        ),
        CanonicalMessage.request(ToolReturnPart(tool_call_id="x", tool_name="grep", content="none")),
        *read("r2", "a.py"),
        CanonicalMessage.response(TextPart("wait")),
        CanonicalMessage.request(ToolReturnPart(tool_call_id="r1", tool_name="read_file", content=TEXT)),
        *end(),
    ]
    ctx = await run(DeduplicateFileReads(), messages)
    assert contents(ctx.messages)["r2"] == pointer("a.py", "r1")
    assert contents(ctx.messages)["r1"] == TEXT


async def test_retry_prompts_are_not_reads() -> None:
    retry = RetryPromptPart("file not found, try again " * 10, tool_name="read_file", tool_call_id="r2")
    messages = [
        *start(),
        *read("r1", "a.py"),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="r2", tool_name="read_file", args={"path": "a.py"})
        ),
        CanonicalMessage.request(retry),
        *end(),
    ]
    ctx = await run(DeduplicateFileReads(), messages)
    assert ctx.events == []


async def test_reads_shorter_than_the_pointer_are_left_alone() -> None:
    messages = [*start(), *read("r1", "a.py", "x"), *read("r2", "a.py", "x"), *end()]
    ctx = await run(DeduplicateFileReads(), messages)
    assert ctx.events == []


async def test_structured_read_results_become_a_string_pointer() -> None:
    payload = {"lines": [f"line {i}" for i in range(100)]}
    messages = [*start(), *read("r1", "a.py", payload), *read("r2", "a.py", payload), *end()]  # type: ignore[arg-type]
    ctx = await run(DeduplicateFileReads(), messages)
    assert contents(ctx.messages)["r1"] == pointer("a.py", "r2")


# -- placeholder -----------------------------------------------------------------------------------


def test_render_placeholder_is_safe_with_braces() -> None:
    values = {"path": "src/{call_id}/{x}.py", "call_id": "c{1}"}
    assert render_placeholder("see {path} ({call_id}) {other} {{path}}", values) == (
        "see src/{call_id}/{x}.py (c{1}) {other} {src/{call_id}/{x}.py}"
    )
    assert render_placeholder("plain", values) == "plain"


async def test_placeholder_fields_and_paths_with_braces() -> None:
    cap = DeduplicateFileReads(placeholder="<{tool_name}:{path}:{call_id}:{missing}>")
    messages = [*start(), *read("r1", "src/{a}.py"), *read("r2", "src/{a}.py"), *end()]
    ctx = await run(cap, messages)
    assert contents(ctx.messages)["r1"] == "<read_file:src/{a}.py:r2:{missing}>"


async def test_custom_key_uses_the_key_when_the_path_is_unknown() -> None:
    cap = DeduplicateFileReads(
        lambda call: "doc:" + str(call.args_as_dict().get("id")) if call.tool_name == "fetch" else None
    )
    messages = [*start()]
    for i in range(2):
        messages += [
            CanonicalMessage.response(ToolCallPart(tool_call_id=f"f{i}", tool_name="fetch", args={"id": 7})),
            CanonicalMessage.request(ToolReturnPart(tool_call_id=f"f{i}", tool_name="fetch", content=TEXT)),
        ]
    ctx = await run(cap, [*messages, *end()])
    assert contents(ctx.messages)["f0"] == pointer("doc:7", "f1")


# -- marks, idempotence, errors ---------------------------------------------------------------


async def test_superseded_parts_are_marked() -> None:
    ctx = await run(DeduplicateFileReads(), [*start(), *read("r1", "a.py"), *read("r2", "a.py"), *end()])
    first = ctx.messages[2].parts[0]
    assert harness_mark(first) == {
        "cleared": "dedupe_file_reads",
        "superseded_by": "r2",
        "file_key": DeduplicateFileReads().key_of(
            ToolCallPart(tool_call_id="r2", tool_name="read_file", args={"path": "a.py"})
        ),
    }


async def test_second_run_changes_and_reports_nothing() -> None:
    cap = DeduplicateFileReads()
    ctx = await run(cap, [*start(), *read("r1", "a.py"), *read("r2", "a.py"), *read("r3", "a.py"), *end()])
    first = list(ctx.messages)
    await cap.compact(ctx)
    assert len(ctx.events) == 1
    assert all(a is b for a, b in zip(ctx.messages, first, strict=True))


async def test_cleared_reads_are_neither_latest_nor_superseded() -> None:
    # r2 was cleared by another strategy: it is not a read with content, so r1 stays the
    # latest read with content and nothing is superseded.
    messages = [*start(), *read("r1", "a.py"), *read("r2", "a.py"), *end()]
    messages[4] = CanonicalMessage.request(
        with_harness_mark(
            ToolReturnPart(tool_call_id="r2", tool_name="read_file", content="[cleared]"),
            cleared="clear_tool_results",
        )
    )
    ctx = await run(DeduplicateFileReads(), messages)
    assert ctx.events == []


async def test_unmarkable_metadata_is_left_alone() -> None:
    messages = [*start(), *read("r1", "a.py"), *read("r2", "a.py"), *end()]
    messages[2] = CanonicalMessage.request(
        ToolReturnPart(
            tool_call_id="r1", tool_name="read_file", content=TEXT, metadata=["not", "a", "mapping"]
        )
    )
    ctx = await run(DeduplicateFileReads(), messages)
    assert ctx.events == []


async def test_a_failing_key_function_is_a_capability_error() -> None:
    def broken(call: ToolCallPart) -> str | None:
        raise RuntimeError("boom")

    with pytest.raises(
        CapabilityError, match=r"file_key raised RuntimeError for tool call 'r1' \('read_file'\): boom"
    ):
        await run(DeduplicateFileReads(broken), [*start(), *read("r1", "a.py"), *end()])


async def test_a_key_function_returning_a_non_string_is_a_capability_error() -> None:
    def wrong(call: ToolCallPart) -> Any:
        return 42

    with pytest.raises(CapabilityError, match="file_key must return a str or None, got int"):
        await run(DeduplicateFileReads(wrong), [*start(), *read("r1", "a.py"), *end()])


async def test_keys_are_computed_once_per_call() -> None:
    seen: list[str] = []

    def counting(call: ToolCallPart) -> str | None:
        seen.append(call.tool_call_id)
        return "k"

    cap = DeduplicateFileReads(counting)
    messages = [*start(), *read("r1", "a.py"), *read("r2", "a.py"), *end()]
    ctx = await run(cap, messages)
    ctx.messages.extend([*read("r3", "a.py"), *end()])
    await cap.compact(ctx)
    assert seen == ["r1", "r2", "r3"]


async def test_empty_history() -> None:
    ctx = await run(DeduplicateFileReads(), [])
    assert ctx.events == []


def test_plan_does_not_modify_the_history() -> None:
    messages = [*start(), *read("r1", "a.py"), *read("r2", "a.py"), *end()]
    snapshot = list(messages)
    changes, ids = DeduplicateFileReads().plan(messages, TokenCounter())
    assert messages == snapshot
    assert list(changes) == [2]
    assert ids == ["r1"]


# -- trigger ---------------------------------------------------------------------------------------


async def test_without_trigger_it_runs_on_every_request() -> None:
    cap = DeduplicateFileReads()
    ctx = ctx_for([*start(), *read("r1", "a.py"), *read("r2", "a.py"), *end()])
    assert cap.should_compact(ctx) == "every request (no trigger configured)"
    await cap.before_model_request(ctx)
    assert len(ctx.events) == 1


async def test_trigger_not_exceeded_is_idle() -> None:
    cap = DeduplicateFileReads(max_messages=100)
    ctx = ctx_for([*start(), *read("r1", "a.py"), *read("r2", "a.py"), *end()])
    assert cap.should_compact(ctx) is None
    await cap.before_model_request(ctx)
    assert ctx.events == []


async def test_trigger_exceeded_runs() -> None:
    cap = DeduplicateFileReads(max_messages=3)
    ctx = ctx_for([*start(), *read("r1", "a.py"), *read("r2", "a.py"), *end()])
    assert cap.should_compact(ctx) == "7 messages > max_messages 3"
    await cap.before_model_request(ctx)
    assert len(ctx.events) == 1


def test_token_and_fraction_triggers() -> None:
    messages = [*start(), *read("r1", "a.py"), *read("r2", "a.py"), *end()]
    tokens = TokenCounter().count_messages(messages)
    assert DeduplicateFileReads(max_tokens=tokens).should_compact(ctx_for(messages)) is None
    assert DeduplicateFileReads(max_tokens=tokens - 1).should_compact(ctx_for(messages)) is not None
    assert DeduplicateFileReads(max_fraction=0.5, context_window=tokens * 2 - 2).should_compact(
        ctx_for(messages)
    )
    with pytest.raises(CapabilityError, match="context_window"):
        DeduplicateFileReads(max_fraction=0.5).should_compact(ctx_for(messages))


# -- supersede_covered_ranges ----------------------------------------------------------------


def test_covered_ranges_need_a_built_in_shell_key() -> None:
    message = (
        "supersede_covered_ranges=True needs file_key='auto' or 'shell_cat' "
        "(line ranges are only known for the built-in shell reads)."
    )

    def no_key(call: ToolCallPart) -> str | None:
        return None

    keys: list[str | FileKey] = ["read_tool", no_key]
    for file_key in keys:
        with pytest.raises(ValueError) as info:
            DeduplicateFileReads(file_key, supersede_covered_ranges=True)
        assert str(info.value) == message
    assert DeduplicateFileReads("shell_cat", supersede_covered_ranges=True).supersede_covered_ranges


async def test_covered_ranges_are_off_by_default() -> None:
    messages = [
        *start(),
        *shell("s1", "sed -n '870,900p' a.py"),
        *shell("s2", "sed -n '850,920p' a.py"),
        *end(),
    ]
    ctx = await run(DeduplicateFileReads(), messages)
    assert ctx.events == []


async def test_a_later_covering_range_supersedes() -> None:
    messages = [
        *start(),
        *shell("s1", "sed -n '870,900p' a.py"),
        *shell("s2", "sed -n '870,900p' a.py"),
        *shell("s3", "sed -n '850,920p' a.py"),
        *shell("s4", "sed -n '860,880p' a.py"),  # not covered by anything later
        *end(),
    ]
    ctx = await run(DeduplicateFileReads(supersede_covered_ranges=True), messages)
    got = contents(ctx.messages)
    assert got["s1"] == pointer("a.py", "s3")  # its exact duplicate s2 is itself covered: point to s3
    assert got["s2"] == pointer("a.py", "s3")
    assert got["s3"] == TEXT
    assert got["s4"] == TEXT
    mark = harness_mark(ctx.messages[4].parts[0])
    assert mark is not None
    assert mark["superseded_by"] == "s3"
    assert mark["covering_key"] != mark["file_key"]


async def test_a_whole_file_read_covers_every_range_of_the_same_presentation() -> None:
    messages = [
        *start(),
        *shell("s1", "head -n 20 a.py"),
        *shell("s2", "sed -n '5,$p' a.py"),
        *shell("s3", "nl -ba a.py | sed -n '1,5p'"),  # other presentation: line numbers
        *shell("s4", "tail -n 5 a.py"),
        *shell("s5", "cat a.py"),
        *end(),
    ]
    ctx = await run(DeduplicateFileReads(supersede_covered_ranges=True), messages)
    got = contents(ctx.messages)
    assert got["s1"] == got["s2"] == got["s4"] == pointer("a.py", "s5")
    assert got["s3"] == TEXT
    assert got["s5"] == TEXT


async def test_a_partial_read_never_covers_a_whole_read() -> None:
    messages = [*start(), *shell("s1", "cat a.py"), *shell("s2", "sed -n '1,99999p' a.py"), *end()]
    ctx = await run(DeduplicateFileReads(supersede_covered_ranges=True), messages)
    assert ctx.events == []


@pytest.mark.parametrize(
    ("later", "earlier", "expected"),
    [
        ("all", "lines 3-9", True),
        ("all", "last 5", True),
        ("all", "all", True),
        ("lines 1-10", "all", False),
        ("lines 1-10", "lines 2-9", True),
        ("lines 1-10", "lines 1-10", True),
        ("lines 2-10", "lines 1-10", False),
        ("lines 1-9", "lines 1-10", False),
        ("lines 1-$", "lines 5-$", True),
        ("lines 5-$", "lines 1-$", False),
        ("lines 1-10", "lines 5-$", False),
        ("lines 1-$", "lines 5-10", True),
        ("last 10", "last 5", True),
        ("last 5", "last 10", False),
        ("last 10", "lines 1-2", False),
        ("lines 1-$", "last 3", False),
    ],
)
def test_selection_covers(later: str, earlier: str, expected: bool) -> None:
    from harness_dedupe_file_reads.keys import selection_covers

    assert selection_covers(later, earlier) is expected


# -- shells that keep their directory ------------------------------------------------------------


async def test_a_relative_read_is_not_superseded_across_a_directory_change() -> None:
    messages = [
        *start(),
        *shell("s1", "cat Cargo.toml"),
        *shell("cd", "cd crates/b", content=""),
        *shell("s2", "cat Cargo.toml"),  # another file in a persistent shell
        *end(),
    ]
    ctx = await run(DeduplicateFileReads(), messages)
    assert ctx.events == []


async def test_reads_on_the_same_side_of_a_directory_change_still_supersede() -> None:
    messages = [
        *start(),
        *shell("s1", "cat a.py"),
        *shell("x", "cd /tmp && make", content="built"),
        *shell("s2", "cat a.py"),
        *shell("s3", "cat a.py"),
        *shell("abs1", "cat /repo/a.py"),
        *shell("y", "cd ..", content=""),
        *shell("abs2", "cat /repo/a.py"),  # absolute paths do not depend on the directory
        *end(),
    ]
    ctx = await run(DeduplicateFileReads(), messages)
    got = contents(ctx.messages)
    assert got["s1"] == TEXT
    assert got["s2"] == pointer("a.py", "s3")
    assert got["abs1"] == pointer("/repo/a.py", "abs2")


async def test_fresh_shell_agents_can_supersede_across_cd_commands() -> None:
    messages = [
        *start(),
        *shell("s1", "cat a.py"),
        *shell("cd", "cd src", content=""),
        *shell("s2", "cat a.py"),
        *end(),
    ]
    ctx = await run(DeduplicateFileReads(shell_keeps_directory=False), messages)
    assert contents(ctx.messages)["s1"] == pointer("a.py", "s2")


async def test_read_tools_are_not_affected_by_shell_directory_changes() -> None:
    messages = [
        *start(),
        *read("r1", "a.py"),
        *shell("cd", "cd src", content=""),
        *read("r2", "a.py"),
        *end(),
    ]
    ctx = await run(DeduplicateFileReads(), messages)
    assert contents(ctx.messages)["r1"] == pointer("a.py", "r2")


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("cd src", True),
        ("cd", True),
        ("cd /testbed && python x.py", True),
        ("ls; cd ..", True),
        ("make || cd build", True),
        ("(cd sub && make)", True),  # a subshell does not really change it: refused conservatively
        ("pushd src", True),
        ("popd", True),
        ("echo cd src", False),
        ("cat cd.txt", False),
        ("abcd src", False),
        ("cat a.py", False),
    ],
)
def test_changes_directory(command: str, expected: bool) -> None:
    from harness_dedupe_file_reads.keys import changes_directory

    assert (
        changes_directory(ToolCallPart(tool_call_id="x", tool_name="bash", args={"command": command}))
        is expected
    )
    assert (
        changes_directory(ToolCallPart(tool_call_id="x", tool_name="python", args={"command": command}))
        is False
    )


# -- incremental passes ----------------------------------------------------------------------------


async def test_appended_messages_without_repeats_skip_the_full_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    cap = DeduplicateFileReads()
    full_passes: list[int] = []
    original = DeduplicateFileReads._full_plan  # pyright: ignore[reportPrivateUsage]

    def counting(self: DeduplicateFileReads, messages: Any, counter: Any) -> Any:
        full_passes.append(len(messages))
        return original(self, messages, counter)

    monkeypatch.setattr(DeduplicateFileReads, "_full_plan", counting)
    history = [*start(), *read("r1", "a.py")]
    ctx = ctx_for(history)
    await cap.before_model_request(ctx)
    assert full_passes == [3]
    for i, path in enumerate(["b.py", "c.py", "d.py"]):
        ctx.messages.extend(read(f"n{i}", path))
        await cap.before_model_request(ctx)
    assert full_passes == [3]  # only the appended messages were looked at
    ctx.messages.extend(read("r2", "a.py"))  # a repeat: superseded from the memo alone
    await cap.before_model_request(ctx)
    assert full_passes == [3]
    assert [e.cleared_tool_call_ids for e in ctx.events] == [("r1",)]
    ctx.messages.extend(read("n9", "e.py"))  # the memo follows the edited history
    await cap.before_model_request(ctx)
    assert full_passes == [3]
    ctx.messages[4] = CanonicalMessage.request(
        ToolReturnPart(tool_call_id="n0", tool_name="read_file", content="edited elsewhere")
    )
    ctx.messages.extend(read("n10", "f.py"))  # an edit in the remembered part: full pass
    await cap.before_model_request(ctx)
    assert full_passes == [3, 15]
    ctx.messages.extend(read("r3", "a.py"))
    await cap.before_model_request(ctx)
    assert full_passes == [3, 15]
    assert [e.cleared_tool_call_ids for e in ctx.events] == [("r1",), ("r2",)]


async def test_a_superseded_read_in_the_request_being_sent_is_handled_next_time() -> None:
    cap = DeduplicateFileReads()
    both = [
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="p1", tool_name="read_file", args={"path": "a.py"}),
            ToolCallPart(tool_call_id="p2", tool_name="read_file", args={"path": "a.py"}),
        ),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="p1", tool_name="read_file", content=TEXT),
            ToolReturnPart(tool_call_id="p2", tool_name="read_file", content=TEXT),
        ),
    ]
    ctx = ctx_for([*start(), *both])
    await cap.before_model_request(ctx)
    assert ctx.events == []
    ctx.messages.extend(read("n1", "b.py"))
    await cap.before_model_request(ctx)
    assert [e.cleared_tool_call_ids for e in ctx.events] == [("p1",)]


async def test_one_instance_on_two_histories() -> None:
    cap = DeduplicateFileReads()
    first = ctx_for([*start(), *read("r1", "a.py"), *read("r2", "a.py")])
    second = ctx_for([*start(), *read("x1", "a.py"), *read("x2", "b.py")])
    await cap.before_model_request(first)
    await cap.before_model_request(second)
    second.messages.extend(read("x3", "a.py"))
    await cap.before_model_request(second)
    first.messages.extend(read("r3", "a.py"))
    await cap.before_model_request(first)
    assert [e.cleared_tool_call_ids for e in first.events] == [("r1",), ("r2",)]
    assert [e.cleared_tool_call_ids for e in second.events] == [("x1",)]


async def test_a_read_kept_because_its_pointer_was_longer_is_retried_with_a_newer_read() -> None:
    long_id = "call_" + "x" * 300
    content = "tokens " * 20
    cap = DeduplicateFileReads(placeholder="{call_id}")
    ctx = ctx_for([*start(), *read("r1", "a.py", content), *read(long_id, "a.py", content), *end()])
    await cap.before_model_request(ctx)
    assert ctx.events == []  # the pointer (the long call id) is longer than the read
    ctx.messages.extend([*read("r3", "a.py", content), *end()])
    await cap.before_model_request(ctx)  # answered from the memo: r1 is retried, with r3 as target
    assert contents(ctx.messages) == {"r1": "r3", long_id: "r3", "r3": content}
    fresh = ctx_for([*start(), *read("r1", "a.py", content), *read(long_id, "a.py", content), *end()])
    fresh.messages.extend([*read("r3", "a.py", content), *end()])
    await DeduplicateFileReads(placeholder="{call_id}").before_model_request(fresh)
    assert fresh.messages == ctx.messages
