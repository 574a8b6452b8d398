"""Anchors: what an agent must still see after a compaction.

Four kinds, all found without a model:

* **task**: the first user prompt of the conversation;
* **constraints**: the sentences of user prompts that state a requirement
  (:func:`constraint_sentences`);
* **instructions**: the system prompts the history holds;
* **plan**: what a to-do or plan tool last wrote (the arguments of the newest call of a
  tool whose name holds ``todo`` or ``plan``, or one of ``plan_tools``), or the newest part
  the user marked ``{"harness": {"anchor": "plan"}}``.

:class:`AnchorTracker` keeps them up to date as a history grows, reading each message
once (by identity), so a run pays for what was added, not for the history's length. The
run re-sends, request-scoped, every anchor a compaction removed (see
:mod:`harness.run.continuity`).
"""

from __future__ import annotations

__all__ = [
    "ANCHOR_MARK",
    "Anchor",
    "AnchorTracker",
    "constraint_sentences",
    "is_plan_tool",
]

import json
import re
from collections.abc import Collection, Iterable, Sequence
from typing import Final, Literal

import attrs

from harness.core.messages import (
    CanonicalMessage,
    Part,
    SystemPromptPart,
    ToolCallPart,
    UserPromptPart,
    harness_mark,
)

ANCHOR_MARK: Final = "anchor"
"""Harness-mark key a user sets to ``"plan"`` (or ``"constraint"``) to make a part an anchor."""

AnchorKind = Literal["task", "constraint", "instructions", "plan"]

_REQUIREMENT: Final = re.compile(
    r"\b(must|mustn't|should|shouldn't|never|always|do not|don't|does not|doesn't|only|"
    r"make sure|ensure|required?|requirements?|need to|needs to|have to|has to|avoid|"
    r"cannot|can't|may not|not allowed|forbidden|keep|preserve|without)\b",
    re.IGNORECASE,
)
_SENTENCE_END: Final = re.compile(r"(?<=[.!?])[ \t]+(?=[A-Z0-9`'\"(\[*-])|\n")
_MAX_SENTENCE: Final = 400
"""Longer "sentences" are paragraphs or pasted output, not a stated requirement."""
_PLAN_WORDS: Final = ("todo", "plan")


def constraint_sentences(text: str) -> list[str]:
    """The sentences of ``text`` that state a requirement, verbatim, in order.

    Sentences end at ``.``/``!``/``?`` followed by a capital, and at line breaks (a list
    item is a sentence); it states a requirement when it holds a requirement word (``must``,
    ``should``, ``never``, ``always``, ``do not``, ``only``, ``make sure``, ``ensure``,
    ``need to``, ``have to``, ``avoid``, ``cannot``, ``keep``, ``without``...). Sentences
    longer than 400 characters are skipped (pasted output, not a stated rule).
    """
    found: list[str] = []
    for raw in _SENTENCE_END.split(text):
        sentence = raw.strip()
        if sentence and len(sentence) <= _MAX_SENTENCE and _REQUIREMENT.search(sentence):
            found.append(sentence)
    return found


def is_plan_tool(tool_name: str, plan_tools: Collection[str] = ()) -> bool:
    """True when ``tool_name`` is one of ``plan_tools`` or holds ``todo`` or ``plan``."""
    if tool_name in plan_tools:
        return True
    lowered = tool_name.lower()
    return any(word in lowered for word in _PLAN_WORDS)


@attrs.frozen
class Anchor:
    """One thing that must survive compaction.

    Attributes:
        kind: ``"task"``, ``"constraint"``, ``"instructions"`` or ``"plan"``.
        text: The anchor, verbatim (a plan call: its tool name and JSON arguments).
        part: The part it was read from (kept to tell whether the history still holds it);
            ``None`` for an anchor remembered from an earlier run (:meth:`AnchorTracker.remember`).
    """

    kind: AnchorKind
    text: str
    part: Part | None = attrs.field(default=None, eq=False, repr=False)


def _own_artifact(part: Part) -> bool:
    """Parts harness wrote itself (summaries, receipts, request-scoped notes) are never anchors."""
    if getattr(part, "metadata", None) is None:
        return False
    mark = harness_mark(part)
    if mark is None:
        return False
    return ANCHOR_MARK not in mark and bool(
        mark.get("request_scoped") or mark.get("kind") or mark.get("summary") or mark.get("source")
    )


def _user_mark(part: Part) -> str | None:
    if getattr(part, "metadata", None) is None:
        return None
    mark = harness_mark(part)
    value = None if mark is None else mark.get(ANCHOR_MARK)
    return value if isinstance(value, str) else None


