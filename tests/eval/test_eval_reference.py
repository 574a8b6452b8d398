"""``--reference``: the reference's contexts read back and scored by harness's own code.

The end-to-end test creates the reference environment from PyPI when it is missing, so it
is marked ``slow`` and runs only when selected (``-m slow`` or ``HARNESS_SLOW=1``); it
skips when the environment cannot be created (no network).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import cli
from harness.core import CanonicalMessage
from harness.errors import EvalRunError
from harness.eval import extract_probes, load_prices
from harness.eval.pricing import price_requests
from harness.eval.recall import RecallScorer
from harness.eval.reference import score_reference_run
from harness.eval.serialize import RequestTokens
from harness.history import check_invariants
from harness.tokens import TokenCounter
from harness.wire import dump_messages


def _record(contexts: list[list[CanonicalMessage]]) -> dict[str, object]:
    """What the driver prints for one run: each distinct message once, requests as indices."""
    table: dict[str, int] = {}
    messages: list[object] = []
    requests: list[list[int]] = []
    for context in contexts:
        indices: list[int] = []
        for message in context:
            text = dump_messages([message]).decode()
            if text not in table:
                table[text] = len(messages)
                messages.append(json.loads(text)[0])
            indices.append(table[text])
        requests.append(indices)
    return {
        "file": "bug-fix.json",
        "stack": "clear+window",
        "budget": 8000,
        "spec": "reference stack",
        "messages": messages,
        "requests": requests,
        "error": None,
    }


def test_reference_contexts_score_like_our_own(bug_fix: list[CanonicalMessage]) -> None:
    responses = [i for i, m in enumerate(bug_fix) if m.kind == "response"]
    contexts = [bug_fix[:p] for p in responses]
    contexts[-1] = [bug_fix[0], *bug_fix[5:7]]  # the last request after a window cut
    probes = extract_probes(bug_fix)
    prices = load_prices()
    figures = score_reference_run(_record(contexts), probes, prices)

    counter = TokenCounter(None)
    tokens = RequestTokens(counter)
    scorer = RecallScorer(probes)
    sizes: list[tuple[int, int]] = []
    previous: list[CanonicalMessage] = []
    for context in contexts:
        sizes.append(
            (counter.count_messages(context), tokens.common_prefix(previous, context) if previous else 0)
        )
        scorer.score(context)
        assert not check_invariants(context)
        previous = context
    priced = price_requests(prices, sizes)
    assert figures.side == "reference"
    assert figures.requests == 4
    assert figures.total_tokens == sum(size for size, _ in sizes)
    assert figures.costs == priced.costs
    assert figures.cache_busts == priced.cache_busts == 1
    assert figures.recall == {name: (c.visible, c.due) for name, c in scorer.totals.items()}
    assert figures.recall["older_continuation"] == (2, 2)
    assert figures.recall["error"][0] < figures.recall["error"][1]  # the cut dropped the failing run


def test_a_failed_reference_run_names_the_run(bug_fix: list[CanonicalMessage]) -> None:
    record = {**_record([bug_fix[:1]]), "error": "ValueError: boom"}
    with pytest.raises(EvalRunError, match=r"bug-fix\.json: stack 'reference clear\+window' at budget 8000"):
        score_reference_run(record, extract_probes(bug_fix), load_prices())


def _slow_selected(config: pytest.Config) -> bool:
    markexpr = str(config.getoption("-m") or "")
    return os.environ.get("HARNESS_SLOW") == "1" or ("slow" in markexpr and "not slow" not in markexpr)


@pytest.mark.slow
def test_reference_end_to_end(
    request: pytest.FixtureRequest, tmp_path: Path, bug_fix: list[CanonicalMessage]
) -> None:
    if not _slow_selected(request.config):
        pytest.skip("creates the reference environment from PyPI: run it with -m slow (or HARNESS_SLOW=1)")
    from harness.eval.reference import reference_python

    try:
        reference_python()
    except (subprocess.CalledProcessError, OSError) as exc:
        pytest.skip(f"the reference environment cannot be created here: {exc}")
    recording = tmp_path / "bug-fix.json"
    recording.write_bytes(dump_messages(bug_fix))
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            str(recording),
            "--stack",
            "tiered",
            "--stack",
            "none",
            "--budget",
            "8000",
            "--reference",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    sides = [(row["side"], row["stack"]) for row in document["summary"]]
    assert sides == [("harness", "tiered"), ("harness", "none"), ("reference", "tiered")]
    reference = document["summary"][2]
    assert reference["requests"] == 4
    assert reference["invalid_contexts"] == 0
    # nothing is over 8,000 tokens here, so the reference's stack keeps everything, like `none`
    for name, entry in reference["recall"].items():
        assert entry["visible"] == entry["due"], name


@pytest.mark.slow
def test_both_loops_replay_the_same_contexts(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    if not _slow_selected(request.config):
        pytest.skip("creates the reference environment from PyPI: run it with -m slow (or HARNESS_SLOW=1)")
    from harness.eval import evaluate
    from harness.eval.reference import reference_python, run_reference
    from harness.testing import corpus_files

    files = [f for f in corpus_files() if f.stem == "mini-swe-agent-django-11099-deepseek-chat"]
    if not files:
        pytest.skip("the transcript corpus is not present (HARNESS_CORPUS)")
    try:
        reference_python()
    except (subprocess.CalledProcessError, OSError) as exc:
        pytest.skip(f"the reference environment cannot be created here: {exc}")
    report = run_reference(evaluate(files, ["none"], [8000], processes=1), stacks=["none"])
    ours, theirs = report.runs
    assert (theirs.side, theirs.stack) == ("reference", "none")
    # pydantic-ai's loop, uncompacted, sends exactly what harness's does: same tokens, same prefixes
    assert (theirs.requests, theirs.total_tokens, theirs.peak_tokens) == (
        ours.requests,
        ours.total_tokens,
        ours.peak_tokens,
    )
    assert theirs.costs == ours.costs
    assert theirs.recall == ours.recall
