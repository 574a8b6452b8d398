"""Recall references: short names for content of a session's append-only log.

A reference names what a placeholder replaced, by its place in the log:

* ``r12``: log message 12 (seqs count from 0);
* ``r12.3``: part 3 (from 0) of log message 12;
* ``r10-r40`` (or ``r10-40``): log messages 10 to 40, both included;
* a tool call id (``call_abc``; ``call:<id>`` when the id itself looks like one of the
  forms above): the result of that call, looked up in the log.

Log seqs never change (the log is append-only), so a reference stays valid for the life
of the session, whatever later compactions do to the view.
"""

from __future__ import annotations

__all__ = ["HINT", "REF_FORMS", "Ref", "call_ref", "hint", "parse_ref"]

import re
from typing import Literal, TypeAlias

import attrs

HINT = " [recall: {ref}]"
"""What a placeholder appends when a recall capability names its original."""

REF_FORMS = "r12 (log message 12), r12.3 (its part 3), r10-r40 (messages 10 to 40) or a tool call id"
"""The reference forms, as error messages and tool descriptions list them."""

RefKind: TypeAlias = Literal["message", "part", "range", "call"]

_MESSAGE = re.compile(r"r(\d{1,12})", re.IGNORECASE)
_PART = re.compile(r"r(\d{1,12})\.(\d{1,6})", re.IGNORECASE)
_RANGE = re.compile(r"r(\d{1,12})\s*-\s*r?(\d{1,12})", re.IGNORECASE)
_PREFIX = re.compile(r"^\s*recall\s*[:=]?\s*", re.IGNORECASE)
_WRAPPERS = "\"'`[]()<> "
_MAX_CALL_ID = 256


@attrs.frozen
class Ref:
    """A parsed reference.

    Attributes:
        kind: ``message``, ``part``, ``range`` or ``call``.
        start: The (first) log seq; ``0`` for a call reference.
        stop: The last log seq of a range (inclusive); ``start`` otherwise.
        part: The part index of a part reference.
        call_id: The tool call id of a call reference.
    """

    kind: RefKind
    start: int = 0
    stop: int = 0
    part: int | None = None
    call_id: str | None = None

    def __str__(self) -> str:
        if self.kind == "part":
            return f"r{self.start}.{self.part}"
        if self.kind == "range":
            return f"r{self.start}-r{self.stop}"
        if self.kind == "call":
            assert self.call_id is not None
            return call_ref(self.call_id)
        return f"r{self.start}"


def call_ref(call_id: str) -> str:
    """The reference of a tool call's result: the id itself, or ``call:<id>`` if it looks like a seq form."""
    text = call_id.strip(_WRAPPERS)
    if text != call_id or _looks_like_seq(call_id) or call_id.lower().startswith(("call:", "recall")):
        return f"call:{call_id}"
    return call_id


def hint(ref: str) -> str:
    """The text a placeholder appends for ``ref`` (`` [recall: r12.0]``)."""
    return HINT.format(ref=ref)


def _looks_like_seq(text: str) -> bool:
    return bool(_MESSAGE.fullmatch(text) or _PART.fullmatch(text) or _RANGE.fullmatch(text))


def parse_ref(text: str) -> Ref:
    """Parse a reference, tolerating what a model may wrap it in (quotes, brackets, ``recall:``).

    Raises:
        ValueError: ``text`` is empty, a range runs backwards, or a would-be call id holds
            whitespace or is too long; the message lists the accepted forms.
    """
    if not isinstance(text, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ValueError(f"a reference is a string such as {REF_FORMS}; got {type(text).__name__}")
    exact = text.strip()
    if exact.lower().startswith("call:"):  # the exact form: the id follows verbatim
        return _call(text, exact[5:].strip())
    raw = _PREFIX.sub("", exact.strip(_WRAPPERS)).strip(_WRAPPERS)
    if not raw:
        raise ValueError(f"empty reference {text!r}; use {REF_FORMS}")
    if raw.lower().startswith("call:"):
        return _call(text, raw[5:].strip())
    if match := _PART.fullmatch(raw):
        seq = int(match.group(1))
        return Ref("part", seq, seq, part=int(match.group(2)))
    if match := _MESSAGE.fullmatch(raw):
        seq = int(match.group(1))
        return Ref("message", seq, seq)
    if match := _RANGE.fullmatch(raw):
        start, stop = int(match.group(1)), int(match.group(2))
        if stop < start:
            raise ValueError(
                f"reference {text!r}: the range ends (r{stop}) before it starts (r{start}); use {REF_FORMS}"
            )
        return Ref("message", start, start) if start == stop else Ref("range", start, stop)
    if any(ch.isspace() for ch in raw):
        raise ValueError(f"{text!r} is not a reference; use {REF_FORMS}")
    return _call(text, raw)


def _call(text: str, call_id: str) -> Ref:
    if not call_id:
        raise ValueError(f"reference {text!r} names no tool call id after 'call:'; use {REF_FORMS}")
    if len(call_id) > _MAX_CALL_ID:
        raise ValueError(f"reference {text[:40]!r}... is too long for a tool call id; use {REF_FORMS}")
    return Ref("call", call_id=call_id)
