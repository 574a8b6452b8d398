"""DeduplicateFileReads and ``ctx.references`` (set by a recall capability such as harness-recall)."""

from __future__ import annotations

from harness_dedupe_file_reads import DeduplicateFileReads

from harness.capabilities import RequestContext
from harness.core import CanonicalMessage, Part, ToolCallPart, ToolReturnPart
from harness.tokens import TokenCounter

TEXT = "def f():\n    return 1\n" * 40


def reads(*paths: str) -> list[CanonicalMessage]:
    messages = [CanonicalMessage.user("task")]
    for i, path in enumerate(paths):
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"r{i}", tool_name="read_file", args={"path": path})
            )
        )
        messages.append(
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=f"r{i}", tool_name="read_file", content=f"{i}\n{TEXT}")
            )
        )
    messages.append(CanonicalMessage.user("next"))
    return messages


def pointer(path: str, call_id: str) -> str:
    return f"[superseded file read: see the later read of {path} (call {call_id})]"


class Names:
    """A stand-in for recall's references: ``log<position>.<part>`` of the original messages."""

    def __init__(self, original: list[CanonicalMessage], answer: str | None = "") -> None:
        self.index = {id(m): i for i, m in enumerate(original)}
        self.answer = answer

    def __call__(self, message: CanonicalMessage, part: Part | None = None) -> str | None:
        if self.answer is None:
            return None
        assert part is not None
        assert part in message.parts
        return f"log{self.index[id(message)]}.{message.parts.index(part)}"


async def contents(
    cap: DeduplicateFileReads, messages: list[CanonicalMessage], names: Names | None
) -> list[object]:
    ctx = RequestContext(messages=list(messages), token_counter=TokenCounter(), references=names)
    await cap.compact(ctx, reason="test")
    return [p.content for m in ctx.messages for p in m.parts if isinstance(p, ToolReturnPart)]


async def test_without_references_the_pointer_is_exactly_the_template() -> None:
    messages = reads("a.py", "b.py", "a.py")
    found = await contents(DeduplicateFileReads(), messages, None)
    assert found[0] == pointer("a.py", "r2")


async def test_references_are_appended_to_each_pointer() -> None:
    messages = reads("a.py", "a.py", "b.py", "a.py")
    found = await contents(DeduplicateFileReads(), messages, Names(messages))
    assert found[0] == pointer("a.py", "r3") + " [recall: log2.0]"
    assert found[1] == pointer("a.py", "r3") + " [recall: log4.0]"
    assert str(found[2]).startswith("2\n")
    assert str(found[3]).startswith("3\n")


async def test_a_reference_of_none_leaves_the_pointer_as_it_is() -> None:
    messages = reads("a.py", "a.py")
    found = await contents(DeduplicateFileReads(), messages, Names(messages, answer=None))
    assert found[0] == pointer("a.py", "r1")


async def test_appended_duplicates_get_references_too_and_plan_never_does() -> None:
    cap = DeduplicateFileReads()
    messages = reads("a.py", "b.py")
    names = Names(messages)
    first = RequestContext(messages=list(messages), token_counter=TokenCounter(), references=names)
    await cap.before_model_request(first)  # remembers the scan
    grown = [  # one more read of a.py, appended
        *first.messages,
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="r9", tool_name="read_file", args={"path": "a.py"})
        ),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="r9", tool_name="read_file", content=f"9\n{TEXT}")
        ),
    ]
    names.index.update({id(m): i for i, m in enumerate(grown)})
    ctx = RequestContext(messages=list(grown), token_counter=TokenCounter(), references=names)
    await cap.before_model_request(ctx)
    (superseded,) = ctx.messages[2].parts
    assert isinstance(superseded, ToolReturnPart)
    assert superseded.content == pointer("a.py", "r9") + " [recall: log2.0]"
    changes, _ids = DeduplicateFileReads().plan(grown, TokenCounter())
    planned = changes[2][0]
    assert isinstance(planned, ToolReturnPart)
    assert planned.content == pointer("a.py", "r9")
