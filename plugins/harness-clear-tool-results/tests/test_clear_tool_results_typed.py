"""ClearToolResults and typed tool parts: a pair whose call or return declares a tool kind is never cleared.

The end-to-end check, with pydantic-ai's real ``ToolSearch``, is
``tests/interop/test_interop_tool_search.py``.
"""

from __future__ import annotations

from harness_clear_tool_results import ClearToolResults

from harness.core import CanonicalMessage, ToolCallPart, ToolReturnPart, UserPromptPart, declared_tool_kind
from harness.tokens import TokenCounter


def test_clear_tool_results_leaves_a_pair_with_a_declared_kind_alone() -> None:
    history = [
        CanonicalMessage.request(UserPromptPart(content="q")),
        CanonicalMessage.response(
            ToolCallPart(
                tool_call_id="s",
                tool_name="search_tools",
                args={"queries": ["x" * 400]},
                extra={"tool_kind": "tool-search"},
            )
        ),
        CanonicalMessage.request(
            ToolReturnPart(
                tool_call_id="s",
                tool_name="search_tools",
                content={"discovered_tools": [{"name": f"tool_{n}"} for n in range(50)]},
                extra={"tool_kind": "tool-search"},
            )
        ),
        CanonicalMessage.response(ToolCallPart(tool_call_id="r", tool_name="read", args={"path": "a" * 400})),
        CanonicalMessage.request(ToolReturnPart(tool_call_id="r", tool_name="read", content="y" * 400)),
        CanonicalMessage.request(UserPromptPart(content="next")),
    ]
    clear = ClearToolResults(max_messages=1, keep_pairs=0, clear_tool_inputs=True)
    changes, ids, _freed = clear.plan(history, TokenCounter())
    assert ids == ["r"]
    assert set(changes) == {3, 4}
    assert declared_tool_kind(history[2].parts[0]) == "tool-search"
    assert declared_tool_kind(history[4].parts[0]) is None
