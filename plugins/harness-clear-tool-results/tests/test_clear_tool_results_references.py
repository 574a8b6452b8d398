"""ClearToolResults and ``ctx.references`` (set by a recall capability such as harness-recall)."""

from __future__ import annotations

import json

from harness_clear_tool_results import CLEARED_ARGS_KEY, DEFAULT_PLACEHOLDER, ClearToolResults

from harness.capabilities import RequestContext
from harness.core import CanonicalMessage, Part, ToolCallPart, ToolReturnPart
from harness.tokens import TokenCounter

OUTPUT = "line of output\n" * 60


def history(steps: int) -> list[CanonicalMessage]:
    messages = [CanonicalMessage.user("task")]
    for i in range(steps):
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"c{i}", tool_name="bash", args={"command": f"ls {i} " * 20})
            )
        )
        messages.append(
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=f"c{i}", tool_name="bash", content=f"{i}: {OUTPUT}")
            )
        )
    messages.append(CanonicalMessage.user("next"))
    return messages


class Names:
    """A stand-in for recall's references: names a part by its message's position in ``original``."""

    def __init__(self, original: list[CanonicalMessage], *, none: bool = False) -> None:
        self.index = {id(m): i for i, m in enumerate(original)}
        self.none = none
        self.calls: list[tuple[int, Part | None]] = []

    def __call__(self, message: CanonicalMessage, part: Part | None = None) -> str | None:
        position = self.index[id(message)]
        self.calls.append((position, part))
        if self.none:
            return None
        suffix = "" if part is None else f".{message.parts.index(part)}"
        return f"r{position}{suffix}"


async def cleared(cap: ClearToolResults, messages: list[CanonicalMessage], names: Names | None) -> list[Part]:
    ctx = RequestContext(messages=list(messages), token_counter=TokenCounter(), references=names)
    await cap.compact(ctx, reason="test")
    return [p for m in ctx.messages for p in m.parts]


async def test_without_references_placeholders_are_exactly_the_placeholder() -> None:
    messages = history(4)
    parts = await cleared(ClearToolResults(max_messages=2, keep_pairs=1), messages, None)
    returns = [p for p in parts if isinstance(p, ToolReturnPart)]
    assert [r.content for r in returns[:3]] == [DEFAULT_PLACEHOLDER] * 3
    assert returns[3].content.startswith("3: ")


async def test_references_are_appended_to_each_placeholder() -> None:
    messages = history(4)
    names = Names(messages)
    parts = await cleared(ClearToolResults(max_messages=2, keep_pairs=1), messages, names)
    returns = [p for p in parts if isinstance(p, ToolReturnPart)]
    assert [r.content for r in returns[:3]] == [
        f"{DEFAULT_PLACEHOLDER} [recall: r2.0]",
        f"{DEFAULT_PLACEHOLDER} [recall: r4.0]",
        f"{DEFAULT_PLACEHOLDER} [recall: r6.0]",
    ]
    # asked with the original message and part, never with the placeholder
    assert [(position, part) for position, part in names.calls] == [
        (2, messages[2].parts[0]),
        (4, messages[4].parts[0]),
        (6, messages[6].parts[0]),
    ]


async def test_a_reference_of_none_leaves_the_placeholder_as_it_is() -> None:
    messages = history(3)
    parts = await cleared(
        ClearToolResults(max_messages=2, keep_pairs=0), messages, Names(messages, none=True)
    )
    returns = [p for p in parts if isinstance(p, ToolReturnPart)]
    assert [r.content for r in returns] == [DEFAULT_PLACEHOLDER] * 3


async def test_cleared_inputs_carry_the_call_reference() -> None:
    messages = history(3)
    cap = ClearToolResults(max_messages=2, keep_pairs=1, clear_tool_inputs=True)
    parts = await cleared(cap, messages, Names(messages))
    calls = [p for p in parts if isinstance(p, ToolCallPart)]
    assert calls[0].args == {CLEARED_ARGS_KEY: f"{DEFAULT_PLACEHOLDER} [recall: r1.0]"}
    assert json.dumps(calls[2].args).startswith('{"command": "ls 2')


async def test_decisions_remembered_without_references_are_not_reused_with_them() -> None:
    messages = history(4)
    cap = ClearToolResults(max_messages=2, keep_pairs=1)
    counter = TokenCounter()
    changes, _ids, _freed = cap.plan(messages, counter)  # a dry run remembers its decisions
    first = changes[2][0]
    assert isinstance(first, ToolReturnPart)
    assert first.content == DEFAULT_PLACEHOLDER
    ctx = RequestContext(messages=list(messages), token_counter=counter, references=Names(messages))
    await cap.compact(ctx, reason="test")
    returns = [p for m in ctx.messages for p in m.parts if isinstance(p, ToolReturnPart)]
    assert returns[0].content == f"{DEFAULT_PLACEHOLDER} [recall: r2.0]"
    assert returns[2].content == f"{DEFAULT_PLACEHOLDER} [recall: r6.0]"
