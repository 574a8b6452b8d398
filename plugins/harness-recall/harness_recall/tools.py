"""What the ``recall`` and ``search_history`` tools answer, from a session's log.

Both raise :class:`~harness.ToolRetry` with a message saying what to fix (an unknown or
malformed reference, an offset past the end, a session that keeps no log), so a bad
call costs the model one retry prompt, never the run.
"""

from __future__ import annotations

__all__ = ["TOOL_NAMES", "read_reference", "search_log"]

from collections.abc import Iterator

from harness import Part, RetryPromptPart, Session, ToolCallPart, ToolRetry, ToolReturnPart
from harness_recall.log import LogReader
from harness_recall.refs import REF_FORMS, Ref, parse_ref
from harness_recall.render import describe_part, page, part_text, render_message

TOOL_NAMES: frozenset[str] = frozenset({"recall", "search_history"})
"""The tools :class:`~harness_recall.Recall` provides."""


def _reader(session: Session | None) -> LogReader:
    if session is None or session.store is None:
        raise ToolRetry(
            "recall is unavailable: this session is not kept in a session store, so nothing removed "
            "from the context can be read back",
            hint=False,
        )
    return LogReader(session)


def _clip_note(ref: Ref, start: int, end: int, total: int | None, next_offset: int | None) -> str:
    if next_offset is None:
        return ""
    of = f"{total:,}" if total is not None else "more"
    return f'\n[characters {start:,}-{end:,} of {of}; next: recall("{ref}", offset={next_offset})]'


def read_reference(session: Session | None, ref: str, offset: int = 0, *, max_chars: int) -> str:
    """The original content ``ref`` names, as text: ``max_chars`` characters from ``offset``.

    A part (``r12.3``, or a tool call id) is its content under a one-line header; a
    message or a range (``r12``, ``r10-r40``) is each logged message rendered with its
    parts' references. A clipped answer ends with the call that reads the next page.

    Raises:
        ToolRetry: No store, a malformed or unknown reference, or a bad ``offset``.
    """
    reader = _reader(session)
    try:
        parsed = parse_ref(ref)
    except ValueError as exc:
        raise ToolRetry(str(exc)) from None
    if offset < 0:
        raise ToolRetry(f"offset must be 0 or more, got {offset}")
    if parsed.kind == "call":
        assert parsed.call_id is not None
        found = reader.find_result(parsed.call_id)
        if found is None:
            raise ToolRetry(
                f"no result of a tool call with id {parsed.call_id!r} is in this session's log; "
                f"use a reference as written in a placeholder: {REF_FORMS}"
            )
        parsed = Ref("part", found[0], found[0], part=found[1])
    if parsed.kind == "part":
        return _read_part(reader, parsed, offset, max_chars)
    return _read_messages(reader, parsed, offset, max_chars)


def _read_part(reader: LogReader, ref: Ref, offset: int, max_chars: int) -> str:
    message = reader.message(ref.start)
    if message is None:
        raise ToolRetry(reader.missing(ref.start))
    assert ref.part is not None
    if ref.part >= len(message.parts):
        raise ToolRetry(
            f"r{ref.start} has {len(message.parts)} parts (r{ref.start}.0 to "
            f"r{ref.start}.{len(message.parts) - 1}); there is no r{ref.start}.{ref.part}"
        )
    part = message.parts[ref.part]
    text = part_text(part)
    total = len(text)
    if offset and offset >= total:
        raise ToolRetry(f"offset {offset} is past the end of {ref} ({total:,} characters)")
    body, next_offset, _ = page([text], offset, max_chars)
    end = offset + len(body)
    label = f"{ref} {describe_part(part)}"
    if offset or next_offset is not None:
        label += f", characters {offset:,}-{end:,} of {total:,}"
    return f"{label}:\n{body}{_clip_note(ref, offset, end, total, next_offset)}"


def _read_messages(reader: LogReader, ref: Ref, offset: int, max_chars: int) -> str:
    found: list[int] = []

    def chunks() -> Iterator[str]:
        for seq, message in reader.messages(ref.start, ref.stop):
            found.append(seq)
            yield render_message(seq, message)

    body, next_offset, total = page(chunks(), offset, max_chars)
    if not found:
        raise ToolRetry(reader.missing(ref.start))
    if not body:
        raise ToolRetry(f"offset {offset} is past the end of {ref} ({total or 0:,} characters)")
    end = offset + len(body)
    label = str(ref)
    if ref.kind == "range":
        complete = next_offset is not None or len(found) == ref.stop - ref.start + 1
        label += f" (log messages {ref.start} to {ref.stop}{'' if complete else ', some not in the log'})"
    if offset or next_offset is not None:
        label += f", characters {offset:,}-{end:,}"
    return f"{label}:\n{body}{_clip_note(ref, offset, end, total, next_offset)}"


def _own(part: Part) -> bool:
    """A call of the recall tools, or its answer: what they showed is found where it came from."""
    name = getattr(part, "tool_name", None)
    return name in TOOL_NAMES and isinstance(part, ToolCallPart | ToolReturnPart | RetryPromptPart)


def _part_of_hit(reader: LogReader, seq: int, words: list[str]) -> tuple[str, str] | None:
    """The reference and label of the part of log message ``seq`` where a query word occurs.

    ``None`` when the message holds only calls of the recall tools and their answers.
    """
    message = reader.message(seq)
    if message is None:
        return f"r{seq}", "message"
    parts = [(index, part) for index, part in enumerate(message.parts) if not _own(part)]
    if not parts:
        return None
    for index, part in parts:
        text = part_text(part).lower()
        if any(word in text for word in words):
            return f"r{seq}.{index}", describe_part(part)
    return f"r{seq}", message.kind


def search_log(session: Session | None, query: str, limit: int, *, max_results: int) -> str:
    """The best ``limit`` matches of ``query`` in the session's raw log, with references and snippets.

    Uses the store's search (SQLite FTS5, PostgreSQL full-text, a plain scan for the
    file store): every word must occur; ``word*`` matches a prefix.

    Raises:
        ToolRetry: No store, an empty query, or ``limit`` below 1.
    """
    reader = _reader(session)
    words = [w.strip('"*').lower() for w in query.split() if w.strip('"*')]
    if not words:
        raise ToolRetry("query must hold at least one word to search for")
    if limit < 1:
        raise ToolRetry(f"limit must be at least 1, got {limit}")
    limit = min(limit, max_results)
    # Earlier recall answers match too; ask for more so that skipping them still fills the list.
    hits = reader.sync_store().search(query, session_id=reader.session_id, limit=2 * limit + 2)
    found: list[str] = []
    for hit in hits:
        located = _part_of_hit(reader, hit.seq, words)
        if located is None:
            continue
        ref, label = located
        found.append(f"- {ref} {label}: {' '.join(hit.snippet.split())}")
        if len(found) == limit:
            break
    if not found:
        return f"No message of this session's history matches {query!r}."
    count = f"{len(found)} match{'es' if len(found) != 1 else ''}"
    return "\n".join([f"{count} for {query!r}, best first (read one with recall(ref)):", *found])
