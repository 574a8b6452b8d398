"""ClampOversizedMessages on hand-built histories: the exact cut, what is exempt, the parameters."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

import pytest
from harness_clamp_oversized import MARK_KEY, MIN_LIMIT, ClampOversizedMessages, Recall, marker_text

from harness import is_pinned, pin
from harness.capabilities import RequestContext
from harness.core import (
    CanonicalMessage,
    RetryPromptPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    harness_mark,
    with_harness_mark,
)
from harness.history import check_invariants
from harness.testing import assert_plugin_valid
from harness.tokens import TokenCounter


def words(text: str) -> int:
    """A tokenizer that counts words, so every figure below can be checked by hand."""
    return len(text.split())


LINES = [f"l{i} b c d\n" for i in range(100)]  # 4 words each; 9 characters below l10, 10 from l10 on
TEXT = "".join(LINES)


def history(content: object, tool: str = "bash", prompt: str = "task") -> list[CanonicalMessage]:
    return [
        CanonicalMessage.user(prompt),
        CanonicalMessage.response(ToolCallPart(tool_call_id="c1", tool_name=tool, args={"command": "make"})),
        CanonicalMessage.request(ToolReturnPart(tool_call_id="c1", tool_name=tool, content=content)),
    ]


async def clamp(
    cap: ClampOversizedMessages,
    messages: Sequence[CanonicalMessage],
    counter: TokenCounter | None = None,
) -> RequestContext:
    ctx = RequestContext(messages=list(messages), token_counter=counter or TokenCounter(text_counter=words))
    await cap.before_model_request(ctx)
    assert check_invariants(ctx.messages) == []
    return ctx


def result_of(ctx: RequestContext, index: int = -1) -> ToolReturnPart:
    part = ctx.messages[index].parts[0]
    assert isinstance(part, ToolReturnPart)
    return part


# ------------------------------------------------------------------------------ the exact cut


async def test_the_cut_is_head_marker_tail_on_line_boundaries_worked_out_by_hand() -> None:
    # part = "bash" + 400 words + 1 framing token = 402. The marker below is 21 words, so the
    # marker alone costs 1 + 21 + 1 = 23 and leaves 64 - 23 = 41: the head gets int(41 * 0.6) = 24
    # words (6 lines), the tail 17 (4 whole lines, 16 words). 90 lines are cut: l6..l9 (4 x 9
    # characters) and l10..l95 (86 x 10), 896 characters, 360 words.
    ctx = await clamp(ClampOversizedMessages(max_tokens=64, min_saved_tokens=0), history(TEXT))
    part = result_of(ctx)
    marker = (
        "[... 360 tokens (90 lines, 896 characters) cut from the middle of this tool result; "
        "the full text was not kept]"
    )
    assert part.content == "".join(LINES[:6]) + marker + "\n" + "".join(LINES[96:])
    assert ctx.token_counter.count_part(part) == 63
    assert harness_mark(part) == {MARK_KEY: "clamp_oversized_messages", "original_tokens": 402}
    assert (part.tool_call_id, part.tool_name) == ("c1", "bash")
    [event] = ctx.events
    assert event.strategy == "clamp_oversized_messages"
    assert event.reason == "1 part over the token limit (largest 402 tokens)"
    assert event.cleared_tool_call_ids == ("c1",)
    assert event.details["clamped_results"] == 1
    assert event.details["clamped_prompts"] == 0
    assert event.details["saved_tokens"] == 402 - 63
    assert event.details["cut_tokens"] == 360
    assert event.details["parts"] == [
        {
            "message": 2,
            "part": 0,
            "kind": "tool result",
            "tool_call_id": "c1",
            "tokens_before": 402,
            "tokens_after": 63,
            "cut_lines": 90,
            "cut_chars": 896,
        }
    ]


async def test_head_fraction_moves_the_split() -> None:
    # 41 words to share: head_fraction=0 gives the tail 41 (10 lines), 1 gives the head 41.
    tail_only = result_of(await clamp(ClampOversizedMessages(max_tokens=64, head_fraction=0), history(TEXT)))
    assert isinstance(tail_only.content, str)
    assert tail_only.content.startswith("[... 360 tokens (90 lines, 890 characters) cut")
    assert tail_only.content.endswith("\n" + "".join(LINES[90:]))
    head_only = result_of(await clamp(ClampOversizedMessages(max_tokens=64, head_fraction=1), history(TEXT)))
    assert isinstance(head_only.content, str)
    assert head_only.content.startswith("".join(LINES[:10]) + "[... 360 tokens (90 lines, 900 characters)")
    assert head_only.content.endswith("the full text was not kept]")


async def test_a_single_enormous_line_is_cut_inside_the_line() -> None:
    line = " ".join(f"w{i}" for i in range(1000))  # 1000 words, no newline
    ctx = await clamp(ClampOversizedMessages(max_tokens=80), history(line))
    content = result_of(ctx).content
    assert isinstance(content, str)
    head, marker, tail = content.split("\n")
    assert line.startswith(head)
    assert line.endswith(tail)
    assert head
    assert tail
    assert marker.startswith("[... ")
    assert "(1 line, " in marker
    assert ctx.token_counter.count_part(result_of(ctx)) <= 80


async def test_real_tokens_the_result_is_at_or_under_the_limit_and_uses_it() -> None:
    lines = [f"line {i:04d}: compiling module_{i} with flags -O2 -Wall\n" for i in range(3000)]
    counter = TokenCounter()
    per_line = max(counter.count_text(line) for line in lines)
    tiny = await clamp(ClampOversizedMessages(max_tokens=64), history("".join(lines)), counter)
    assert counter.count_part(result_of(tiny)) <= 64  # not one line fits a side: cut inside lines
    for limit in (300, 2000, 8000):
        ctx = await clamp(ClampOversizedMessages(max_tokens=limit), history("".join(lines)), counter)
        part = result_of(ctx)
        assert isinstance(part.content, str)
        tokens = counter.count_part(part)
        assert limit - 2 * per_line - 4 <= tokens <= limit
        head, _, rest = part.content.partition("[... ")
        marker, _, tail = rest.partition("]\n")
        kept_head = head.count("\n")
        kept_tail = tail.count("\n")
        assert head == "".join(lines[:kept_head])
        assert tail == "".join(lines[len(lines) - kept_tail :])
        middle = "".join(lines[kept_head : len(lines) - kept_tail])
        assert "[... " + marker + "]" == marker_text(
            what="tool result",
            cut_tokens=counter.count_text(middle),
            cut_lines=len(lines) - kept_head - kept_tail,
            cut_chars=len(middle),
            offset=len(head),
            recall=Recall(),
        )
        head_tokens, tail_tokens = counter.count_text(head), counter.count_text(tail)
        assert abs(head_tokens - 0.6 * (head_tokens + tail_tokens)) <= per_line


def test_marker_wordings() -> None:
    def marker(recall: Recall) -> str:
        return marker_text(
            what="tool result", cut_tokens=1, cut_lines=1, cut_chars=1200, offset=5120, recall=recall
        )

    assert marker(Recall(reference="r12.0")) == (
        "[... 1 token (1 line, 1,200 characters) cut from the middle of this tool result; "
        'recall("r12.0", offset=5120) reads them]'
    )
    assert marker(Recall(reference="r3.1", offsets=False)).endswith('recall("r3.1") reads them]')
    assert marker(Recall(stored=True)).endswith("; the full text is in this session's stored log]")
    assert marker(Recall()).endswith("; the full text was not kept]")


# ------------------------------------------------------------------------------ what is clamped


async def test_parts_under_the_limit_and_small_savings_are_left_alone() -> None:
    small = history("".join(LINES[:10]))  # 42 tokens
    ctx = await clamp(ClampOversizedMessages(max_tokens=64), small)
    assert ctx.messages == small
    assert ctx.events == []
    # 402 tokens cut to 63 saves 339: not enough for min_saved_tokens=400
    ctx = await clamp(ClampOversizedMessages(max_tokens=64, min_saved_tokens=400), history(TEXT))
    assert ctx.messages == history(TEXT)
    assert ctx.events == []


async def test_per_tool_limits_and_never() -> None:
    cap = ClampOversizedMessages(max_tokens=64, per_tool={"bash": 200, "read_file": None})
    assert cap.limit_for("bash") == 200
    assert cap.limit_for("read_file") is None
    assert cap.limit_for("grep") == 64
    assert cap.limit_for("recall") is None  # harness-recall's tools page their own answers
    assert ClampOversizedMessages(per_tool={"recall": 900}).limit_for("recall") == 900
    bash = await clamp(cap, history(TEXT, "bash"))
    assert 150 < bash.token_counter.count_part(result_of(bash)) <= 200
    read = await clamp(cap, history(TEXT, "read_file"))
    assert result_of(read).content == TEXT
    assert read.events == []
    grep = await clamp(cap, history(TEXT, "grep"))
    assert grep.token_counter.count_part(result_of(grep)) <= 64


async def test_a_return_without_a_tool_name_uses_its_calls_name() -> None:
    messages = history(TEXT, "read_file")
    messages[2] = CanonicalMessage.request(ToolReturnPart(tool_call_id="c1", tool_name=None, content=TEXT))
    ctx = await clamp(ClampOversizedMessages(max_tokens=64, per_tool={"read_file": None}), messages)
    assert ctx.events == []


async def test_pinned_marked_structured_and_retry_parts_are_never_clamped() -> None:
    cap = ClampOversizedMessages(max_tokens=64)
    pinned = history(TEXT)
    pinned[2] = pin(pinned[2], "user")
    ctx = await clamp(cap, pinned)
    assert ctx.messages == pinned
    assert is_pinned(result_of(ctx))
    marked = history(TEXT)
    marked[2] = CanonicalMessage.request(
        with_harness_mark(ToolReturnPart(tool_call_id="c1", tool_name="bash", content=TEXT), summary="x")
    )
    assert (await clamp(cap, marked)).events == []
    structured = history({"stdout": TEXT})
    assert (await clamp(cap, structured)).events == []
    retry = history(TEXT)
    retry[2] = CanonicalMessage.request(RetryPromptPart(TEXT, tool_name="bash", tool_call_id="c1"))
    assert (await clamp(cap, retry)).events == []


async def test_a_clamped_part_is_never_clamped_again() -> None:
    cap = ClampOversizedMessages(max_tokens=64)
    first = await clamp(cap, history(TEXT))
    clamped = first.messages
    again = await clamp(cap, clamped)
    assert again.events == []
    assert again.messages == clamped
    fresh = await clamp(ClampOversizedMessages(max_tokens=64), clamped)  # no memo: the mark decides
    assert fresh.events == []
    assert fresh.messages == clamped
    tighter = await clamp(ClampOversizedMessages(max_tokens=64, per_tool={"bash": MIN_LIMIT}), clamped)
    assert tighter.events == []


# ------------------------------------------------------------------------------ prompts


def prompt_history(*prompts: str) -> list[CanonicalMessage]:
    messages: list[CanonicalMessage] = []
    for i, text in enumerate(prompts):
        if messages:
            messages.append(
                CanonicalMessage.response(ToolCallPart(tool_call_id=f"c{i}", tool_name="bash", args={}))
            )
            messages.append(
                CanonicalMessage.request(
                    ToolReturnPart(tool_call_id=f"c{i}", tool_name="bash", content="ok"), UserPromptPart(text)
                )
            )
        else:
            messages.append(CanonicalMessage.user(text))
    return messages


def prompt_of(message: CanonicalMessage) -> UserPromptPart:
    return next(p for p in message.parts if isinstance(p, UserPromptPart))


async def test_the_newest_prompt_is_exempt_until_a_newer_one_arrives() -> None:
    cap = ClampOversizedMessages(max_tokens=64)
    ctx = await clamp(cap, prompt_history(TEXT))
    assert ctx.events == []
    assert prompt_of(ctx.messages[0]).content == TEXT
    # the tool loop goes on: the prompt is still the newest
    loop = [
        *ctx.messages,
        CanonicalMessage.response(ToolCallPart(tool_call_id="x", tool_name="bash", args={})),
    ]
    loop.append(CanonicalMessage.request(ToolReturnPart(tool_call_id="x", tool_name="bash", content="ok")))
    ctx = await clamp(cap, loop)
    assert ctx.events == []
    # a newer prompt: the old one is clamped (once), the new one is exempt
    later = [
        *ctx.messages,
        CanonicalMessage.response(ToolCallPart(tool_call_id="y", tool_name="bash", args={})),
    ]
    later.append(
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="y", tool_name="bash", content="ok"), UserPromptPart(TEXT)
        )
    )
    ctx = await clamp(cap, later)
    old, new = prompt_of(ctx.messages[0]), prompt_of(ctx.messages[-1])
    assert isinstance(old.content, str)
    assert "cut from the middle of this prompt" in old.content
    assert ctx.token_counter.count_part(old) <= 64
    assert new.content == TEXT
    assert ctx.events[0].details["clamped_prompts"] == 1
    assert ctx.events[0].cleared_tool_call_ids == ()


async def test_clamp_latest_prompt_and_prompts_false() -> None:
    latest = await clamp(
        ClampOversizedMessages(max_tokens=64, clamp_latest_prompt=True), prompt_history(TEXT)
    )
    assert latest.token_counter.count_part(prompt_of(latest.messages[0])) <= 64
    off = await clamp(ClampOversizedMessages(max_tokens=64, prompts=False), prompt_history(TEXT, "next"))
    assert off.events == []


async def test_a_multimodal_prompt_has_only_its_largest_text_item_clamped() -> None:
    image = {"kind": "image-url", "url": "https://example.com/a.png"}
    items = ("short note", image, {"kind": "text", "content": TEXT})
    messages = [CanonicalMessage.request(UserPromptPart(items)), *prompt_history("x", "next")[1:]]
    ctx = await clamp(ClampOversizedMessages(max_tokens=200), messages)
    part = prompt_of(ctx.messages[0])
    assert not isinstance(part.content, str)
    assert part.content[:2] == ("short note", image)
    clamped = part.content[2]
    assert isinstance(clamped, Mapping)
    item = cast("Mapping[str, object]", clamped)
    assert set(item) == {"kind", "content"}
    assert item["kind"] == "text"
    assert str(item["content"]).startswith(LINES[0])
    assert ctx.token_counter.count_part(part) <= 200  # 85 of them are the image's


def test_describe() -> None:
    cap = ClampOversizedMessages(max_tokens=2000, per_tool={"bash": 4000, "read_file": None})
    assert cap.describe() == (
        "clamp_oversized_messages: tool results and user prompts over 2,000 tokens "
        "(bash: 4,000, read_file: never) keeping 60% head + 40% tail"
    )


# ------------------------------------------------------------------------------ parameters


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_tokens": 10}, "max_tokens must be at least 64 tokens"),
        ({"max_tokens": "many"}, "max_tokens must be an integer number of tokens, got 'many'"),
        ({"max_tokens": True}, "max_tokens must be an integer"),
        ({"head_fraction": 1.5}, "head_fraction must be between 0 and 1, got 1.5"),
        ({"head_fraction": "half"}, "head_fraction must be a number between 0 and 1"),
        ({"prompts": "yes"}, "prompts must be True or False, got 'yes'"),
        ({"clamp_latest_prompt": 1}, "clamp_latest_prompt must be True or False"),
        ({"min_saved_tokens": -1}, "min_saved_tokens must be 0 or more, got -1"),
        ({"per_tool": {"bash": 5}}, "per_tool['bash'] must be at least 64 tokens"),
        ({"per_tool": {"": 500}}, "per_tool keys must be tool names"),
        ({"per_tool": {"bash": "lots"}}, "per_tool['bash'] must be a token limit or none, got 'lots'"),
        ({"per_tool": ["bash"]}, "per_tool items must be 'tool:limit'"),
        ({"per_tool": 12}, "per_tool must map tool names to token limits"),
    ],
)
def test_bad_parameters_name_the_parameter(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("[", r"\[").replace("(", r"\(")):
        ClampOversizedMessages(**kwargs)  # pyright: ignore[reportArgumentType]


def test_per_tool_accepts_stack_string_items() -> None:
    cap = ClampOversizedMessages(per_tool=["bash:4000", "read_file:none", "grep: 2_000"])
    assert dict(cap.per_tool) == {"bash": 4000, "read_file": None, "grep": 2000}
    assert dict(ClampOversizedMessages(per_tool="bash:500").per_tool) == {"bash": 500}


def test_the_plugin_is_well_formed() -> None:
    assert_plugin_valid(ClampOversizedMessages)
    assert_plugin_valid(ClampOversizedMessages(max_tokens=2000))
