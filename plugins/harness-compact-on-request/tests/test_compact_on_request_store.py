"""Durable: a real SQLite store keeps the compacted view, its log the originals, and the guard's marks."""

from __future__ import annotations

from typing import Any

from harness_compact_on_request import CompactOnRequest, status_of
from harness_recall import Recall

from harness import Agent, CanonicalMessage, Session, TextPart, ToolCallPart, ToolReturnPart
from harness.models.function import FunctionModel
from harness.session import SessionStore
from harness.tokens import TokenCounter


def read_file(path: str) -> str:
    """Read a file of the project.

    Args:
        path: The file.
    """
    return f"contents of {path}\n" + "".join(f"{path} line {n}: some text of the file\n" for n in range(300))


def call(call_id: str, tool: str, **args: Any) -> ToolCallPart:
    return ToolCallPart(tool_call_id=call_id, tool_name=tool, args=args)


def respond(*parts: ToolCallPart | str) -> CanonicalMessage:
    return CanonicalMessage.response(*(TextPart(p) if isinstance(p, str) else p for p in parts))


def returns(messages: list[CanonicalMessage], tool: str) -> list[ToolReturnPart]:
    return [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart) and p.tool_name == tool]


def test_the_store_keeps_the_compacted_view_and_the_log_the_originals(sqlite_store: SessionStore) -> None:
    model = FunctionModel.from_responses(
        respond(call("c1", "read_file", path="a.py")),
        respond(call("c2", "read_file", path="b.py")),
        respond(call("k1", "compact_context", reason="reads done")),
        "All done.",
    )
    agent = Agent(
        model, tools=[read_file], capabilities=[CompactOnRequest(stack="clear_tool_results:keep_pairs=1")]
    )
    session = Session.create(store=sqlite_store)
    agent.run_sync("Read the files.", session=session)

    reopened = Session.open(sqlite_store, session.session_id)
    view = reopened.messages
    placeholders = [str(p.content) for p in returns(view, "read_file")]
    assert len(placeholders) == 2
    assert all(text.startswith("[tool result cleared]") for text in placeholders), placeholders
    assert all("line 299" not in text for text in placeholders)
    [answer] = returns(view, "compact_context")
    assert status_of(answer) == "compacted"
    log = reopened.transcript()
    assert [p.content for p in returns(log, "read_file")] == [read_file("a.py"), read_file("b.py")]
    [logged] = returns(log, "compact_context")
    assert status_of(logged) is None, "the log keeps the answer as the tool wrote it"
    assert logged.content == "The context will be compacted before your next turn: reason 'reads done'."
    edits = sqlite_store.edits(session.session_id)
    strategies = [event["strategy"] for edit in edits for event in edit.events]
    assert strategies == ["clear_tool_results", "compact_on_request"]
    assert reopened.total_tokens == TokenCounter().count_messages(view)


def test_the_guard_holds_across_runs_and_processes(sqlite_store: SessionStore) -> None:
    first = FunctionModel.from_responses(
        respond(call("c1", "read_file", path="a.py")),
        respond(call("k1", "compact_context", reason="first run")),
        "Done for now.",
    )
    capability = CompactOnRequest(stack="clear_tool_results:keep_pairs=1", min_messages_between=3)
    session = Session.create(store=sqlite_store)
    Agent(first, tools=[read_file], capabilities=[capability]).run_sync("Read a.", session=session)
    # A new agent, a new capability object, the session read back from the store: only the marks remain.
    second = FunctionModel.from_responses(respond(call("k2", "compact_context", reason="again")), "Ok.")
    again = CompactOnRequest(stack="clear_tool_results:keep_pairs=1", min_messages_between=3)
    reopened = Session.open(sqlite_store, session.session_id)
    Agent(second, tools=[read_file], capabilities=[again]).run_sync("Go on.", session=reopened)
    view = Session.open(sqlite_store, session.session_id).messages
    assert [status_of(p) for p in returns(view, "compact_context")] == ["compacted", "refused"]
    [_, refused] = returns(view, "compact_context")
    assert "only 2 message(s) of work were added since (at least 3 needed)" in str(refused.content)


def test_placeholders_of_its_stack_carry_recall_references(sqlite_store: SessionStore) -> None:
    model = FunctionModel.from_responses(
        respond(call("c1", "read_file", path="a.py")),
        respond(call("c2", "read_file", path="b.py")),
        respond(call("k1", "compact_context", reason="reads done")),
        "All done.",
    )
    capabilities = [CompactOnRequest(stack="clear_tool_results:keep_pairs=1"), Recall()]
    agent = Agent(model, tools=[read_file], capabilities=capabilities)
    session = Session.create(store=sqlite_store)
    agent.run_sync("Read the files.", session=session)
    names = [type(c).__name__ for c in agent.plugin_manager.capabilities]
    assert names.index("Recall") < names.index("CompactOnRequest"), "recall runs first (runs_after)"
    cleared = [str(p.content) for p in returns(model.requests[3], "read_file")]
    assert all("[recall: r" in text for text in cleared), cleared