def _prompt_text(part: UserPromptPart) -> str:
    if isinstance(part.content, str):
        return part.content
    return "\n".join(item for item in part.content if isinstance(item, str))


def _plan_text(part: ToolCallPart) -> str:
    args = part.args
    body = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, sort_keys=True)
    return f"{part.tool_name}: {body}"


@attrs.define
class AnchorTracker:
    """The anchors of a growing history, updated from the messages it has not read yet.

    Args:
        plan_tools: Tool names whose calls write the plan, besides names holding
            ``todo`` or ``plan``.
        constraints: Track constraint sentences (``False``: task, instructions and plan only).
    """

    plan_tools: frozenset[str] = attrs.field(default=frozenset(), converter=frozenset)
    constraints: bool = True
    task: Anchor | None = None
    constraint_anchors: list[Anchor] = attrs.field(factory=list[Anchor])
    instructions: list[Anchor] = attrs.field(factory=list[Anchor])
    plan: Anchor | None = None
    _seen: dict[int, CanonicalMessage] = attrs.field(factory=dict[int, CanonicalMessage], repr=False)

    def update(self, messages: Sequence[CanonicalMessage]) -> None:
        """Read the messages of ``messages`` not read before (new ones are at the end)."""
        start = len(messages)
        while start > 0 and id(messages[start - 1]) not in self._seen:
            start -= 1
        for message in messages[start:]:
            self._seen[id(message)] = message  # a strong reference: the id stays unique
            self._read(message)

    def remember(self, saved: Iterable[tuple[str, str]]) -> None:
        """Take back anchors an earlier run kept (``(kind, text)`` pairs from :meth:`saved`).

        Remembered anchors come first; what this run reads later replaces the task and the
        plan and adds constraints and instructions.
        """
        for kind, text in saved:
            if kind == "task" and self.task is None:
                self.task = Anchor("task", text)
            elif kind == "plan" and self.plan is None:
                self.plan = Anchor("plan", text)
            elif kind == "instructions" and all(a.text != text for a in self.instructions):
                self.instructions.append(Anchor("instructions", text))
            elif kind == "constraint" and all(a.text != text for a in self.constraint_anchors):
                self.constraint_anchors.append(Anchor("constraint", text))

    def saved(self) -> list[tuple[str, str]]:
        """The anchors as ``(kind, text)`` pairs, for :meth:`remember` in a later run."""
        return [(a.kind, a.text) for a in self.anchors()]

    def anchors(self) -> list[Anchor]:
        """Every anchor, in the order a reminder lists them: task, instructions, constraints, plan."""
        found: list[Anchor] = []
        if self.task is not None:
            found.append(self.task)
        found.extend(self.instructions)
        task_text = self.task.text if self.task is not None else ""
        found.extend(a for a in self.constraint_anchors if a.text not in task_text)
        if self.plan is not None:
            found.append(self.plan)
        return found

    def _read(self, message: CanonicalMessage) -> None:
        for part in message.parts:
            marked = _user_mark(part)
            if marked == "plan":
                self.plan = Anchor("plan", str(getattr(part, "content", "") or _text_of(part)), part)
                continue
            if _own_artifact(part):
                continue
            if isinstance(part, SystemPromptPart) and message.is_request:
                if all(a.text != part.content for a in self.instructions):
                    self.instructions.append(Anchor("instructions", part.content, part))
            elif isinstance(part, UserPromptPart):
                self._read_prompt(part, marked)
            elif isinstance(part, ToolCallPart) and is_plan_tool(part.tool_name, self.plan_tools):
                self.plan = Anchor("plan", _plan_text(part), part)

    def _read_prompt(self, part: UserPromptPart, marked: str | None) -> None:
        text = _prompt_text(part)
        if not text.strip():
            return
        if self.task is None:
            self.task = Anchor("task", text, part)
        if marked == "constraint":
            self._add_constraints([text], part)
        elif self.constraints:
            self._add_constraints(constraint_sentences(text), part)

    def _add_constraints(self, sentences: Iterable[str], part: Part) -> None:
        known = {a.text for a in self.constraint_anchors}
        for sentence in sentences:
            if sentence not in known:
                known.add(sentence)
                self.constraint_anchors.append(Anchor("constraint", sentence, part))


def _text_of(part: Part) -> str:
    if isinstance(part, ToolCallPart):
        return _plan_text(part)
    return str(getattr(part, "content", ""))
