"""Recall inside real agent runs on a real SQLite store (harness.Agent + FunctionModel)."""

from __future__ import annotations

import re
from pathlib import Path

from harness_clear_tool_results import DEFAULT_PLACEHOLDER, ClearToolResults
from harness_recall import Recall, read_reference

from harness import (
    Agent,
    CanonicalMessage,
    RetryPromptPart,
    Session,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from harness.core.messages import message_text
from harness.history import check_invariants
from harness.models.function import FunctionInfo, FunctionModel
from harness.session import SessionStore
from harness.stores import open_store

HINT = re.compile(r"\[recall: ([^\]]+)\]")
READS = 6
# Bare placeholders here: what clearing keeps of a result is tested in harness-clear-tool-results.


def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: The file.
    """
    return f"contents of {path}: the phrase zebra-quartz-{path} appears here\n" + "filler line\n" * 150


def returns(messages: list[CanonicalMessage]) -> list[ToolReturnPart]:
    return [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]


class Script:
    """Reads READS files, then calls the recall tools as ``plan`` says, then answers."""

    def __init__(self, plan: list[tuple[str, dict[str, object]] | None]) -> None:
        self.plan = plan
        self.answers: list[str] = []
        self.seen_placeholders: list[str] = []

    def __call__(self, messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage | str:
        step = sum(1 for m in messages if m.kind == "response")
        if step < READS:
            return CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"c{step}", tool_name="read_file", args={"path": f"f{step}.py"})
            )
        last = messages[-1].parts[0]
        if step > READS:
            assert isinstance(last, ToolReturnPart | RetryPromptPart)
            self.answers.append(str(last.content))
        index = step - READS
        if index >= len(self.plan):
            return "done"
        action = self.plan[index]
        if action is None:  # recall what the first cleared placeholder names
            first = returns(messages)[0]
            self.seen_placeholders.append(str(first.content))
            match = HINT.search(str(first.content))
            if match is None:
                return CanonicalMessage.response(TextPart("no reference to recall"))
            action = ("recall", {"ref": match.group(1)})
        name, args = action
        return CanonicalMessage.response(ToolCallPart(tool_call_id=f"t{step}", tool_name=name, args=args))


def clearing() -> ClearToolResults:
    return ClearToolResults(max_messages=6, keep_pairs=1, keep_paths=False)


def agent_for(script: Script, *capabilities: object) -> Agent:
    return Agent(FunctionModel(script), tools=[read_file], capabilities=list(capabilities), max_iterations=30)


async def test_the_model_recalls_a_cleared_result_from_the_log(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/s.db")
    session = Session.create(store=store)
    script = Script([None])
    agent = agent_for(script, clearing(), Recall())
    assert {"recall", "search_history"} <= set(agent.tools)  # the Agent takes the capability's tools
    result = await agent.run("read everything", session=session)
    assert result.output == "done"
    assert check_invariants(result.all_messages) == []
    assert script.seen_placeholders == [f"{DEFAULT_PLACEHOLDER} [recall: r2.0]"]
    assert script.answers == [f"r2.0 tool-return of read_file (call c0):\n{read_file('f0.py')}"]
    # the session as stored: the view keeps the placeholder, the log the original
    store.close()
    reopened_store = open_store(f"sqlite:///{tmp_path}/s.db")
    reopened = Session.open(reopened_store, session.session_id)
    assert str(returns(reopened.messages)[0].content) == f"{DEFAULT_PLACEHOLDER} [recall: r2.0]"
    assert read_reference(reopened, "r2.0", max_chars=10_000).endswith(read_file("f0.py"))
    reopened_store.close()


async def test_search_history_finds_a_phrase_only_a_cleared_result_held(store: SessionStore) -> None:
    session = Session.create(store=store)
    script = Script([("search_history", {"query": "zebra-quartz-f1.py"})])
    result = await agent_for(script, clearing(), Recall()).run("read everything", session=session)
    assert result.output == "done"
    # the phrase is nowhere in the view the model now sees but in the search's own call and answer
    view = [message_text(m) for m in session.messages if not m.tool_calls]
    assert [t for t in view if "zebra-quartz-f1.py" in t] == [script.answers[0]]
    (answer,) = script.answers
    assert answer.startswith("1 match for 'zebra-quartz-f1.py'")
    assert "\n- r4.0 tool-return of read_file (call c1): " in answer
    assert str(returns(session.messages)[1].content) == f"{DEFAULT_PLACEHOLDER} [recall: r4.0]"


async def test_a_session_without_a_store_gets_no_references(tmp_path: Path) -> None:
    session = Session()  # in memory: nothing could be fetched back
    script = Script([("recall", {"ref": "r2.0"})])
    result = await agent_for(script, clearing(), Recall()).run("read everything", session=session)
    assert result.output == "done"
    cleared = returns(result.all_messages)[: READS - 1]
    assert [r.content for r in cleared] == [DEFAULT_PLACEHOLDER] * (READS - 1)
    (answer,) = script.answers
    assert "recall is unavailable: this session is not kept in a session store" in answer


async def test_without_recall_a_stored_sessions_placeholders_are_unchanged(store: SessionStore) -> None:
    session = Session.create(store=store)
    script = Script([None])
    agent = agent_for(script, clearing())
    assert "recall" not in agent.tools
    await agent.run("read everything", session=session)
    cleared = [r for r in returns(session.messages) if str(r.content).startswith("[tool")]
    assert len(cleared) == READS - 1
    assert all(r.content == DEFAULT_PLACEHOLDER for r in cleared)
    assert script.seen_placeholders == [DEFAULT_PLACEHOLDER]


async def test_an_invalid_reference_is_a_retry_prompt_and_the_run_goes_on(store: SessionStore) -> None:
    session = Session.create(store=store)
    script = Script([("recall", {"ref": "r999"}), ("recall", {"ref": "nonsense here"})])
    result = await agent_for(script, Recall()).run("read everything", session=session)
    assert result.output == "done"
    assert "r999 is not in this session's log" in script.answers[0]
    assert "is not a reference; use r12 (log message 12)" in script.answers[1]
