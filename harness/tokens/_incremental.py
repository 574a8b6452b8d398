"""Incremental history counting (private: use :class:`harness.tokens.TokenCounter`).

A :class:`HistoryIndex` keeps the last few histories counted as snapshots with running
totals, and diffs each new history against the one sharing the longest prefix with it (on
a tie, the most recently counted): an append costs one C-speed list comparison plus the new
messages; an edit in the middle looks up only the messages between the common prefix and
the common suffix, and reuses the suffix by shifting its running totals ("grafting").

It also remembers which responses with usage can anchor a context estimate (see
:meth:`HistoryIndex.context_tokens`), and the changes of the first request's dynamic system
prompts (a re-evaluated prompt is new instructions, not an edit: the running totals shift
and the change is recorded for the anchors sent before it).

**Memory.** Nothing here keeps a history alive once its owner drops it. A snapshot holds
its messages except the first, which it references weakly (a :class:`HeadRef` stands in
for it in the list, so comparisons stay at C speed): when the first message dies, no live
history can share a prefix with the snapshot, and the snapshot is released. (When the
first message is a request with dynamic system prompts, the second one plays that part,
so that the first is still there when a re-evaluated copy replaces it.) Anchor marks
reference their responses weakly. At most :data:`MAX_SNAPSHOTS` snapshots are kept (so
histories that share one first-message object are held at most that many at a time), and
at most ``anchor_limit`` anchor marks (an evicted mark only makes its response untrusted).
"""

from __future__ import annotations

__all__ = ["EDIT_SEARCHES", "MAX_SNAPSHOTS", "HistoryIndex"]

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Final, cast, final

from harness.core._sequences import common_prefix, common_suffix
from harness.core.messages import CanonicalMessage
from harness.errors import MessageError
from harness.tokens._caches import IdentityCache
from harness.tokens._instructions import (
    change_since,
    dynamic_parts,
    instructions_only_change,
    sent_instructions,
)
from harness.tokens._snapshots import (
    EMPTY_SNAPSHOT,
    Anchor,
    AnchorRef,
    HeadRef,
    Snapshot,
    extend_shifted,
    snapshot_length,
)

MAX_SNAPSHOTS: Final = 8
"""How many counted histories are remembered."""

EDIT_SEARCHES: Final = 2
"""How many recent histories an edited history is compared with to find where it changed."""

CountMessage = Callable[[CanonicalMessage], int]


