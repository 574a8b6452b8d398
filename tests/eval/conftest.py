"""Small hand-checked transcripts shared by the ``harness eval`` tests."""

from __future__ import annotations

import pytest

from harness.core import (
    CanonicalMessage,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

TRACEBACK = (
    "<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n"
    '  File "tests/test_main.py", line 3, in <module>\n'
    "NameError: name 'load_yaml' is not defined\n"
    "FAILED tests/test_main.py::test_parse - NameError\n</output>"
)


def bug_fix_transcript() -> list[CanonicalMessage]:
    """Four requests: read, test (fails), fix, done."""
    return [
        CanonicalMessage.request(
            SystemPromptPart("You are a careful agent. Use tool_x wisely."),
            UserPromptPart(
                "Fix the bug in src/app/main.py where parse_config fails. You must not change the "
                "public API. Run the tests with pytest -q before you finish."
            ),
        ),
        CanonicalMessage.response(
            TextPart("I will read src/app/main.py first."),
            ToolCallPart(tool_call_id="c1", tool_name="bash", args={"command": "cat src/app/main.py"}),
        ),
        CanonicalMessage.request(
            ToolReturnPart(
                tool_call_id="c1",
                tool_name="bash",
                content="<returncode>0</returncode>\n<output>\n"
                "def parse_config(path):\n    return load_yaml(path)\n</output>",
            )
        ),
        CanonicalMessage.response(
            ToolCallPart(
                tool_call_id="c2",
                tool_name="bash",
                args={"command": "python -m pytest tests/test_main.py -q"},
            )
        ),
        CanonicalMessage.request(ToolReturnPart(tool_call_id="c2", tool_name="bash", content=TRACEBACK)),
        CanonicalMessage.response(
            TextPart("parse_config calls load_yaml, which is not imported in src/app/main.py."),
            ToolCallPart(
                tool_call_id="c3",
                tool_name="bash",
                args={"command": "sed -i 's/load_yaml/yaml.safe_load/' src/app/main.py"},
            ),
        ),
        CanonicalMessage.request(
            ToolReturnPart(
                tool_call_id="c3",
                tool_name="bash",
                content="<returncode>0</returncode>\n<output>\n</output>\n",
            )
        ),
        CanonicalMessage.response(TextPart("Fixed parse_config in src/app/main.py.")),
    ]


@pytest.fixture
def traceback_text() -> str:
    """A failing test run's output, as mini-swe-agent records it."""
    return TRACEBACK


@pytest.fixture
def bug_fix() -> list[CanonicalMessage]:
    """Four requests: read a file, run the tests (they fail), fix it, report."""
    return bug_fix_transcript()
