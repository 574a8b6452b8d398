"""Regenerate the embedded demo transcript, ``harness/cli/demo/transcript.json``.

The transcript is synthetic (written by this script, not recorded): a coding agent fixing a bug
in a small project, reading the same files several times, running tests that fail and then pass.
It is long enough to overflow the small context window the demo sets, so every capability of the
default stack has work to do.

Run: ``uv run python examples/make_demo_transcript.py``
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.core import (
    CanonicalMessage,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from harness.wire import dump_messages

TARGET = Path(__file__).resolve().parents[1] / "harness" / "cli" / "demo" / "transcript.json"
MODULES = ["parser", "tokenizer", "render", "config", "cli", "cache"]


def module_source(name: str, revision: int) -> str:
    """Return a plausible ~2.5 KB module body."""
    lines = [f'"""The {name} module of the inventory tool (revision {revision})."""', ""]
    for i in range(28):
        lines.append(f"def {name}_step_{i}(items: list[str], limit: int = {i + 3}) -> list[str]:")
        body = "items[:limit]" if not (name == "parser" and i == 7 and revision == 0) else "items[:limit - 1]"
        lines.append(f"    return [item.strip() for item in {body}]")
        lines.append("")
    return "\n".join(lines)


def build() -> list[CanonicalMessage]:
    """The whole synthetic session."""
    messages: list[CanonicalMessage] = [
        CanonicalMessage.request(
            SystemPromptPart("You are a careful coding agent. Use the tools to inspect and fix the project."),
            UserPromptPart(
                "parser_step_7 drops the last item of every batch. Find the bug, fix it, and make the "
                "test suite pass. Explain the fix when you are done."
            ),
        )
    ]
    call = 0

    def step(thought: str, tool: str, args: dict[str, str], result: str) -> None:
        nonlocal call
        call += 1
        call_id = f"demo_call_{call:03d}"
        messages.append(
            CanonicalMessage.response(
                TextPart(thought), ToolCallPart(tool_call_id=call_id, tool_name=tool, args=args)
            )
        )
        messages.append(
            CanonicalMessage.request(ToolReturnPart(tool_call_id=call_id, tool_name=tool, content=result))
        )

    step(
        "Let me look at the project layout.",
        "list_files",
        {"path": "."},
        "\n".join(f"inventory/{m}.py" for m in MODULES) + "\ntests/test_parser.py\npyproject.toml",
    )
    for round_ in range(3):
        for name in MODULES:
            step(
                f"Reading {name}.py (pass {round_ + 1}) to understand how batches flow.",
                "read_file",
                {"path": f"inventory/{name}.py"},
                module_source(name, 0),
            )
        step(
            "Running the tests to see the failure.",
            "run_command",
            {"command": "pytest -q tests"},
            "F.......\nFAILED tests/test_parser.py::test_batch_keeps_last_item - AssertionError: "
            "assert ['a', 'b'] == ['a', 'b', 'c']\n1 failed, 7 passed in 0.21s\nexit status 1",
        )
    step(
        "The slice in parser_step_7 is off by one. Fixing it.",
        "edit_file",
        {"path": "inventory/parser.py", "old": "items[:limit - 1]", "new": "items[:limit]"},
        "Edited inventory/parser.py: 1 replacement.",
    )
    step(
        "Re-reading the fixed module.",
        "read_file",
        {"path": "inventory/parser.py"},
        module_source("parser", 1),
    )
    step(
        "Running the tests again.",
        "run_command",
        {"command": "pytest -q tests"},
        "........\n8 passed in 0.19s\nexit status 0",
    )
    messages.append(
        CanonicalMessage.response(
            TextPart(
                "Fixed: parser_step_7 sliced `items[:limit - 1]`, dropping the last item of each batch. "
                "It now slices `items[:limit]`, and all 8 tests pass."
            )
        )
    )
    return messages


if __name__ == "__main__":
    TARGET.parent.mkdir(parents=True, exist_ok=True)
    TARGET.write_bytes(json.dumps(json.loads(dump_messages(build())), indent=1).encode() + b"\n")
    print(f"wrote {TARGET}")
