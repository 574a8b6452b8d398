"""Recall scoring over sent contexts: hand-checked counts, and incremental == from scratch."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core import CanonicalMessage, TextPart, ToolReturnPart, UserPromptPart, replace
from harness.eval.probes import ProbeSet, extract_probes, part_texts, terms
from harness.eval.recall import CLASSES, RecallScorer


def test_hand_checked_recall_over_four_contexts(bug_fix: list[CanonicalMessage]) -> None:
    probes = extract_probes(bug_fix)
    scorer = RecallScorer(probes)
    summary = CanonicalMessage.request(
        UserPromptPart("Summary: tests failed with NameError in tests/test_main.py")
    )
    contexts = [bug_fix[:1], bug_fix[:3], bug_fix[:5], [summary, bug_fix[6]]]
    per_request = [scorer.score(c) for c in contexts]
    # request 4 lost the task, the constraint, one path, both error lines and the identifiers
    assert {k: (v.visible, v.due) for k, v in per_request[3].items()} == {
        "task": (0, 2),
        "constraint": (0, 1),
        "artifact": (1, 2),
        "error": (0, 2),
        "continuation": (0, 2),
        "older_continuation": (0, 0),
    }
    assert {k: (v.visible, v.due) for k, v in scorer.totals.items()} == {
        "task": (6, 8),
        "constraint": (3, 4),
        "artifact": (4, 5),  # 1 due at request 2, 2 at 3, 2 at 4 (one visible)
        "error": (2, 4),
        "continuation": (4, 6),
        "older_continuation": (2, 2),
    }
    assert scorer.totals["task"].recall == 0.75
    assert scorer.visible("tests/test_main.py")
    assert not scorer.visible("src/app/main.py")


def test_uncompacted_contexts_show_every_due_probe(bug_fix: list[CanonicalMessage]) -> None:
    probes = extract_probes(bug_fix)
    scorer = RecallScorer(probes)
    responses = [i for i, m in enumerate(bug_fix) if m.kind == "response"]
    for position in responses:
        scorer.score(bug_fix[:position])
    for name in CLASSES:
        counts = scorer.totals[name]
        assert counts.visible == counts.due, name
    assert scorer.totals["task"].due == 8  # 2 task probes x 4 requests


def _naive(probes: ProbeSet, contexts: list[list[CanonicalMessage]]) -> dict[str, tuple[int, int]]:
    """Recall recomputed from scratch for every context (no caches, no diff)."""
    totals = {name: [0, 0] for name in CLASSES}
    for request, context in enumerate(contexts, start=1):
        texts = [t for m in context for p in m.parts for t in part_texts(p)]
        shown: set[str] = set()
        for text in texts:
            shown |= terms(text)

        def visible(text: str, term: bool, texts: list[str] = texts, shown: set[str] = shown) -> bool:
            return text in shown if term else any(text in t for t in texts)

        for probe in probes.probes:
            if probe.due <= request:
                totals[probe.cls][1] += 1
                totals[probe.cls][0] += visible(probe.text, probe.term)
        if request <= len(probes.continuations):
            entry = probes.continuations[request - 1]
            for term in entry.identifiers:
                seen = visible(term, True)
                totals["continuation"][1] += 1
                totals["continuation"][0] += seen
                if term in entry.older:
                    totals["older_continuation"][1] += 1
                    totals["older_continuation"][0] += seen
    return {name: (v[0], v[1]) for name, v in totals.items()}


# the fixture's transcript is frozen: sharing it between examples is safe
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(
            st.lists(st.integers(min_value=0, max_value=7), max_size=8),
            st.sets(st.integers(min_value=0, max_value=7), max_size=3),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_incremental_scoring_equals_scoring_from_scratch(
    bug_fix: list[CanonicalMessage], plan: list[tuple[list[int], set[int]]]
) -> None:
    history = bug_fix
    probes = extract_probes(history)
    scorer = RecallScorer(probes)
    contexts: list[list[CanonicalMessage]] = []
    for picks, copied in plan:
        context: list[CanonicalMessage] = []
        for index in picks:
            message = history[index]
            if index in copied:  # an equal message that is another object, with one part edited
                first = message.parts[0]
                edited = (
                    replace(first, content="[cleared]")
                    if isinstance(first, ToolReturnPart)
                    else TextPart("[summary of src/app/main.py]")
                    if message.kind == "response"
                    else first
                )
                message = message.replace(parts=(edited, *message.parts[1:]))
            context.append(message)
        contexts.append(context)
    for context in contexts:
        scorer.score(context)
    assert {k: (v.visible, v.due) for k, v in scorer.totals.items()} == _naive(probes, contexts)
