"""Continuity across compaction: anchors, the post-compaction receipt, pausing.

After the capabilities of a request edited the history (any
:class:`~harness.capabilities.context.CompactionEvent` reported), the run adds one
request-scoped note to that request, the first one the model sees after the compaction:

* **the receipt**: what was compacted (by which capability, how many messages, tool
  results cleared and calls removed, tokens freed) and how to get it back: ``recall``
  references when the session store's recall capability (``harness-recall``) is
  installed, else where the originals are kept;
* **the anchors** a compaction removed (:mod:`harness.history.anchors`): the task, the
  user's constraints, the instructions of the history and the latest plan, verbatim.
  An anchor the history still holds (the part, or its text in a summary) is not repeated.

``pause_after_compaction`` ends the run right after a compaction, before the compacted
request is sent, with ``RunResult.status == "paused_after_compaction"``; the compacted
history is saved. ``agent.run(None, session=...)`` sends the pending request (with the
note, kept in the session's metadata meanwhile), or a new prompt continues from there.
"""

from __future__ import annotations

__all__ = [
    "ANCHORS_KEY",
    "CONTINUITY_SOURCE",
    "PAUSED_NOTE_KEY",
    "Continuity",
    "ContinuitySettings",
    "anchors_text",
    "has_user_prompt",
    "receipt_text",
]

import re
from collections.abc import Collection, Sequence
from typing import Final, cast

import attrs

from harness.capabilities.context import CompactionEvent, RequestContext
from harness.core.messages import CanonicalMessage, Part, ToolReturnPart, UserPromptPart, harness_mark
from harness.history.anchors import Anchor, AnchorTracker
from harness.session import Session

CONTINUITY_SOURCE: Final = "continuity"
"""``source`` of the request-scoped note's harness mark."""

PAUSED_NOTE_KEY: Final = "harness.continuity.pending_note"
"""Session-metadata key holding the note of a request a paused run did not send yet."""

ANCHORS_KEY: Final = "harness.continuity.anchors"
"""Session-metadata key holding the anchors as ``[kind, text]`` pairs (each text bounded like a
re-sent one), saved at each compaction so a later run still knows what an earlier compaction
removed. The store writes the metadata only at a checkpoint that changed it."""

_SAVED_ANCHORS: Final = 64
"""At most this many anchors are kept in the session (the newest constraints win)."""


_SHOWN_REFS: Final = 5
_ANCHOR_CHARS: Final = 4_000
"""An anchor longer than this is re-sent, and saved in the session's metadata, as its head and
tail (a pasted log is not a task), so the saved anchors stay under 64 x 4,000 characters."""
_NOT_REPEATED: Final = re.compile(r"\n\[\.\.\. [\d,]+ characters not repeated \.\.\.\]\n")


@attrs.frozen
class ContinuitySettings:
    """How a run keeps the agent on track across compaction (the agent's arguments).

    Attributes:
        anchors: Re-send the anchors a compaction removed, request-scoped.
        receipt: Add the post-compaction receipt to the request after a compaction.
        pause_after_compaction: End the run after a compaction: ``True`` for any, or the
            names of the capabilities whose compactions pause (a capability with a truthy
            ``pause_after_compaction`` attribute pauses too).
        pin_anchors: Pin the first user prompt of a session (``harness.pin`` with reason
            ``"task"``) so no capability may drop or change it.
        plan_tools: Tool names whose calls write the plan, besides names holding
            ``todo`` or ``plan``.
    """

    anchors: bool = True
    receipt: bool = True
    pause_after_compaction: bool | frozenset[str] = False
    pin_anchors: bool = False
    plan_tools: frozenset[str] = frozenset()

    @classmethod
    def create(
        cls,
        *,
        anchors: bool = True,
        receipt: bool = True,
        pause_after_compaction: bool | Collection[str] = False,
        pin_anchors: bool = False,
        plan_tools: Collection[str] = (),
    ) -> ContinuitySettings:
        """Validate the agent's arguments.

        Raises:
            TypeError: ``pause_after_compaction`` is neither a bool nor a collection of
                capability names, or ``plan_tools`` holds a non-string.
        """
        pause: bool | frozenset[str]
        if isinstance(pause_after_compaction, bool):
            pause = pause_after_compaction
        elif isinstance(pause_after_compaction, str) or not all(
            isinstance(name, str)  # pyright: ignore[reportUnnecessaryIsInstance] - untyped callers
            for name in pause_after_compaction
        ):
            raise TypeError("pause_after_compaction must be a bool or a collection of capability names")
        else:
            pause = frozenset(pause_after_compaction)
        if isinstance(plan_tools, str) or not all(
            isinstance(name, str)  # pyright: ignore[reportUnnecessaryIsInstance] - untyped callers
            for name in plan_tools
        ):
            raise TypeError("plan_tools must be a collection of tool names")
        return cls(anchors, receipt, pause, pin_anchors, frozenset(plan_tools))


