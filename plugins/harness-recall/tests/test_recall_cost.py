"""What recall costs per request, counted with the project's TokenCounter (the README's figures)."""

from __future__ import annotations

import pytest
from harness_clear_tool_results import DEFAULT_PLACEHOLDER
from harness_recall import Recall, hint

from harness import TokenCounter, ToolReturnPart


@pytest.mark.parametrize(
    ("ref", "tokens"),
    [("r2.0", 8), ("r42.0", 8), ("r1234.1", 9), ("r98765.3", 9), ("r0-r41", 8), ("r0-r1234", 9)],
)
def test_a_reference_costs_eight_or_nine_tokens(ref: str, tokens: int) -> None:
    counter = TokenCounter()
    assert counter.count_text(hint(ref)) == tokens
    plain = ToolReturnPart(tool_call_id="c1", tool_name="read_file", content=DEFAULT_PLACEHOLDER)
    referenced = ToolReturnPart(
        tool_call_id="c1", tool_name="read_file", content=DEFAULT_PLACEHOLDER + hint(ref)
    )
    assert counter.count_part(referenced) - counter.count_part(plain) == tokens


def test_the_tool_definitions_cost_under_two_hundred_tokens() -> None:
    counter = TokenCounter()
    both = counter.count_tools([t.definition for t in Recall().tools])
    alone = counter.count_tools([t.definition for t in Recall(search=False).tools])
    assert both == 186
    assert alone == 108
