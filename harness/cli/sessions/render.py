"""How ``harness sessions`` shows a stored session: heads as JSON, messages in one line, compaction marks.

* :func:`head_json`: a :class:`~harness.session.records.SessionHead` as the JSON object of
  ``list``, ``show``, ``fork`` and ``import``.
* :func:`message_lines`: a message as short lines, one per part (``user: ...``, ``→ tool(...)``).
* :func:`log_marks`: for each log message, what the session's edits did to it: which
  compaction replaced it at which revision, and which overlay was made from it
  (:func:`responsible` names the capability among an edit's events).
"""

from __future__ import annotations

__all__ = [
    "FIRST_PROMPT_WIDTH",
    "LogMark",
    "decode_bodies",
    "first_prompt",
    "head_json",
    "log_marks",
    "message_lines",
    "plural",
    "responsible",
    "when",
]

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from harness.core.messages import (
    CanonicalMessage,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownPart,
    UserPromptPart,
)
from harness.session.records import EditRecord, SessionHead
from harness.session.tracking import decode_bodies


def plural(count: int, word: str) -> str:
    """``"1 session"``, ``"3 sessions"``."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def when(moment: datetime) -> str:
    """A timestamp for a table: local time, to the second."""
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def head_json(head: SessionHead, *, path: str | None = None) -> dict[str, Any]:
    """A session head as a JSON object (``messages`` is the view's length, as in earlier releases)."""
    return {
        "session_id": head.session_id,
        "created_at": head.created_at.isoformat(),
        "last_modified": head.last_modified.isoformat(),
        "messages": head.view_length,
        "log_length": head.log_length,
        "revision": head.revision,
        "model": head.current_model,
        "forked_from": head.forked_from,
        "forked_at": head.forked_at,
        "log_pruned": head.log_pruned,
        "total_tokens": head.total_tokens,
        "project_id": head.project_id,
        "working_directory": head.working_directory,
        "path": path,
        "original_query": head.original_query,
    }


FIRST_PROMPT_WIDTH = 48
"""How many characters of a session's first prompt ``sessions list`` shows."""


def first_prompt(head: SessionHead, width: int = FIRST_PROMPT_WIDTH) -> str | None:
    """The task's first prompt on one line, clipped to ``width`` characters (``None`` when unknown)."""
    if not head.original_query:
        return None
    return _clip(head.original_query, width)


def _clip(text: str, width: int | None) -> str:
    flat = " ".join(text.split())
    if width is None or len(flat) <= width:
        return flat
    return flat[: max(width - 1, 1)] + "…"


def _content(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)


def message_lines(message: CanonicalMessage, *, width: int | None = 160) -> list[str]:
    """One line per part of ``message``, clipped to ``width`` characters (``None``: whole)."""
    lines: list[str] = []
    for part in message.parts:
        if isinstance(part, UserPromptPart):
            lines.append("user: " + _clip(part.text, width))
        elif isinstance(part, SystemPromptPart):
            lines.append("system: " + _clip(part.content, width))
        elif isinstance(part, TextPart):
            lines.append("assistant: " + _clip(part.content, width))
        elif isinstance(part, ThoughtPart):
            lines.append("thinking: " + _clip(part.content, width))
        elif isinstance(part, ToolCallPart):
            try:
                args = ", ".join(f"{k}={v!r}" for k, v in part.args_as_dict().items())
            except ValueError:
                args = _content(part.args)
            lines.append("→ " + _clip(f"{part.tool_name}({args})", width))
        elif isinstance(part, ToolReturnPart):
            lines.append(f"← {part.tool_name or 'tool'}: " + _clip(_content(part.content), width))
        elif isinstance(part, RetryPromptPart):
            lines.append(
                f"retry {part.tool_name or ''}: ".replace(" :", ":") + _clip(_content(part.content), width)
            )
        elif isinstance(part, UnknownPart):  # pyright: ignore[reportUnnecessaryIsInstance]
            lines.append(f"{part.kind}: " + _clip(_content(dict(part.data)), width))
    return lines or [f"({message.kind} with no parts)"]


def _is_rollup(event: Mapping[str, Any]) -> bool:
    details = event.get("details")
    return isinstance(details, Mapping) and isinstance(details.get("tiers"), list | tuple)  # pyright: ignore[reportUnknownMemberType]


def _name(event: Mapping[str, Any]) -> str | None:
    name = event.get("strategy") or event.get("capability")
    return name if isinstance(name, str) else None


def _ids(event: Mapping[str, Any]) -> set[str]:
    found: set[str] = set()
    for key in ("cleared_tool_call_ids", "removed_tool_call_ids"):
        value = event.get(key)
        if isinstance(value, list | tuple):
            found.update(item for item in value if isinstance(item, str))  # pyright: ignore[reportUnknownVariableType]
    return found


def _shrank(event: Mapping[str, Any]) -> bool:
    before, after = event.get("messages_before"), event.get("messages_after")
    return isinstance(before, int) and isinstance(after, int) and after < before


def responsible(
    events: Sequence[Mapping[str, Any]], call_ids: frozenset[str]
) -> tuple[list[str], list[str], list[str]]:
    """Which of an edit's events touched a message with ``call_ids``: ``(names, via, reasons)``.

    An event that cleared or removed one of the message's tool calls names it; a message
    with no matching call (a prompt folded into a summary) is put on the events that
    removed messages, else on every event. A roll-up event (``tiered``'s escalation,
    whose ``details`` list its ``tiers``) is named as ``via``, not as the editor.
    """
    edits = [event for event in events if not _is_rollup(event)]
    rollups = [event for event in events if _is_rollup(event)]
    chosen = [event for event in edits if call_ids and _ids(event) & call_ids]
    if not chosen:
        chosen = [event for event in edits if _shrank(event)] or edits
    if not chosen:
        chosen, rollups = rollups, []
    names = list(dict.fromkeys(name for name in map(_name, chosen) if name))
    via = list(dict.fromkeys(name for name in map(_name, rollups) if name and name not in names))
    reasons = list(
        dict.fromkeys(r for r in (event.get("reason") for event in chosen) if isinstance(r, str) and r)
    )
    return names, via, reasons


@attrs.frozen
class LogMark:
    """What one edit did to one log message.

    Attributes:
        kind: ``"replaced"`` (the edit took it out of the view) or ``"overlay"`` (the edit
            wrote an overlay made from it).
        revision: The revision that wrote the edit.
        edit: The edit's index.
        by: The capabilities that made the change (empty: the run itself, e.g. a merge).
        via: Composite capabilities that ran them (``tiered``).
        reasons: Their reasons.
        position: For an overlay, its view position.
    """

    kind: str
    revision: int
    edit: int
    by: tuple[str, ...] = ()
    via: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    position: int | None = None

    def describe(self) -> str:
        """E.g. ``replaced by clear_tool_results (via tiered) at revision 42: 3,346 tokens > limit 2,400``."""
        who = ", ".join(self.by) if self.by else "the run itself"
        if self.via:
            who += f" (via {', '.join(self.via)})"
        why = f": {'; '.join(self.reasons)}" if self.reasons else ""
        if self.kind == "overlay":
            return (
                f"shown as an overlay at view position {self.position}, "
                f"written by {who} at revision {self.revision}"
            )
        return f"replaced by {who} at revision {self.revision}{why}"

    def as_json(self) -> dict[str, Any]:
        """The mark as a JSON object."""
        return {
            "kind": self.kind,
            "revision": self.revision,
            "edit": self.edit,
            "by": list(self.by),
            "via": list(self.via),
            "reasons": list(self.reasons),
            "position": self.position,
        }


def log_marks(
    edits: Sequence[EditRecord], call_ids: Mapping[int, frozenset[str]]
) -> dict[int, list[LogMark]]:
    """For each log ``seq`` an edit touched, the marks of those edits, oldest first.

    Args:
        edits: The session's edits.
        call_ids: The tool-call ids of each log message (to name the capability that
            cleared or removed it).
    """
    marks: dict[int, list[LogMark]] = {}
    empty: frozenset[str] = frozenset()
    for edit in edits:
        touched = [("replaced", seq, None) for seq in edit.replaced]
        touched += [("overlay", source, position) for position, source in edit.overlays if source is not None]
        for kind, seq, position in touched:
            names, via, reasons = responsible(edit.events, call_ids.get(seq, empty))
            mark = LogMark(
                kind, edit.revision, edit.index, tuple(names), tuple(via), tuple(reasons), position
            )
            marks.setdefault(seq, []).append(mark)
    return marks
