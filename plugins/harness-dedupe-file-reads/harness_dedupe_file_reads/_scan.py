"""Helpers of :class:`~harness_dedupe_file_reads.DeduplicateFileReads`: reads, groups, the last pass."""

from __future__ import annotations

__all__ = ["Cached", "Memo", "Read", "applied", "groups", "is_cleared", "resolve_key"]

from collections.abc import Sequence

import attrs

from harness.core import CanonicalMessage, Part, ToolCallPart, ToolReturnPart, harness_mark
from harness.core import replace as evolve
from harness_dedupe_file_reads.keys import FILE_KEYS, FileKey, FileRead

# (message index, part index, call, key, read, supersession group, view group)
Read = tuple[int, int, ToolCallPart, str, "FileRead | None", str, "str | None"]
Cached = tuple[ToolCallPart, "str | None", "FileRead | None", bool]  # (call, key, read, changes cwd)


@attrs.define
class Memo:
    """What the last full pass learned, so appended messages can be checked alone.

    ``seen`` is the history as it was after that pass (and after its edits were applied);
    the other fields are the scan state at its end: the latest read of every group, and the
    earlier reads of a group that kept their content because a pointer would not have been
    shorter (or their metadata cannot be marked).
    """

    seen: list[CanonicalMessage]
    calls: dict[str, ToolCallPart]
    latest: dict[str, Read]
    failed: dict[str, list[Read]]
    views: set[str]
    epoch: int
    pinned: set[str] = attrs.field(factory=set[str])  # call ids with a pinned call or answer


def is_cleared(part: ToolReturnPart) -> bool:
    if part.metadata is None:  # the common case, without the Mapping check
        return False
    mark = harness_mark(part)
    return mark is not None and bool(mark.get("cleared"))


def groups(key: str, read: FileRead | None, epoch: int) -> tuple[str, str | None]:
    """The supersession group and the coverage view of a read.

    A relative shell path names another file once a persistent shell changed directory,
    so relative shell reads are grouped per directory epoch.
    """
    view = None if read is None else read.view
    if view is not None and read is not None and not read.path.startswith("/"):
        return f"{key}#{epoch}", f"{view}#{epoch}"
    return key, view


def applied(
    messages: Sequence[CanonicalMessage], changes: dict[int, dict[int, Part]]
) -> list[CanonicalMessage]:
    """A copy of ``messages`` with the planned part replacements applied."""
    new_messages = list(messages)
    for mi, replaced in changes.items():
        parts = list(messages[mi].parts)
        for pi, new_part in replaced.items():
            parts[pi] = new_part
        new_messages[mi] = evolve(messages[mi], parts=tuple(parts))
    return new_messages


def resolve_key(value: str | FileKey) -> FileKey:
    if isinstance(value, str):
        function = FILE_KEYS.get(value)
        if function is None:
            names = ", ".join(repr(name) for name in FILE_KEYS)
            raise ValueError(f"file_key must be a callable or one of {names}; got {value!r}.")
        return function
    if not callable(value):
        names = ", ".join(repr(name) for name in FILE_KEYS)
        raise ValueError(f"file_key must be a callable or one of {names}; got {value!r}.")
    return value
