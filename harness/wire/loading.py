"""Reading a history in any accepted format: :func:`load_history` and :func:`read_history`.

The steps: :mod:`harness.wire.sources` reads and parses the data (a file, standard input,
bytes or text; gzip, bzip2 or xz; JSON or JSON Lines), :mod:`harness.wire.records` finds
the messages (a list, a request body, transcript records), :mod:`harness.wire.detect`
tells the format unless it is given, and the format's reader converts the messages:
:func:`~harness.wire.load_messages`'s for ``pydantic-ai``,
:func:`~harness.wire.messages_from_openai`'s and :func:`~harness.wire.messages_from_anthropic`'s
for the others. Part of :mod:`harness.wire`; import the public API from there.
"""

from __future__ import annotations

__all__ = [
    "FORMAT_CHOICES",
    "FormatChoice",
    "LoadedHistory",
    "history_from_document",
    "load_history",
    "read_history",
]

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, TypeAlias, cast

import attrs

from harness.core.messages import CanonicalMessage, history_repr
from harness.errors import WireFormatError
from harness.wire.anthropic_messages import add_anthropic_message, system_parts
from harness.wire.detect import ACCEPTED_FORMATS, classify
from harness.wire.document import load_items
from harness.wire.foreign import HISTORY_FORMATS, HistoryFormat, TurnBuilder, is_mapping, located
from harness.wire.openai_chat import add_openai_message
from harness.wire.records import Entry, document_messages, entries_of
from harness.wire.sources import Source, SourceDocument, read_document

FormatChoice: TypeAlias = Literal["auto", "pydantic-ai", "openai", "anthropic"]
"""What ``format=`` (and ``--format``) accepts: a :data:`~harness.wire.HistoryFormat` or ``"auto"``."""

FORMAT_CHOICES: Final[tuple[FormatChoice, ...]] = ("auto", *HISTORY_FORMATS)
"""Every :data:`FormatChoice`, ``"auto"`` first."""


@attrs.frozen
class LoadedHistory:
    """A history read by :func:`read_history`, with what was found out reading it.

    Attributes:
        messages: The canonical messages.
        format: The format the messages were read as (detected, or the one given).
        skipped: Transcript records that hold no message, counted by their ``type``
            (and ``"sidechain"`` for skipped sub-agent turns); empty for other documents.
        source: Where it came from: the path, ``"<stdin>"``, ``"<bytes>"``, ``"<text>"``
            or ``"<parsed>"``.
        json_lines: Whether the document was JSON Lines.
        compression: ``"gzip"``, ``"bzip2"`` or ``"xz"`` when it was compressed.
    """

    messages: list[CanonicalMessage] = attrs.field(repr=history_repr)
    format: HistoryFormat
    skipped: Mapping[str, int] = attrs.field(factory=dict[str, int])
    source: str = "<parsed>"
    json_lines: bool = False
    compression: str | None = None

    @property
    def skipped_total(self) -> int:
        """How many records were skipped."""
        return sum(self.skipped.values())


def _check_lines(items: Sequence[Any], document: SourceDocument) -> None:
    """A JSON Lines history holds one message or record per line, not a conversation per line."""
    for index, item in enumerate(items):
        line = document.line_of(index)
        if isinstance(item, list):
            raise WireFormatError(
                "holds a JSON array: a JSON Lines history holds one message or record per line",
                message_index=index,
                line=line,
            )
        if is_mapping(item) and isinstance(cast("Mapping[str, Any]", item).get("messages"), list):
            raise WireFormatError(
                "holds a whole conversation (an object with 'messages'): this file is a data set of "
                "conversations, one per line, not one history; read each line on its own",
                message_index=index,
                line=line,
            )


def _load_pydantic_ai(entries: Sequence[Entry], document: SourceDocument) -> list[CanonicalMessage]:
    try:
        return load_items([entry.message for entry in entries], None)
    except WireFormatError as exc:
        index = exc.message_index
        position = entries[index].index if index is not None and index < len(entries) else index
        line = document.line_of(position) if position is not None else None
        raise located(
            WireFormatError(exc.reason, part_index=exc.part_index, field=exc.field),
            format="pydantic-ai",
            message_index=position,
            line=line,
        ) from exc


