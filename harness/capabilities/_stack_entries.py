"""Stack entries, the lexical rules of the short form, and the stack error layout.

Pure: the short-form parser (:mod:`harness.capabilities._stack_grammar`), the stack builder
(:mod:`harness.hooks.stacks`) and the configuration files (:mod:`harness.config`) share it.
"""

from __future__ import annotations

from harness.errors import StackConfigError

__all__ = [
    "BARE_STOP",
    "FALSE_WORDS",
    "FLOAT_RE",
    "INT_RE",
    "KEY_RE",
    "MAX_DEPTH",
    "NAME_RE",
    "StackEntry",
    "TIERS",
    "TRUE_WORDS",
    "stack_error",
]

import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

TIERS: Final = "tiers"
"""The parameter the short form's ``NAME[...]`` brackets set."""

MAX_DEPTH: Final = 16
NAME_RE: Final = re.compile(r"[A-Za-z0-9_.\-]+")
KEY_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
INT_RE: Final = re.compile(r"[+-]?[0-9]+(?:_[0-9]+)*")
FLOAT_RE: Final = re.compile(
    r"[+-]?(?:[0-9]+(?:_[0-9]+)*\.(?:[0-9]+(?:_[0-9]+)*)?|\.[0-9]+(?:_[0-9]+)*|[0-9]+(?:_[0-9]+)*)"
    r"(?:[eE][+-]?[0-9]+)?"
)
BARE_STOP: Final = frozenset(',=[]"|')
TRUE_WORDS: Final = frozenset({"true", "yes", "on", "1"})
FALSE_WORDS: Final = frozenset({"false", "no", "off", "0"})


# --------------------------------------------------------------------------------------
# Entries and errors
# --------------------------------------------------------------------------------------


def stack_error(
    reason: str,
    *,
    source: str,
    entry: str | None = None,
    parameter: str | None = None,
    accepted: Sequence[str] = (),
    accepted_label: str = "accepted",
    candidate: str | None = None,
) -> StackConfigError:
    """Build a :class:`StackConfigError` with the standard message layout."""
    where = source + (f" ({entry})" if entry else "")
    text = f"{where}: " if where else ""
    if parameter is not None:
        text += f"parameter {parameter!r}: "
    text += reason
    suggestion: str | None = None
    if candidate is not None and accepted:
        close = difflib.get_close_matches(candidate, list(accepted), n=1, cutoff=0.6)
        if close:
            suggestion = close[0]
            text += f"; did you mean {suggestion!r}?"
    if accepted:
        text += f" ({accepted_label}: {', '.join(accepted)})"
    return StackConfigError(
        text, source=source, entry=entry, parameter=parameter, accepted=accepted, suggestion=suggestion
    )


@attrs.frozen
class StackEntry:
    """One capability of a stack: an entry-point name and constructor keyword arguments.

    Attributes:
        name: Entry-point name in the ``harness`` group, e.g. ``"clear_tool_results"``.
        params: Constructor keyword arguments, typed as read (int, float, bool, str,
            None, lists of those, and lists of :class:`StackEntry` for ``tiers``);
            :func:`harness.config.build_stack` converts them by the constructor's annotations.
        source: Where the entry came from, for error messages (``"--stack entry 2"``,
            ``"harness.toml [[stack]] 3"``). Not part of equality.
    """

    name: str
    params: Mapping[str, Any] = attrs.field(factory=dict[str, Any])
    source: str = attrs.field(default="", eq=False)
