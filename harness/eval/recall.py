"""Probe recall over the contexts actually sent, scored incrementally.

A probe is *visible* in a sent context when one part of it shows the probe: a term
probe (task terms, artifacts, continuation identifiers) is one of the part's
:func:`~harness.eval.probes.terms`; a text probe (constraints, error lines) is a
substring of one of the part's :func:`~harness.eval.probes.part_texts`. Every part of the
sent list counts: the system prompt, request-scoped parts, summaries and placeholders.

The recall of a class is the number of (request, due probe) pairs where the probe was
visible, divided by the number of (request, due probe) pairs: every request weighs by
the probes due at it. Continuation recall pairs each request with the identifiers of its
own recorded response.

:class:`RecallScorer` keeps, for the current context, how many parts show each probe,
and updates it from the parts that changed since the previous request (parts are
compared by identity; what each part shows is computed once per part): a request costs
what changed, not the length of the history.
"""

from __future__ import annotations

__all__ = ["CLASSES", "RecallCounts", "RecallScorer"]

from collections.abc import Sequence
from typing import Final

import attrs

from harness.core.messages import CanonicalMessage, Part
from harness.eval.probes import PROBE_CLASSES, ProbeSet, part_texts, terms

CLASSES: Final = (*PROBE_CLASSES, "continuation", "older_continuation")
"""Every recall class, in report order."""


@attrs.define
class RecallCounts:
    """Visible and due (request, probe) pairs of one recall class.

    Attributes:
        visible: Pairs whose probe was visible.
        due: Pairs scored.
    """

    visible: int = 0
    due: int = 0

    @property
    def recall(self) -> float | None:
        """``visible / due`` (``None`` when nothing was due)."""
        return self.visible / self.due if self.due else None

    def add(self, other: RecallCounts) -> None:
        """Add ``other``'s pairs to these."""
        self.visible += other.visible
        self.due += other.due


class RecallScorer:
    """Scores every sent context of one replay against a transcript's probes.

    Args:
        probes: The probes of the transcript being replayed.
        text_cache: Shared ``text -> slots`` cache (the same recorded texts recur in
            every stack's replay of a transcript); a fresh one when ``None``.
    """

    def __init__(self, probes: ProbeSet, text_cache: dict[str, tuple[int, ...]] | None = None) -> None:
        self.probes = probes
        vocab: dict[str, int] = {}
        for probe in probes.probes:
            if probe.term:
                vocab.setdefault(probe.text, len(vocab))
        for continuation in probes.continuations:
            for term in continuation.identifiers:
                vocab.setdefault(term, len(vocab))
        self._vocab = vocab
        self._texts = [(len(vocab) + i, p.text) for i, p in enumerate(q for q in probes.probes if not q.term)]
        slot_of_text = {p.index: len(vocab) + i for i, p in enumerate(q for q in probes.probes if not q.term)}
        size = len(vocab) + len(self._texts)
        self._count = [0] * size
        self._probes_of_slot: list[list[int]] = [[] for _ in range(size)]
        self._slot_of_probe: list[int] = []
        for probe in probes.probes:
            slot = vocab[probe.text] if probe.term else slot_of_text[probe.index]
            self._slot_of_probe.append(slot)
            self._probes_of_slot[slot].append(probe.index)
        self._by_due: dict[int, list[int]] = {}
        for probe in probes.probes:
            self._by_due.setdefault(probe.due, []).append(probe.index)
        self._active = [False] * len(probes.probes)
        self._visible_due = dict.fromkeys(PROBE_CLASSES, 0)
        self._due = dict.fromkeys(PROBE_CLASSES, 0)
        self._part_slots: dict[int, tuple[Part, tuple[int, ...]]] = {}
        self._text_cache: dict[str, tuple[int, ...]] = text_cache if text_cache is not None else {}
        self._parts: list[Part] = []
        self.totals = {name: RecallCounts() for name in CLASSES}
        self.requests = 0

    # ------------------------------------------------------------------ parts

    def _slots_of_text(self, text: str) -> tuple[int, ...]:
        cached = self._text_cache.get(text)
        if cached is None:
            vocab = self._vocab
            found = {vocab[t] for t in terms(text) if t in vocab}
            found.update(slot for slot, probe in self._texts if probe in text)
            cached = tuple(sorted(found))
            self._text_cache[text] = cached
        return cached

    def slots(self, part: Part) -> tuple[int, ...]:
        """The probe slots ``part`` shows (cached per part)."""
        cached = self._part_slots.get(id(part))
        if cached is not None and cached[0] is part:
            return cached[1]
        texts = part_texts(part)
        if len(texts) == 1:
            slots = self._slots_of_text(texts[0])
        else:
            merged: set[int] = set()
            for text in texts:
                merged.update(self._slots_of_text(text))
            slots = tuple(sorted(merged))
        self._part_slots[id(part)] = (part, slots)
        return slots

    def _enter(self, part: Part) -> None:
        count = self._count
        for slot in self.slots(part):
            count[slot] += 1
            if count[slot] == 1:
                self._became(slot, 1)

    def _leave(self, part: Part) -> None:
        count = self._count
        for slot in self.slots(part):
            count[slot] -= 1
            if count[slot] == 0:
                self._became(slot, -1)

    def _became(self, slot: int, delta: int) -> None:
        for index in self._probes_of_slot[slot]:
            if self._active[index]:
                self._visible_due[self.probes.probes[index].cls] += delta

    # ------------------------------------------------------------------ requests

    def score(self, sent: Sequence[CanonicalMessage]) -> dict[str, RecallCounts]:
        """Score the next request's sent context; returns this request's counts per class."""
        self.requests += 1
        request = self.requests
        for index in self._by_due.get(request, ()):
            probe = self.probes.probes[index]
            self._active[index] = True
            self._due[probe.cls] += 1
            if self._count[self._slot_of_probe[index]] > 0:
                self._visible_due[probe.cls] += 1
        parts = [p for m in sent for p in m.parts]
        old = self._parts
        same = 0
        limit = min(len(old), len(parts))
        while same < limit and old[same] is parts[same]:
            same += 1
        for part in old[same:]:
            self._leave(part)
        for part in parts[same:]:
            self._enter(part)
        self._parts = parts
        if len(self._part_slots) > 4 * len(parts) + 256:
            keep = {id(p) for p in parts}
            self._part_slots = {k: v for k, v in self._part_slots.items() if k in keep}
        counts = {cls: RecallCounts(self._visible_due[cls], self._due[cls]) for cls in PROBE_CLASSES}
        continuation = RecallCounts()
        older = RecallCounts()
        if request <= len(self.probes.continuations):
            entry = self.probes.continuations[request - 1]
            for term in entry.identifiers:
                visible = self._count[self._vocab[term]] > 0
                continuation.due += 1
                continuation.visible += visible
                if term in entry.older:
                    older.due += 1
                    older.visible += visible
        counts["continuation"] = continuation
        counts["older_continuation"] = older
        for name, value in counts.items():
            self.totals[name].add(value)
        return counts

    def visible(self, text: str) -> bool:
        """Whether the probe string ``text`` is visible in the last context scored."""
        slot = self._vocab.get(text)
        if slot is None:
            slot = next((s for s, probe in self._texts if probe == text), None)
        return slot is not None and self._count[slot] > 0