def _load_chat(
    entries: Sequence[Entry], system: object, chosen: HistoryFormat, document: SourceDocument
) -> list[CanonicalMessage]:
    builder = TurnBuilder()
    try:
        prompt = system_parts(system)
    except WireFormatError as exc:
        raise located(exc, format=chosen) from exc
    if prompt:
        builder.add("request", prompt)
    pending: dict[str, str] = {}
    for entry in entries:
        try:
            if chosen == "openai":
                add_openai_message(
                    builder, entry.message, pending=pending, slots=entry.slots, record_rest=entry.record_rest
                )
            else:
                add_anthropic_message(
                    builder, entry.message, slots=entry.slots, record_rest=entry.record_rest
                )
        except WireFormatError as exc:
            raise located(
                exc, format=chosen, message_index=entry.index, line=document.line_of(entry.index)
            ) from exc
    return builder.build()


def history_from_document(document: SourceDocument | Any, *, format: FormatChoice = "auto") -> LoadedHistory:
    """Read a parsed document as a history.

    Args:
        document: A :class:`~harness.wire.SourceDocument`, or parsed JSON (a list of
            messages or records, an object with a ``messages`` list, one message).
        format: The format to read, or ``"auto"`` to detect it.

    Returns:
        The history and what was found out reading it.

    Raises:
        WireFormatError: ``format`` is not a :data:`FormatChoice`; the document is not a
            history in the format (or in any accepted format); or a message is invalid.
            The error names the format, the message index, the line of a JSON Lines file,
            the part and the field.
    """
    if format not in FORMAT_CHOICES:
        raise WireFormatError(f"unknown format {format!r}; choose one of {', '.join(FORMAT_CHOICES)}")
    if not isinstance(document, SourceDocument):
        document = SourceDocument(document, "<parsed>")
    items, system = document_messages(document.value)
    if document.json_lines:
        _check_lines(items, document)
    if format == "pydantic-ai":
        entries, skipped = [Entry(index, item) for index, item in enumerate(items)], Counter[str]()
    else:
        entries, skipped = entries_of(items, lines=document.lines)
    chosen: HistoryFormat = classify(entries, lines=document.lines) if format == "auto" else format
    if format == "auto" and chosen == "openai" and system is not None:
        chosen = "anthropic"  # only the Messages API has a top-level system
    if chosen == "pydantic-ai":
        if system is not None:
            raise WireFormatError(
                "a top-level 'system' belongs to a Messages API request: read it as 'anthropic'",
                format="pydantic-ai",
                field="system",
            )
        messages = _load_pydantic_ai(entries, document)
    else:
        messages = _load_chat(entries, system, chosen, document)
    if not messages and skipped:
        counts = ", ".join(f"{kind}: {count}" for kind, count in sorted(skipped.items()))
        raise WireFormatError(f"no message found, only records without one ({counts}); {ACCEPTED_FORMATS}")
    return LoadedHistory(
        messages,
        chosen,
        dict(skipped),
        document.name,
        json_lines=document.json_lines,
        compression=document.compression,
    )


def read_history(source: Source, *, format: FormatChoice = "auto") -> LoadedHistory:
    """Read a history from ``source`` in any accepted format, and say what it was.

    Args:
        source: Bytes; text (a string starting with ``[`` or ``{``); a path, or a string
            naming one; ``"-"`` for standard input; or a binary file object. gzip, bzip2
            and xz data are decompressed; JSON Lines (one message or record per line) is
            read as well as JSON.
        format: ``"pydantic-ai"`` (harness's wire format), ``"openai"`` (Chat Completions
            messages), ``"anthropic"`` (Messages API messages, Claude Code transcripts), or
            ``"auto"`` to detect it.

    Returns:
        The history and what was found out reading it.

    Raises:
        OSError: A file cannot be read.
        WireFormatError: The data is not a history in the format (see
            :func:`history_from_document`).
    """
    return history_from_document(read_document(source), format=format)


def load_history(source: Source, *, format: FormatChoice = "auto") -> list[CanonicalMessage]:
    """The messages of a history in any accepted format (see :func:`read_history`).

    Example::

        from harness.wire import load_history

        messages = load_history("chat.json")  # OpenAI, Anthropic or pydantic-ai, detected
        messages = load_history("transcript.jsonl.gz", format="anthropic")  # Claude Code

    Raises:
        OSError: A file cannot be read.
        WireFormatError: The data is not a history in the format.
    """
    return read_history(source, format=format).messages