class Continuity:
    """The per-run continuity step (see the module docstring).

    Args:
        settings: The agent's continuity settings.
        session: The run's session (its metadata carries a paused run's note).
        capabilities: The run's capabilities (read for ``pause_after_compaction``).
    """

    def __init__(
        self, settings: ContinuitySettings, session: Session, capabilities: Sequence[object]
    ) -> None:
        self.settings = settings
        self.session = session
        self.tracker = AnchorTracker(plan_tools=settings.plan_tools)
        pause = settings.pause_after_compaction
        self._pause_all = pause is True
        names = set(pause) if isinstance(pause, frozenset) else set[str]()
        names.update(
            str(getattr(c, "name", type(c).__name__))
            for c in capabilities
            if getattr(c, "pause_after_compaction", False) is True
        )
        self._pause_names = frozenset(names)
        carried = session.metadata.pop(PAUSED_NOTE_KEY, None)
        self._carried = carried if isinstance(carried, str) else None
        if settings.anchors:
            self.tracker.remember(_saved_anchors(session.metadata.get(ANCHORS_KEY)))

    def before_capabilities(self, messages: Sequence[CanonicalMessage]) -> None:
        """Read what the history gained since the last request (the anchors' sources)."""
        if self.settings.anchors:
            self.tracker.update(messages)

    def after_capabilities(self, ctx: RequestContext) -> None:
        """Add the note to the request when the capabilities compacted it (or a paused run left one)."""
        if self._carried is not None:
            ctx.add_request_scoped(UserPromptPart(self._carried), source=CONTINUITY_SOURCE)
            self._carried = None
        events = [e for e in ctx.events if _compacts(e)]
        if not events:
            return
        sections: list[str] = []
        if self.settings.receipt:
            sections.append(receipt_text(events, ctx))
        if self.settings.anchors:
            missing = _missing(self.tracker.anchors(), ctx.messages, ctx.request_scoped)
            if missing:
                sections.append(anchors_text(missing))
            saved = [[kind, _bounded(text)] for kind, text in self.tracker.saved()[-_SAVED_ANCHORS:]]
            if self.session.metadata.get(ANCHORS_KEY) != saved:
                self.session.metadata[ANCHORS_KEY] = saved
        if sections:
            ctx.add_request_scoped(UserPromptPart("\n\n".join(sections)), source=CONTINUITY_SOURCE)

    def should_pause(self, ctx: RequestContext) -> bool:
        """True when a compaction of this request asks the run to pause.

        The note of the unsent request is kept in the session's metadata, for the request a
        resumed run sends.
        """
        events = [e for e in ctx.events if _compacts(e)]
        if not events:
            return False
        if not self._pause_all and not any(e.strategy in self._pause_names for e in events):
            return False
        notes = [p for p in ctx.request_scoped if _is_note(p)]
        if notes and isinstance(notes[-1], UserPromptPart) and isinstance(notes[-1].content, str):
            self.session.metadata[PAUSED_NOTE_KEY] = notes[-1].content
        return True


def _saved_anchors(value: object) -> list[tuple[str, str]]:
    """The ``[kind, text]`` pairs of a session's saved anchors; entries of another shape are skipped."""
    if not isinstance(value, list):
        return []
    pairs: list[tuple[str, str]] = []
    for item in cast("list[object]", value):
        if isinstance(item, list | tuple) and len(item) == 2:  # pyright: ignore[reportUnknownArgumentType]
            kind, text = cast("tuple[object, object]", tuple(item))  # pyright: ignore[reportUnknownArgumentType]
            if isinstance(kind, str) and isinstance(text, str):
                pairs.append((kind, text))
    return pairs


def _compacts(event: CompactionEvent) -> bool:
    """An edit that freed tokens or took tool output away (a growing edit is no compaction)."""
    return event.tokens_saved > 0 or bool(event.removed_tool_call_ids or event.cleared_tool_call_ids)


