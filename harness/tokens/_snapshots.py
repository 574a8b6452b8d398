"""The snapshots and anchor marks a :class:`~harness.tokens._incremental.HistoryIndex` keeps (private).

A :class:`Snapshot` is a counted history with its running totals; its first message is
referenced weakly through a :class:`HeadRef`. An :class:`Anchor` is what is remembered about
a response with usage, referenced weakly through an :class:`AnchorRef`.
"""

from __future__ import annotations

__all__ = [
    "EMPTY_SNAPSHOT",
    "Anchor",
    "AnchorRef",
    "HeadRef",
    "Snapshot",
    "extend_shifted",
    "snapshot_length",
]

import bisect
import itertools
import weakref
from collections.abc import Callable
from typing import Final, cast

from harness.core.messages import CanonicalMessage
from harness.tokens._instructions import dynamic_parts


class HeadRef(weakref.ref[CanonicalMessage]):
    """A weak reference to a snapshot's first message, standing in for it in the list.

    It compares equal to whatever its message compares equal to (and to a ``HeadRef`` of an
    equal message), so list comparisons of histories against a snapshot need no copy.
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        target = self()
        if target is None:
            return False
        if isinstance(other, HeadRef):
            other = other()
        return target is other or target == other

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = None  # pyright: ignore[reportAssignmentType]


class Snapshot:
    """A counted history and its running totals.

    One message, the *sentinel*, is referenced weakly: a :class:`HeadRef` (:attr:`head`)
    stands in for it at :attr:`weak` in ``messages``, and the snapshot is released once it
    dies. It is the first message, except when that is a request with dynamic system
    prompts and there is a second: then the second is the sentinel and the first is held,
    so that the version of the first message these totals were counted with is still there
    to compare with when its dynamic prompts are re-evaluated into a new object (a new run
    of pydantic-ai replaces the first request). Read a message with :meth:`at`.

    ``prefix[i]`` is the token count of the first ``i`` messages; ``instr[i]`` and
    ``anchor[i]`` are the indices of the newest request with instructions and of the newest
    response with usage among them (-1 when none). ``changed_at[j]`` is the length of the
    history counted when the first message's dynamic system prompts were seen changed for
    the ``j``-th time, ``change_totals[j]`` the tokens the first ``j + 1`` changes added.
    """

    __slots__ = (
        "__weakref__",
        "anchor",
        "change_totals",
        "changed_at",
        "head",
        "instr",
        "messages",
        "prefix",
        "untrusted",
        "weak",
    )

    def __init__(
        self,
        head: HeadRef | None,
        messages: list[CanonicalMessage],
        prefix: list[int],
        instr: list[int],
        anchor: list[int],
        changed_at: list[int] | None = None,
        change_totals: list[int] | None = None,
    ) -> None:
        self.head = head
        self.weak = 0
        self.messages = messages
        self.prefix = prefix
        self.instr = instr
        self.anchor = anchor
        self.changed_at: list[int] = [] if changed_at is None else changed_at
        self.change_totals: list[int] = [] if change_totals is None else change_totals
        # Every anchor at an index in [untrusted[0], untrusted[1]) is known to be
        # untrusted (trust never comes back), so grafting can skip them.
        self.untrusted: tuple[int, int] = (0, 0)

    def at(self, index: int) -> CanonicalMessage | None:
        """The message at ``index`` (``None`` for the sentinel once it died)."""
        if index != self.weak:
            return self.messages[index]
        return None if self.head is None else self.head()

    def alive(self) -> bool:
        """Whether the sentinel is still alive (an empty snapshot always is)."""
        return self.head is None or self.head() is not None

    def set_head(self, message: CanonicalMessage, callback: Callable[[HeadRef], None]) -> None:
        """Make ``message`` the first message, and pick the sentinel (see the class)."""
        messages = self.messages
        if len(messages) > 1 and dynamic_parts(message):
            messages[0] = message
            if self.weak != 1:
                second = messages[1]
                self.head = HeadRef(second, callback)
                messages[1] = cast(CanonicalMessage, self.head)
                self.weak = 1
            return
        if self.weak == 1:
            second = self.at(1)
            assert second is not None  # the caller's history holds it
            messages[1] = second
            self.weak = 0
        self.head = HeadRef(message, callback)
        messages[0] = cast(CanonicalMessage, self.head)


EMPTY_SNAPSHOT: Final = Snapshot(None, [], [0], [-1], [-1])


def snapshot_length(snapshot: Snapshot) -> int:
    return len(snapshot.messages)


class AnchorRef(weakref.ref[CanonicalMessage]):
    """A weak reference to a response that remembers its ``id`` (the anchor map key)."""

    __slots__ = ("key",)

    key: int

    def __new__(cls, message: CanonicalMessage, callback: Callable[[AnchorRef], None]) -> AnchorRef:
        ref = super().__new__(cls, message, callback)
        ref.key = id(message)
        return ref

    def __init__(self, message: CanonicalMessage, callback: Callable[[AnchorRef], None]) -> None:
        super().__init__(message, callback)  # pyright: ignore[reportCallIssue]


class Anchor:
    """What is remembered about a response with usage.

    ``home`` weakly references a snapshot (append-only) in which the response sits at
    ``index`` after the history it was first seen with; ``trusted`` turns false for good
    once that history is seen edited.
    """

    __slots__ = ("home", "index", "ref", "trusted")

    def __init__(self, ref: AnchorRef, trusted: bool, home: weakref.ref[Snapshot], index: int) -> None:
        self.ref = ref
        self.trusted = trusted
        self.home = home
        self.index = index


def extend_shifted(target: list[int], source: list[int], lo: int, shift: int, before: int) -> None:
    """Append ``source[lo + 1:]`` to ``target``: indices ``>= lo`` shifted down, older ones ``before``.

    ``source`` is non-decreasing (each entry is the newest index of something at or before
    its position), so the entries pointing before ``lo`` form a prefix of the slice, found
    by bisection; the rest is shifted at C speed.
    """
    first_inside = bisect.bisect_left(source, lo, lo + 1)
    target.extend(itertools.repeat(before, first_inside - lo - 1))
    target.extend(map((-shift).__add__, source[first_inside:]))
