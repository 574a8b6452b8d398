"""A capability stack keeping a long coding session inside a small context window.

What it shows:

* A scripted coding agent (:class:`~harness.models.function.FunctionModel`) that reads the
  files of a temporary project over and over and runs its tests, 48 tool calls in one run,
  through two real tools. The tool output alone adds up to about 20,000 tokens.
* The stack, cheapest first. ``LimitWarner`` is listed first on purpose: it declares
  ``runs_after`` the compaction capabilities, so the plugin manager moves it last and its
  figures describe the history that is actually sent.

  - ``DeduplicateFileReads``: above 2,000 tokens, an earlier read of a file that was read
    again is replaced by a pointer to the newer read;
  - ``ClearToolResults``: once 12 messages followed its previous batch, old tool
    results are cleared in one batch, keeping the newest three;
  - ``SlidingWindow``: above 3,000 tokens, only the newest 1,500 tokens are kept (plus
    the task);
  - ``LimitWarner``: at 90 % of the iteration limit, a warning is sent with the request
    only, never stored.

* An observer plugin: a plain class whose ``@hookimpl`` methods ``on_compaction`` and
  ``on_tool`` print every compaction event and count tool-call transitions, and whose
  ``before_model_request`` (run after every capability) measures what is actually sent.
* At the end: the largest request stayed under the limit and the history passes
  ``check_invariants``.

Run it with ``uv run python examples/capability_stack.py``.
"""

from __future__ import annotations

import tempfile
import warnings
from collections import Counter
from pathlib import Path

from harness import CanonicalMessage, HarnessExperimentalWarning, TextPart, ToolCallPart
from harness.capabilities import CompactionEvent, RequestContext
from harness.history import check_invariants
from harness.hooks import PluginManager, hookimpl
from harness.models.function import FunctionInfo, FunctionModel
from harness.run import Agent
from harness.tokens import TokenCounter
from harness.tools import RunContext, ToolEvent

warnings.filterwarnings("ignore", category=HarnessExperimentalWarning)

from harness_clear_tool_results import ClearToolResults  # noqa: E402
from harness_dedupe_file_reads import DeduplicateFileReads  # noqa: E402
from harness_limit_warner import LimitWarner, is_warning_part  # noqa: E402
from harness_sliding_window import SlidingWindow  # noqa: E402

CONTEXT_WINDOW = 8_000
HARD_LIMIT = 3_000
"""The sliding window's trigger: no request may be sent above this many tokens."""
FILES = ("parser.py", "lexer.py", "render.py", "config.py")
TOOL_CALLS = 48
MAX_ITERATIONS = TOOL_CALLS + 4


def source(name: str) -> str:
    """A plausible module of about 600 tokens."""
    stem = name.removesuffix(".py")
    lines = [f'"""The {stem} module."""', ""]
    for i in range(12):
        lines += [f"def {stem}_step_{i}(items: list[str], limit: int = {i + 2}) -> list[str]:"]
        lines += [f"    return [item.strip().lower() for item in items[:limit] if item != {i}]", ""]
    return "\n".join(lines)


