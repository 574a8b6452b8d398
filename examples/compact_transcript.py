"""Compact a saved transcript with a tiered stack, outside any agent run.

What it shows:

* Loading a pydantic-ai JSON transcript (``ModelMessagesTypeAdapter`` dumps and the
  contract's minimal form both work) with ``harness.wire.load_messages``. Without an
  argument it uses the transcript embedded in the package, ``harness.cli.demo`` /
  ``transcript.json``, read through ``importlib.resources``.
* ``TieredCompaction`` running cheaper strategies first and stopping as soon as the
  history fits the target: ``DeduplicateFileReads`` -> ``ClearToolResults`` ->
  ``SummarizingCompaction`` with the offline ``StructuralDigest`` (no model needed) ->
  ``SlidingWindow``.
* ``harness.run.compaction.compact_sync(..., force=True)``: what a ``/compact`` command does.
  It works on a copy; every edit comes back as a ``CompactionEvent``.
* Writing the result with ``harness.wire.dump_messages`` (pydantic-ai can load it back)
  and checking it with ``check_invariants``.

Run it with ``uv run python examples/compact_transcript.py [TRANSCRIPT] [--output OUT]
[--window N] [--target F]`` (defaults: ``compacted.json`` in the current folder, an
8,000-token window, a target of 0.2 of it). A file that is not a history exits with
status 2 and the ``WireFormatError`` naming the problem.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from importlib.resources import files
from pathlib import Path

from harness import HarnessExperimentalWarning, UserPromptPart, WireFormatError
from harness.history import check_invariants
from harness.run import compact_sync
from harness.wire import dump_messages, load_messages

warnings.filterwarnings("ignore", category=HarnessExperimentalWarning)

from harness_clear_tool_results import ClearToolResults  # noqa: E402
from harness_dedupe_file_reads import DeduplicateFileReads  # noqa: E402
from harness_sliding_window import SlidingWindow  # noqa: E402
from harness_summarizing import (  # noqa: E402
    StructuralDigest,
    SummarizingCompaction,
    find_summary_parts,
    summary_text,
)
from harness_tiered import TieredCompaction  # noqa: E402


def build_stack(window: int, target: float) -> TieredCompaction:
    """The tiered stack: dedupe, clear, summarize (structural digest), slide.

    The tiers' own triggers are bypassed (``TieredCompaction`` calls their ``compact``
    step directly), so they only need a valid configuration.
    """
    trigger = min(1.0, target + 0.3)
    return TieredCompaction(
        [
            DeduplicateFileReads(),
            ClearToolResults(keep_pairs=3, max_fraction=trigger, context_window=window),
            SummarizingCompaction(
                keep_messages=6, summarizer=StructuralDigest(), max_fraction=trigger, context_window=window
            ),
            SlidingWindow(keep_messages=6, max_fraction=trigger, context_window=window),
        ],
        target_fraction=target,
        context_window=window,
    )


def main(argv: list[str] | None = None) -> int:
    """Compact the transcript and write the result; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("transcript", nargs="?", type=Path, help="pydantic-ai JSON file (default: the demo)")
    parser.add_argument("--output", type=Path, default=Path("compacted.json"), help="result file")
    parser.add_argument("--window", type=int, default=8_000, help="context window in tokens")
    parser.add_argument("--target", type=float, default=0.2, help="target size as a fraction of the window")
    args = parser.parse_args(argv)

    try:
        if args.transcript is None:
            name = "harness.cli.demo/transcript.json (embedded)"
            messages = load_messages(files("harness.cli.demo").joinpath("transcript.json").read_bytes())
        else:
            name = str(args.transcript)
            messages = load_messages(args.transcript.read_bytes())
    except (OSError, WireFormatError) as exc:
        print(f"error: cannot load {args.transcript}: {exc}", file=sys.stderr)
        return 2
    window: int = args.window
    target: float = args.target
    print(f"loaded {name}: {len(messages)} messages")

    result = compact_sync(messages, [build_stack(window, target)], context_window=window, force=True)
    for event in result.events:
        print(
            f"  {event.strategy:<20} {event.messages_before:3d} -> {event.messages_after:3d} messages  "
            f"{event.tokens_before:7,} -> {event.tokens_after:7,} tokens"
        )
    goal = int(window * target)
    print(f"tokens: {result.tokens_before:,} -> {result.tokens_after:,} (target {goal:,}, window {window:,})")
    print(f"fits the target: {result.tokens_after <= goal}")
    for message_index, part_index in find_summary_parts(result.messages):
        part = result.messages[message_index].parts[part_index]
        if isinstance(part, UserPromptPart):
            lines = summary_text(part).strip().splitlines()
            print(f"summary ({len(lines)} lines) starts: {lines[0][:80]}")
    violations = check_invariants(result.messages)
    print(f"messages: {len(messages)} -> {len(result.messages)}, invariant violations: {len(violations)}")

    output: Path = args.output
    output.write_bytes(dump_messages(result.messages))
    print(f"wrote {output} ({len(load_messages(output.read_bytes()))} messages)")
    return 0 if not violations else 1


if __name__ == "__main__":
    raise SystemExit(main())