@final
class HistoryIndex:
    """The snapshots and anchor marks of one token counter. Thread-safe.

    Args:
        messages: The counter's message cache, read directly in the hot loop.
        anchor_limit: The most anchor marks kept; the oldest go first.
    """

    def __init__(self, messages: IdentityCache[CanonicalMessage], anchor_limit: int) -> None:
        self._messages = messages
        self._anchor_limit = max(1, anchor_limit)
        self._snapshots: list[Snapshot] = []
        # id(response) -> what is known about it as an anchor; vanishes with the response.
        self._anchors: OrderedDict[int, Anchor] = OrderedDict()
        self._lock = threading.RLock()
        self._depth = 0  # sync calls in progress (reentrant through a custom text counter)
        self._dead = False  # a snapshot's first message died; purge when no sync is running
        this = weakref.ref(self)  # callbacks must not keep the index alive

        def head_died(_ref: HeadRef) -> None:
            index = this()
            if index is not None:
                index._head_died()  # pyright: ignore[reportPrivateUsage]

        def anchor_died(ref: AnchorRef) -> None:
            index = this()
            if index is not None:
                entry = index._anchors.get(ref.key)  # pyright: ignore[reportPrivateUsage]
                if entry is not None and entry.ref is ref:
                    index._anchors.pop(ref.key, None)  # pyright: ignore[reportPrivateUsage]

        self._head_callback = head_died
        self._anchor_callback = anchor_died

    # -- introspection (tests) ------------------------------------------------------------

    @property
    def snapshot_count(self) -> int:
        """How many snapshots are kept."""
        return len(self._snapshots)

    @property
    def anchor_count(self) -> int:
        """How many anchor marks are kept."""
        return len(self._anchors)

    def anchor_trusted(self, response: CanonicalMessage) -> bool | None:
        """Whether ``response`` is trusted as an anchor (``None``: no mark)."""
        entry = self._anchors.get(id(response))
        return None if entry is None or entry.ref() is not response else entry.trusted

    # -- public operations ----------------------------------------------------------------

    def count(
        self,
        messages: Sequence[CanonicalMessage],
        count_message: CountMessage,
        count_instructions: Callable[[str], int],
    ) -> int:
        """Return the tokens of ``messages`` plus the newest instructions.

        Raises:
            MessageError: an element is not a message (the message names its index).
        """
        try:
            with self._lock:
                self._enter()
                try:
                    snapshot, length = self._sync(messages, count_message)
                    return self._total(snapshot, length, count_instructions)
                finally:
                    self._leave()
        finally:
            self._after()

    def context_tokens(
        self,
        messages: Sequence[CanonicalMessage],
        count_message: CountMessage,
        count_instructions: Callable[[str], int],
    ) -> int:
        """Return the provider's figure at the newest trusted anchor plus what follows it.

        Without a trusted anchor, the same as :meth:`count`. See
        :meth:`harness.tokens.TokenCounter.context_tokens` for the trust rules.
        """
        try:
            with self._lock:
                self._enter()
                try:
                    snapshot, length = self._sync(messages, count_message)
                    anchor_index = snapshot.anchor[length]
                    anchor = snapshot.at(anchor_index) if anchor_index >= 0 else None
                    usage = None if anchor is None else anchor.usage
                    if (
                        anchor is not None
                        and usage is not None
                        and self._anchor_valid(anchor, snapshot, anchor_index)
                    ):
                        after = snapshot.prefix[length] - snapshot.prefix[anchor_index + 1]
                        removed, added = self._instructions_change(
                            snapshot, length, anchor, anchor_index, count_instructions
                        )
                        anchored = usage.request_tokens + usage.response_tokens - removed
                        return max(anchored, 0) + added + after
                    return self._total(snapshot, length, count_instructions)
                finally:
                    self._leave()
        finally:
            self._after()

    # -- releasing snapshots --------------------------------------------------------------

    def _enter(self) -> None:
        if self._depth == 0 and self._dead:
            self._purge()
        self._depth += 1

    def _leave(self) -> None:
        self._depth -= 1
        if self._depth == 0 and self._dead:
            self._purge()

    def _after(self) -> None:
        # A first message that died while another thread held the lock is purged by it
        # (``_leave``) or here, once the lock is free.
        if self._dead:
            self._head_died()

    def _head_died(self) -> None:
        """Weak-reference callback: release dead snapshots now, or once no sync runs."""
        self._dead = True
        if self._lock.acquire(blocking=False):
            try:
                if self._depth == 0:
                    self._purge()
            finally:
                self._lock.release()

    def _purge(self) -> None:
        self._dead = False
        self._snapshots = [snapshot for snapshot in self._snapshots if snapshot.alive()]

    # -- totals and anchors ---------------------------------------------------------------

    def _total(self, snapshot: Snapshot, length: int, count_instructions: Callable[[str], int]) -> int:
        total = snapshot.prefix[length]
        instr_index = snapshot.instr[length]
        if instr_index >= 0:
            message = snapshot.at(instr_index)
            instructions = None if message is None else message.instructions
            if instructions:
                total += count_instructions(instructions)
        return total

    def _instructions_change(
        self,
        snapshot: Snapshot,
        length: int,
        anchor: CanonicalMessage,
        anchor_index: int,
        count_instructions: Callable[[str], int],
    ) -> tuple[int, int]:
        """Tokens of instructions sent with the anchor's request but not now, and the reverse.

        The ``instructions`` field: those of the newest request now against those the anchor
        was produced under (see :func:`~harness.tokens._instructions.sent_instructions`).
        Dynamic system prompts: the net change seen since the anchor's request was counted.

        Returns:
            ``(removed, added)``, both non-negative.
        """
        change = change_since(snapshot.changed_at, snapshot.change_totals, anchor_index)
        removed, added = (-change, 0) if change < 0 else (0, change)
        now_index = snapshot.instr[length]
        then_index = snapshot.instr[anchor_index]
        if now_index == then_index and anchor.instructions is None:
            return removed, added
        now = snapshot.at(now_index) if now_index >= 0 else None
        current = (now.instructions or "") if now is not None else ""
        sent = sent_instructions(anchor, snapshot.at(then_index) if then_index >= 0 else None)
        if current != sent:
            added += count_instructions(current) if current else 0
            removed += count_instructions(sent) if sent else 0
        return removed, added

    def _anchor_valid(self, anchor: CanonicalMessage, snapshot: Snapshot, index: int) -> bool:
        """Whether ``anchor`` sits at ``index`` after the same history it was first seen with.

        Checked against the snapshot it was first seen in while that snapshot is alive
        (O(1) when it is the same one); otherwise the marks made when edits were seen decide.
        """
        entry = self._anchors.get(id(anchor))
        if entry is None or entry.ref() is not anchor or not entry.trusted:
            return False
        home = entry.home()
        if home is not None and not home.alive():
            home = None
        if entry.index == index and (
            home is None or home is snapshot or home.messages[:index] == snapshot.messages[:index]
        ):
            if home is not snapshot:
                entry.home = weakref.ref(snapshot)  # later checks against this history are O(1)
            return True
        entry.trusted = False
        return False

    # -- diffing ----------------------------------------------------------------------------

    def _sync(
        self, messages: Sequence[CanonicalMessage], count_message: CountMessage
    ) -> tuple[Snapshot, int]:
        """Return a snapshot whose first ``length`` messages are ``messages``."""
        new = cast(list[CanonicalMessage], messages) if type(messages) is list else list(messages)
        n = len(new)
        if not n:
            return EMPTY_SNAPSHOT, 0
        snapshots = self._snapshots
        first = new[0]
        # Fast path: the longest known history that ``new`` starts with (usually the last
        # one counted, when messages were only appended).
        fast: Snapshot | None = None
        fast_length = 0
        reinstructed = False  # ``fast`` matched but for the dynamic system prompts of its head
        for snapshot in sorted(snapshots, key=snapshot_length, reverse=True):
            known = snapshot.messages
            k = len(known)
            # The identity check first: an equal-but-rebuilt history (e.g. reloaded from
            # disk) must not match by deep equality here, or every later call would repeat
            # that O(n) comparison; it goes through the branch below once instead, which
            # snapshots the new objects.
            if not k or k > n:
                continue
            if new[k - 1] is snapshot.at(k - 1):
                if new == known if k == n else new[:k] == known:
                    fast, fast_length = snapshot, k
                    break
            elif k > 1:
                continue
            # The first request's dynamic system prompts were re-evaluated (pydantic-ai does
            # so when a run starts): new instructions, not an edited history.
            head = snapshot.at(0)
            if (
                head is not None
                and instructions_only_change(head, first)
                and (k == 1 or new[1:k] == known[1:k])
            ):
                fast, fast_length, reinstructed = snapshot, k, True
                break
        # The history ``new`` derives from is the one sharing the longest prefix with it;
        # on a tie, the most recently counted one (so an edit is seen where it happened).
        best = fast
        best_common = fast_length
        best_position = snapshots.index(fast) if fast is not None else len(snapshots)
        if fast_length < n:
            probe = new[fast_length]
            # Histories made of the same message objects as ``new`` (its own lineage) are
            # compared first; deep equality against rebuilt copies is paid only when no
            # snapshot shares ``new``'s objects.
            same_lineage = any(s.at(0) is first for s in snapshots)
            # After an edit, the history it derives from is almost always one of the last
            # few counted; scanning every remembered one cost a full prefix search each.
            searches = EDIT_SEARCHES
            for position, snapshot in enumerate(snapshots):
                known = snapshot.messages
                if snapshot is fast or len(known) <= fast_length:
                    continue
                if fast is None:
                    if (same_lineage and snapshot.at(0) is not first) or not searches:
                        continue
                    searches -= 1
                    common = common_prefix(new, known)
                elif known[fast_length] == probe:
                    common = common_prefix(new, known)
                elif (
                    position < best_position
                    and snapshot.at(fast_length - 1) is new[fast_length - 1]
                    and known[:fast_length] == new[:fast_length]
                ):
                    common = fast_length
                else:
                    continue  # cheap rejection: keeps appends O(1) in the number of snapshots
                if common > 0 and (
                    common > best_common or (common == best_common and position < best_position)
                ):
                    best, best_common, best_position = snapshot, common, position
        if best is not None and best is fast:
            if reinstructed:
                self._reinstruct(best, first, n, count_message)
            elif best.at(0) is not first:  # matched an equal first message: follow the caller's
                best.set_head(first, self._head_callback)
            if fast_length < n:
                self._extend(best, new, fast_length, count_message, edited=False)
            if best_position:
                snapshots.insert(0, snapshots.pop(best_position))
            return best, n
        # Branch from that history: copy its shared prefix and its shared suffix (shifting
        # the running totals), count only what lies between.
        if best is None:
            fresh = Snapshot(None, [], [0], [-1], [-1])
            self._extend(fresh, new, 0, count_message, edited=True, trust_new=True)
        else:
            cut = best_common
            fresh = Snapshot(
                None,
                new[:cut],
                best.prefix[: cut + 1],
                best.instr[: cut + 1],
                best.anchor[: cut + 1],
                # Changes reach only the anchors of the shared prefix (later ones are new).
                [min(at, cut) for at in best.changed_at],
                best.change_totals.copy(),
            )
            fresh.set_head(first, self._head_callback)
            if cut and new[cut - 1] is not best.at(cut - 1):
                self._inherit_anchors(fresh, best, cut)
            suffix = common_suffix(new, best.messages, min(n, len(best.messages)) - cut)
            self._extend(fresh, new, cut, count_message, edited=True, trust_new=False, stop=n - suffix)
            if suffix:
                self._graft(fresh, best, suffix, new[n - suffix :])
                if fresh.weak == 0 and len(fresh.messages) > 1 and dynamic_parts(first):
                    fresh.set_head(first, self._head_callback)  # the second is the sentinel now
            fresh.untrusted = (cut, n)
        snapshots.insert(0, fresh)
        del snapshots[MAX_SNAPSHOTS:]
        return fresh, n

    def _inherit_anchors(self, fresh: Snapshot, source: Snapshot, cut: int) -> None:
        """Let equal copies of ``source``'s trusted anchors in the shared prefix anchor ``fresh`` too.

        A history rebuilt from equal messages (reloaded, or replayed by a durable engine
        with the same agent) shares its first ``cut`` messages with ``source`` by equality,
        not identity. The provider's usage on a response there is still exact for it: the
        history before it is the same. Walks back through the anchors of the prefix and
        stops at the first one that is the same object (the rest were marked with it).
        """
        anchors = self._anchors
        index = source.anchor[cut]
        while index >= 0:
            copy = fresh.messages[index]
            original = source.at(index)
            if original is None or copy is original:
                return
            entry = anchors.get(id(original))
            trusted = entry is not None and entry.ref() is original and entry.trusted
            if trusted and self._anchor_valid(original, source, index):
                existing = anchors.get(id(copy))
                if existing is None or existing.ref() is not copy:
                    anchors[id(copy)] = Anchor(
                        AnchorRef(copy, self._anchor_callback), True, weakref.ref(fresh), index
                    )
                    if len(anchors) > self._anchor_limit:
                        anchors.popitem(last=False)
            index = source.anchor[index]

    def _reinstruct(
        self, snapshot: Snapshot, head: CanonicalMessage, length: int, count_message: CountMessage
    ) -> None:
        """Make ``head``, the snapshot's first message with other dynamic system prompts, its first.

        The running totals shift by the difference (at C speed) and the change is recorded
        for the anchors among the first ``length`` messages of the history counted now: their
        requests were sent with the old prompts. Anchors stay trusted.
        """
        old = snapshot.at(0)
        assert old is not None  # instructions_only_change saw it alive
        try:
            delta = count_message(head) - count_message(old)
        except MessageError as exc:
            raise MessageError(f"messages[0]: {exc}") from exc
        snapshot.set_head(head, self._head_callback)
        if not delta:
            return
        prefix = snapshot.prefix
        prefix[1:] = map(delta.__add__, prefix[1:])
        at, totals = snapshot.changed_at, snapshot.change_totals
        if at and at[-1] == length:
            # A second change seen at the same length (two views of one history, with and
            # without the prompts, counted in turn) reaches the same anchors: merge them.
            totals[-1] += delta
            if totals[-1] == (totals[-2] if len(totals) > 1 else 0):
                at.pop()
                totals.pop()
        else:
            at.append(length)
            totals.append((totals[-1] if totals else 0) + delta)

    def _extend(
        self,
        snapshot: Snapshot,
        new: list[CanonicalMessage],
        start: int,
        count_message: CountMessage,
        *,
        edited: bool,
        trust_new: bool = True,
        stop: int | None = None,
    ) -> None:
        """Append ``new[start:stop]`` to ``snapshot``, counting each message.

        ``edited`` means ``new`` differs from a known history at ``start``: every known
        anchor from there on has an edited history before it and loses its trust.
        Responses with usage never seen before are trusted when ``trust_new`` (appended
        messages, or a history unrelated to any known one); otherwise they may be edited
        copies of old responses and are not trusted.
        """
        known = snapshot.messages
        prefix = snapshot.prefix
        instr = snapshot.instr
        anchor = snapshot.anchor
        anchors = self._anchors
        entries = self._messages.entries
        total = prefix[-1]
        last_instr = instr[-1]
        last_anchor = anchor[-1]
        for index in range(start, len(new) if stop is None else stop):
            message = new[index]
            hit = entries.get(id(message))
            if hit is not None and hit() is message:
                total += hit.value
            else:
                try:
                    total += count_message(message)
                except MessageError as exc:
                    raise MessageError(f"messages[{index}]: {exc}") from exc
            if message.instructions and message.kind == "request":
                last_instr = index
            usage = message.usage
            if (
                usage is not None
                and usage.request_tokens > 0
                and message.kind == "response"
                and not _edited_server_side(message)
            ):
                last_anchor = index
                key = id(message)
                entry = anchors.get(key)
                if entry is None or entry.ref() is not message:
                    ref = AnchorRef(message, self._anchor_callback)
                    anchors[key] = Anchor(ref, trust_new, weakref.ref(snapshot), index)
                    if len(anchors) > self._anchor_limit:
                        anchors.popitem(last=False)
                elif edited:
                    entry.trusted = False
            known.append(message)
            prefix.append(total)
            instr.append(last_instr)
            anchor.append(last_anchor)
        if start == 0 and known:
            snapshot.set_head(known[0], self._head_callback)
        elif start == 1 and len(known) > 1 and snapshot.weak == 0:
            # A second message arrived: a first one with dynamic prompts hands it the
            # sentinel (see Snapshot).
            first = snapshot.at(0)
            if first is not None and dynamic_parts(first):
                snapshot.set_head(first, self._head_callback)

    def _graft(
        self, snapshot: Snapshot, source: Snapshot, suffix: int, objects: list[CanonicalMessage]
    ) -> None:
        """Append ``objects``, equal to the last ``suffix`` messages of ``source``, without a walk.

        Their counts are known: running totals are shifted at C speed (``map``). The
        snapshot keeps ``objects`` (the caller's messages), not ``source``'s, so the next
        comparison with the caller's history is by identity. The history before them was
        edited, so every anchor among them loses its trust.
        """
        lo = len(source.messages) - suffix  # where the suffix starts in ``source``
        shift = lo - len(snapshot.messages)
        base = snapshot.prefix[-1] - source.prefix[lo]
        last_instr = snapshot.instr[-1]
        last_anchor = snapshot.anchor[-1]
        snapshot.messages.extend(objects)
        snapshot.prefix.extend(map(base.__add__, source.prefix[lo + 1 :]))
        extend_shifted(snapshot.instr, source.instr, lo, shift, last_instr)
        extend_shifted(snapshot.anchor, source.anchor, lo, shift, last_anchor)
        anchors = self._anchors
        skip_from, skip_to = source.untrusted
        index = source.anchor[-1]
        while index >= lo:  # walk back through the anchors of the suffix
            if skip_from <= index < skip_to:
                index = source.anchor[skip_from]  # already untrusted: jump over them
                continue
            message = source.at(index)
            entry = None if message is None else anchors.get(id(message))
            if entry is not None and entry.ref() is message:
                entry.trusted = False
            index = source.anchor[index]


def _edited_server_side(response: CanonicalMessage) -> bool:
    """True when the provider edited the context it counted (Anthropic context management).

    Its usage then counts the server's edited context, not the history kept here, so it is
    no anchor: a later request to another provider would be under-counted.
    """
    details = response.extra.get("provider_details") if response.extra else None
    if not isinstance(details, Mapping):
        return False
    managed = cast("Mapping[str, object]", details).get("context_management")
    if not isinstance(managed, Mapping):
        return False
    return bool(cast("Mapping[str, object]", managed).get("applied_edits"))
