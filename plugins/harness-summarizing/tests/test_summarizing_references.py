"""SummarizingCompaction and ``ctx.references`` (set by a recall capability such as harness-recall)."""

from __future__ import annotations

from harness_summarizing import SummarizingCompaction, find_summary_parts, summary_text

from harness.capabilities import RequestContext
from harness.core import CanonicalMessage, Part, ToolCallPart, ToolReturnPart, UserPromptPart, harness_mark
from harness.tokens import TokenCounter

HEADER = (
    "[Summary of the earlier conversation: {count} messages were compacted into this summary. "
    "Continue the task from where it left off.]"
)


def steps(start: int, count: int) -> list[CanonicalMessage]:
    messages: list[CanonicalMessage] = []
    for i in range(start, start + count):
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"c{i}", tool_name="read_file", args={"path": f"f{i}.py"})
            )
        )
        messages.append(
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=f"c{i}", tool_name="read_file", content=f"file {i} " + "x" * 80)
            )
        )
    return messages


class Seqs:
    """A stand-in for recall's references: ``r<n>`` for the n-th message ever seen (a log)."""

    def __init__(self) -> None:
        self.seq: dict[int, int] = {}
        self.parts: list[Part | None] = []

    def log(self, messages: list[CanonicalMessage]) -> None:
        for message in messages:
            self.seq.setdefault(id(message), len(self.seq))

    def __call__(self, message: CanonicalMessage, part: Part | None = None) -> str | None:
        self.parts.append(part)
        seq = self.seq.get(id(message))
        return None if seq is None else f"r{seq}"


def summary_of(messages: list[CanonicalMessage]) -> UserPromptPart:
    (found,) = find_summary_parts(messages)
    part = messages[found[0]].parts[found[1]]
    assert isinstance(part, UserPromptPart)
    return part


async def compacted(messages: list[CanonicalMessage], references: Seqs | None) -> list[CanonicalMessage]:
    return (await compacting(messages, references)).messages


async def compacting(messages: list[CanonicalMessage], references: Seqs | None) -> RequestContext:
    cap = SummarizingCompaction(keep_messages=4, summarizer="digest")
    ctx = RequestContext(messages=list(messages), token_counter=TokenCounter(), references=references)
    await cap.compact(ctx, reason="test")
    return ctx


async def test_without_references_the_header_and_mark_are_unchanged() -> None:
    messages = [CanonicalMessage.user("task"), *steps(0, 6), CanonicalMessage.user("go on")]
    summary = summary_of(await compacted(messages, None))
    mark = harness_mark(summary)
    assert mark is not None
    assert "recall_first" not in mark
    assert summary.text.startswith(HEADER.format(count=9) + "\n\n")
    assert summary.text[len(HEADER.format(count=9)) + 2 :] == summary_text(summary)


async def test_the_header_names_the_summarized_range_and_the_next_summary_extends_it() -> None:
    seqs = Seqs()
    messages = [CanonicalMessage.user("task"), *steps(0, 6), CanonicalMessage.user("go on")]
    seqs.log(messages)
    once = await compacted(messages, seqs)
    summary = summary_of(once)
    first_line = summary.text.split("\n", 1)[0]
    assert first_line == HEADER.format(count=9) + " [recall: r0-r8]"  # messages 0..8 were summarized
    assert summary_text(summary).startswith("Structural digest")  # the offset still skips the header
    assert harness_mark(summary)["recall_first"] == "r0"  # pyright: ignore[reportOptionalSubscript]
    assert set(seqs.parts) == {None}  # message references only
    grown = [*once, *steps(6, 4), CanonicalMessage.user("more")]
    seqs.log(grown)
    ctx = await compacting(grown, seqs)
    twice = summary_of(ctx.messages)
    # the new summary covers everything from r0 (kept in the mark) to the last message summarized
    cut = int(ctx.events[0].details["cut"])
    assert twice.text.split("\n", 1)[0].endswith(f" [recall: r0-r{seqs.seq[id(grown[cut - 1])]}]")
    assert seqs.seq[id(grown[0])] != 0  # the range's start came from the previous summary's mark


async def test_no_reference_for_any_summarized_message_keeps_the_plain_header() -> None:
    messages = [CanonicalMessage.user("task"), *steps(0, 6), CanonicalMessage.user("go on")]
    summary = summary_of(await compacted(messages, Seqs()))  # knows no message
    assert summary.text.startswith(HEADER.format(count=9) + "\n\n")
    assert "recall_first" not in (harness_mark(summary) or {})