class ScriptedCoder:
    """Plays a coding agent: reads the project's files round-robin, then answers."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage | str:
        """Answer one request."""
        if self.calls == TOOL_CALLS:
            return f"Done after {TOOL_CALLS} tool calls: parser_step_7 needs the off-by-one fix."
        self.calls += 1
        call_id = f"call_{self.calls:02d}"
        if self.calls % 3 == 0:
            return CanonicalMessage.response(
                TextPart("Running the tests."),
                ToolCallPart(tool_call_id=call_id, tool_name="run_tests", args={"only": "parser"}),
            )
        name = FILES[self.calls % len(FILES)]
        return CanonicalMessage.response(
            TextPart(f"Step {self.calls}: the tests still fail, so I am reading {name} once more."),
            ToolCallPart(tool_call_id=call_id, tool_name="read_file", args={"path": name}),
        )


class Observer:
    """An observer plugin: prints compaction events, counts tool events, measures requests."""

    def __init__(self) -> None:
        self.tool_events: Counter[str] = Counter()
        self.strategies: Counter[str] = Counter()
        self.sent_tokens: list[int] = []
        self.warnings_sent = 0

    @hookimpl
    def on_compaction(self, ctx: RequestContext, event: CompactionEvent) -> None:
        """Print one line per edit a capability made."""
        self.strategies[event.strategy] += 1
        print(
            f"  request {ctx.requests + 1:2d} {event.strategy:<18} "
            f"{event.messages_before:3d}->{event.messages_after:3d} messages "
            f"{event.tokens_before:6,}->{event.tokens_after:6,} tokens "
            f"(cleared {len(event.cleared_tool_call_ids)}, removed {len(event.removed_tool_call_ids)})"
        )

    @hookimpl
    def on_tool(self, ctx: RunContext, event: ToolEvent) -> None:
        """Count tool-call transitions (registered, started, completed, ...)."""
        self.tool_events[event.kind] += 1

    @hookimpl
    def before_model_request(self, ctx: RequestContext) -> None:
        """Runs after every capability: measure what is actually sent."""
        self.sent_tokens.append(ctx.count_tokens())
        self.warnings_sent += len(ctx.request_scoped)


def main() -> None:
    """Run the session and print what the stack did."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        outputs: list[str] = []
        for name in FILES:
            (root / name).write_text(source(name))

        def read_file(path: str) -> str:
            """Read a file of the project.

            Args:
                path: Path relative to the project root.
            """
            outputs.append((root / path).read_text())
            return outputs[-1]

        def run_tests(only: str) -> str:
            """Run the test suite.

            Args:
                only: Run only the tests whose name contains this.
            """
            lines = [f"tests/test_{only}.py::test_step_{i} PASSED" for i in range(30)]
            lines += [f"tests/test_{only}.py::test_step_7 FAILED", "1 failed, 30 passed"]
            outputs.append("\n".join(lines))
            return outputs[-1]

        observer = Observer()
        manager = PluginManager()
        manager.register(observer)
        agent = Agent(
            FunctionModel(ScriptedCoder(), context_window=CONTEXT_WINDOW),
            tools=[read_file, run_tests],
            system_prompt="You are a careful coding agent.",
            plugin_manager=manager,
            max_iterations=MAX_ITERATIONS,
            capabilities=[
                LimitWarner(warn_on=["iterations"], warning_threshold=0.9),  # moves last: runs_after
                DeduplicateFileReads(max_tokens=2_000),
                ClearToolResults(max_messages=12, keep_pairs=3),
                SlidingWindow(max_tokens=HARD_LIMIT, keep_tokens=1_500),
            ],
        )
        print("resolved order:", " -> ".join(str(getattr(c, "name", c)) for c in manager.capabilities))
        print("compaction events:")
        result = agent.run_sync("parser_step_7 drops an item. Read the code until you find out why.")

    counter = TokenCounter()
    raw_tokens = sum(counter.count_text(text) for text in outputs)
    stored = sum(is_warning_part(p) for m in result.all_messages for p in m.parts)
    print(f"output: {result.output}")
    print(f"requests: {result.iterations}, tool events: {dict(sorted(observer.tool_events.items()))}")
    print(f"events by strategy: {dict(sorted(observer.strategies.items()))}")
    largest = max(observer.sent_tokens)
    print(f"tool output: {raw_tokens:,} tokens in total; largest request sent: {largest:,} tokens")
    print(f"every request at most {HARD_LIMIT:,} tokens: {largest <= HARD_LIMIT}")
    print(f"limit warnings sent (request-scoped): {observer.warnings_sent}, stored: {stored}")
    violations = check_invariants(result.all_messages)
    print(f"final history: {len(result.all_messages)} messages, invariant violations: {len(violations)}")


if __name__ == "__main__":
    main()
