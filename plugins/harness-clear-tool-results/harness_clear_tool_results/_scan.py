"""Helpers of :class:`~harness_clear_tool_results.ClearToolResults`: marks, names and the remembered scan."""

from __future__ import annotations

__all__ = [
    "Decision",
    "Memo",
    "References",
    "extends",
    "has_args",
    "is_cleared",
    "pair_id",
    "tool_names",
    "with_reference",
]

from collections.abc import Callable, Iterable, Sequence

import attrs

from harness.core import CanonicalMessage, Part, ToolCallPart, ToolReturnPart, harness_mark

References = Callable[[CanonicalMessage, Part | None], str | None]
"""``RequestContext.references``: the recall reference of a message's part (harness-recall)."""


def with_reference(
    text: str, references: References | None, message: CanonicalMessage | None, part: Part
) -> str:
    """``text`` plus `` [recall: <ref>]`` when a recall capability names the original part."""
    if references is None or message is None:
        return text
    ref = references(message, part)
    return text if ref is None else f"{text} [recall: {ref}]"


def tool_names(value: Iterable[str]) -> frozenset[str]:
    if isinstance(value, str):
        raise ValueError(
            "exclude_tools must be a collection of tool names, not a single string "
            f"(got {value!r}; write exclude_tools={{{value!r}}})."
        )
    names = frozenset(value)
    for name in names:
        if not isinstance(name, str) or not name:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"exclude_tools must hold non-empty tool names, got {name!r}.")
    return names


def is_cleared(part: ToolReturnPart | ToolCallPart) -> bool:
    if part.metadata is None:  # the common case, without the Mapping check
        return False
    mark = harness_mark(part)
    return mark is not None and bool(mark.get("cleared"))


Decision = tuple["ToolReturnPart | None", int, "ToolCallPart | None", int]
"""(replacement return, tokens it frees, replacement call, tokens it frees) of one pair."""


def pair_id(new_ret: ToolReturnPart | None, new_call: ToolCallPart | None) -> str:
    """The tool call id of a pair from whichever of its replacements exists."""
    part = new_ret if new_ret is not None else new_call
    assert part is not None
    return part.tool_call_id


@attrs.define
class Memo:
    """The last scan: the history as this capability left it, its pairs and how many are settled.

    ``pairs[:settled]`` need nothing more (cleared, excluded, too short to gain from a
    placeholder, or unmarkable). They stay settled while ``seen`` is an identical prefix of
    the history, because their parts cannot have changed.
    """

    seen: list[CanonicalMessage]
    calls: dict[str, tuple[int, int]]
    pairs: list[tuple[int, int, int, int]]
    settled: int
    pinned: set[str] = attrs.field(factory=set[str])  # call ids with a pinned call or answer
    decisions: dict[int, Decision] = attrs.field(factory=dict[int, "Decision"])
    references: References | None = None  # the ``ctx.references`` the decisions were made with


def extends(messages: Sequence[CanonicalMessage], seen: list[CanonicalMessage]) -> bool:
    """Whether ``messages`` starts with the messages of ``seen``.

    A list comparison runs at C speed and compares identical objects by identity, so the
    usual case (the same objects plus appended ones) costs ~1 ns a message; equal copies
    are just as good for the remembered scan, which records positions and ids.
    """
    return len(messages) >= len(seen) and list(messages[: len(seen)]) == seen


def has_args(call: ToolCallPart) -> bool:
    args = call.args
    if args is None:
        return False
    if isinstance(args, str):
        stripped = args.strip()
        return bool(stripped) and stripped != "{}"
    return bool(args)