def _is_note(part: Part) -> bool:
    mark = harness_mark(part)
    return mark is not None and mark.get("source") == CONTINUITY_SOURCE


def receipt_text(events: Sequence[CompactionEvent], ctx: RequestContext) -> str:
    """The receipt: one line per capability that edited the history, then how to get content back."""
    lines = ["[harness] The conversation was compacted before this request:"]
    by_strategy: dict[str, list[CompactionEvent]] = {}
    for event in events:
        by_strategy.setdefault(event.strategy, []).append(event)
    for strategy, group in by_strategy.items():
        dropped = sum(max(0, e.messages_before - e.messages_after) for e in group)
        cleared = sum(len(e.cleared_tool_call_ids) for e in group)
        removed = sum(len(e.removed_tool_call_ids) for e in group)
        saved = sum(e.tokens_saved for e in group)
        facts = [f"{dropped} message{'s' if dropped != 1 else ''} removed or merged"] if dropped else []
        if cleared:
            facts.append(f"{cleared} tool result{'s' if cleared != 1 else ''} shortened")
        if removed:
            facts.append(f"{removed} tool call{'s' if removed != 1 else ''} removed")
        facts.append(f"{saved:,} tokens freed")
        lines.append(f"- {strategy}: {', '.join(facts)}")
    lines.append(_recovery_line(events, ctx))
    return "\n".join(lines)


def _recovery_line(events: Sequence[CompactionEvent], ctx: RequestContext) -> str:
    if ctx.references is not None:
        ids = [i for e in events for i in (*e.cleared_tool_call_ids, *e.removed_tool_call_ids)]
        refs: list[str] = []
        for call_id in dict.fromkeys(ids):
            probe = ToolReturnPart(tool_name="", content="", tool_call_id=call_id)
            ref = ctx.reference_for(CanonicalMessage.request(probe), probe)
            if ref is not None:
                refs.append(ref)
        shown = ", ".join(refs[:_SHOWN_REFS]) + (
            f" (and {len(refs) - _SHOWN_REFS} more)" if len(refs) > _SHOWN_REFS else ""
        )
        target = f": for example {shown}" if refs else ""
        return f"Originals are kept: call the recall tool with a reference to read one back{target}."
    # Without recall the model cannot fetch anything back, whichever store keeps the log.
    return "What was removed is no longer in this context; re-run a tool if you need its output again."


def anchors_text(anchors: Sequence[Anchor]) -> str:
    """The reminder of the anchors a compaction removed, verbatim (very long ones cut in the middle)."""
    titles = {
        "task": "Task",
        "instructions": "Instructions",
        "constraint": "Constraint",
        "plan": "Latest plan",
    }
    lines = ["Still in force (re-sent because the compaction removed them):"]
    lines.extend(f"{titles[a.kind]}: {_bounded(a.text)}" for a in anchors)
    return "\n".join(lines)


def _bounded(text: str) -> str:
    """``text``, or its head and tail when longer than ``_ANCHOR_CHARS`` (already bounded: unchanged)."""
    if len(text) <= _ANCHOR_CHARS or (len(text) <= _ANCHOR_CHARS + 64 and _NOT_REPEATED.search(text)):
        return text
    half = _ANCHOR_CHARS // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half:,} characters not repeated ...]\n{text[-half:]}"


def _missing(
    anchors: Sequence[Anchor], messages: Sequence[CanonicalMessage], scoped: Sequence[Part]
) -> list[Anchor]:
    """The anchors neither held (the part itself) nor quoted verbatim by the history about to be sent."""
    if not anchors:
        return []
    held = {id(part) for message in messages for part in message.parts}
    texts: list[str] | None = None
    missing: list[Anchor] = []
    for anchor in anchors:
        if id(anchor.part) in held:
            continue
        if texts is None:
            texts = [_searchable(part) for message in messages for part in message.parts]
            texts.extend(_searchable(part) for part in scoped)
        if not any(anchor.text in text for text in texts):
            missing.append(anchor)
    return missing


def _searchable(part: Part) -> str:
    content = getattr(part, "content", None)
    if isinstance(content, str):
        return content
    args = getattr(part, "args", None)
    if args is not None:
        return str(args)
    return ""


def has_user_prompt(messages: Sequence[CanonicalMessage]) -> bool:
    """True when a request of ``messages`` holds a user prompt (the session has a task already)."""
    return any(
        isinstance(part, UserPromptPart)
        for message in messages
        if message.is_request
        for part in message.parts
    )
