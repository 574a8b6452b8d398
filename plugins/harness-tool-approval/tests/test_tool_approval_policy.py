"""Which calls need approval, the approver, the decisions' types, the messages, the wrapper's order."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Generator, Sequence
from typing import Any

import pytest
from harness_tool_approval import (
    DEFAULT_REJECTION,
    NOTES_KEY,
    Approve,
    DecisionError,
    Edit,
    Reject,
    ToolApproval,
)

from harness import Agent, RunResult
from harness.capabilities import ToolCall
from harness.core import CanonicalMessage, RetryPromptPart, ToolCallPart, ToolOutcome, ToolReturnPart
from harness.errors import ApprovalError, CapabilityError, RunStopped, StackConfigError
from harness.hooks import PluginManager, capability_name, hookimpl
from harness.models.function import FunctionInfo, FunctionModel
from harness.tools import RunContext, Tool


def planned(*steps: Sequence[ToolCallPart]) -> FunctionModel:
    """The i-th response makes ``steps[i]``; then the model answers with the last results."""

    def respond(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage | str:
        del info
        step = sum(1 for message in messages if message.kind == "response")
        if step < len(steps):
            return CanonicalMessage.response(*steps[step])
        lines = [
            f"{p.tool_name}: {p.content}"
            for p in messages[-1].parts
            if isinstance(p, ToolReturnPart | RetryPromptPart)
        ]
        return "\n".join(lines)

    return FunctionModel(respond)


class Box:
    """``remove`` and ``look`` tools recording what ran (neither is marked)."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def remove(self, path: str) -> str:
        """Remove a path.

        Args:
            path: The path.
        """
        self.ran.append(f"remove {path}")
        return f"removed {path}"

    def look(self, path: str) -> str:
        """Look at a path.

        Args:
            path: The path.
        """
        self.ran.append(f"look {path}")
        return f"saw {path}"

    def tools(self, **marks: Any) -> list[Tool]:
        return [
            Tool.from_function(self.remove, needs_approval=marks.get("remove", False)),
            Tool.from_function(self.look, needs_approval=marks.get("look", False)),
        ]


def remove(path: str = "x", call_id: str = "c1") -> list[ToolCallPart]:
    return [ToolCallPart(tool_call_id=call_id, tool_name="remove", args={"path": path})]


async def run_once(
    approval: ToolApproval, steps: Sequence[Sequence[ToolCallPart]], **marks: Any
) -> tuple[RunResult, Box]:
    box = Box()
    agent = Agent(planned(*steps), tools=box.tools(**marks), capabilities=[approval])
    return await agent.run("go"), box


def reason_of(result: RunResult) -> str:
    from harness.core import harness_mark

    [part] = [p for p in result.session.messages[-1].parts if harness_mark(p)]
    mark = harness_mark(part)
    assert mark is not None
    return str(mark["reason"])


# ------------------------------------------------------------------------------ which calls


async def test_a_call_of_an_unmarked_tool_runs_at_once() -> None:
    result, box = await run_once(ToolApproval(), [remove()])
    assert result.status == "completed"
    assert box.ran == ["remove x"]


async def test_tools_names_tools_whose_calls_need_approval() -> None:
    result, box = await run_once(ToolApproval(tools=["remove"]), [remove()])
    assert result.status == "awaiting_approval"
    assert box.ran == []
    assert reason_of(result) == "awaiting approval: ToolApproval(tools=...) lists remove"


async def test_a_predicate_on_the_tool_asks_for_some_arguments_only() -> None:
    def dangerous(args: Any) -> bool:
        return str(args["path"]).startswith("/")

    safe, box = await run_once(ToolApproval(), [remove("tmp/a")], remove=dangerous)
    assert safe.status == "completed"
    assert box.ran == ["remove tmp/a"]
    held, box = await run_once(ToolApproval(), [remove("/etc")], remove=dangerous)
    assert held.status == "awaiting_approval"
    assert box.ran == []
    assert (
        reason_of(held) == 'awaiting approval: remove needs approval for these arguments ({"path": "/etc"})'
    )


async def test_require_is_a_predicate_on_the_call() -> None:
    seen: list[tuple[str, str, object]] = []

    def require(call: ToolCall) -> bool:
        seen.append((call.tool_name, call.tool_call_id, call.args))
        return isinstance(call.args, dict) and call.args.get("path") == "secret"

    approval = ToolApproval(require=require)
    result, box = await run_once(approval, [[*remove("secret", "c1"), *remove("public", "c2")]])
    assert [c.tool_call_id for c in result.pending_approvals] == ["c1"]
    assert box.ran == ["remove public"]
    assert sorted(seen) == [("remove", "c1", {"path": "secret"}), ("remove", "c2", {"path": "public"})]
    assert reason_of(result) == "awaiting approval: ToolApproval(require=...) holds this call of remove"


async def test_a_require_that_raises_holds_the_call_and_says_why() -> None:
    def require(call: ToolCall) -> bool:
        raise KeyError("owner")

    result, box = await run_once(ToolApproval(require=require), [remove()])
    assert result.status == "awaiting_approval"
    assert box.ran == []
    assert reason_of(result) == (
        "awaiting approval: ToolApproval(require=...) raised KeyError: 'owner'; held to be safe"
    )


async def test_an_unknown_tool_never_needs_approval_it_gets_the_retry_prompt() -> None:
    approval = ToolApproval(tools=["ghost"], require=lambda call: True)
    result, box = await run_once(approval, [[ToolCallPart(tool_call_id="c1", tool_name="ghost", args={})]])
    assert result.status == "completed"
    assert box.ran == []
    assert result.output is not None
    assert result.output.startswith("ghost: Unknown tool name: 'ghost'")


async def test_the_plugin_works_registered_as_a_plain_plugin_and_from_a_stack_string() -> None:
    manager = PluginManager()
    manager.register(ToolApproval(tools=["remove"]))
    box = Box()
    agent = Agent(planned(remove()), tools=box.tools(), plugin_manager=manager)
    assert (await agent.run("go")).status == "awaiting_approval"

    box = Box()
    agent = Agent(planned(remove()), tools=box.tools(), capabilities=["tool_approval:tools=remove|look"])
    paused = await agent.run("go")
    assert paused.status == "awaiting_approval"
    assert box.ran == []
    done = await agent.run(None, session=paused.session, approvals={"c1": Approve()})
    assert box.ran == ["remove x"]
    assert done.output == "remove: removed x"


def test_the_entry_point_names_the_plugin() -> None:
    [entry] = [ep for ep in importlib.metadata.entry_points(group="harness") if ep.name == "tool_approval"]
    assert entry.load() is ToolApproval
    assert capability_name(ToolApproval()) == "tool_approval"


# ------------------------------------------------------------------------------ the approver


async def test_an_approver_decides_in_process_without_pausing() -> None:
    asked: list[str] = []

    def approver(call: ToolCall) -> Approve | Reject | Edit | None:
        asked.append(call.tool_call_id)
        return {"c1": Approve(), "c2": Reject("not this"), "c3": Edit({"path": "z"})}[call.tool_call_id]

    steps = [
        [
            *remove("a", "c1"),
            *remove("b", "c2"),
            *remove("c", "c3"),
            *[ToolCallPart(tool_call_id="c4", tool_name="look", args={"path": "d"})],
        ]
    ]
    result, box = await run_once(ToolApproval(approver=approver), steps, remove=True)
    assert result.status == "completed"
    assert sorted(asked) == ["c1", "c2", "c3"], "only calls needing approval are asked"
    assert sorted(box.ran) == ["look d", "remove a", "remove z"]
    assert result.output == (
        "remove: removed a\nremove: The user rejected this call: not this\nremove: removed z\nlook: saw d"
    )


async def test_an_approver_returning_none_defers_and_the_resume_decision_wins() -> None:
    asked: list[str] = []

    def approver(call: ToolCall) -> None:
        asked.append(call.tool_call_id)

    box = Box()
    agent = Agent(
        planned(remove()), tools=box.tools(remove=True), capabilities=[ToolApproval(approver=approver)]
    )
    paused = await agent.run("go")
    assert paused.status == "awaiting_approval"
    assert asked == ["c1"]
    done = await agent.run(None, session=paused.session, approvals={"c1": Reject("no")})
    assert asked == ["c1"], "a call with a decision is not asked again"
    assert done.output == "remove: The user rejected this call: no"
    assert box.ran == []


async def test_an_approver_returning_another_type_raises_naming_the_call() -> None:
    with pytest.raises(DecisionError, match=r"the approver's decision for tool call 'c1' is a bool \(True\)"):
        await run_once(ToolApproval(approver=lambda call: True), [remove()], remove=True)  # pyright: ignore[reportArgumentType]


async def test_an_approver_that_raises_is_a_capability_error_naming_the_plugin() -> None:
    def approver(call: ToolCall) -> None:
        raise RuntimeError("the approval service is down")

    with pytest.raises(CapabilityError, match=r"tool_approval.*the approval service is down") as caught:
        await run_once(ToolApproval(approver=approver), [remove()], remove=True)
    assert caught.value.capability == "tool_approval"


# ------------------------------------------------------------------------------ notes and order


class Recorder:
    """A wrapper recording what each call's notes say after the chain, and what it was asked."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.notes: dict[str, Any] = {}
        self.entered: list[str] = []
        self.outcomes: list[str] = []

    @hookimpl(wrapper=True)
    def wrap_tool_call(self, ctx: RunContext, call: ToolCall) -> Generator[None, ToolOutcome, object]:
        del ctx
        self.entered.append(call.tool_call_id)
        outcome = yield
        self.outcomes.append(f"{call.tool_call_id}:{outcome.kind}")
        if NOTES_KEY in call.notes:
            self.notes[call.tool_call_id] = call.notes[NOTES_KEY]
        return outcome


async def test_the_decision_is_recorded_in_the_call_notes_and_an_inner_wrapper_runs_only_for_run_calls() -> (
    None
):
    outer, inner = Recorder("outer"), Recorder("inner")
    box = Box()
    steps = [[*remove("a", "c1"), *remove("b", "c2"), *remove("c", "c3")]]
    agent = Agent(planned(*steps), tools=box.tools(remove=True), capabilities=[outer, ToolApproval(), inner])
    paused = await agent.run("go")
    assert outer.outcomes == ["c1:deferred", "c2:deferred", "c3:deferred"]
    assert inner.entered == [], "a held call never reaches the wrappers inside the approval"
    approvals: dict[str, object] = {"c1": Approve(), "c2": Reject("no"), "c3": Edit({"path": "z"})}
    await agent.run(None, session=paused.session, approvals=approvals)
    assert sorted(inner.entered) == ["c1", "c3"], "a rejected call never reaches them either"
    assert outer.notes == {
        "c1": {"decision": "approve", "by": "approvals"},
        "c2": {"decision": "reject", "by": "approvals", "reason": "no"},
        "c3": {"decision": "edit", "by": "approvals", "original_args": {"path": "c"}, "args": {"path": "z"}},
    }
    assert box.ran == ["remove a", "remove z"]


async def test_a_wrapper_outside_the_approval_sees_a_held_call_twice() -> None:
    """Why the README says to list ToolApproval first: an outer counter counts the pause too."""
    outer = Recorder("counter")
    box = Box()
    agent = Agent(planned(remove()), tools=box.tools(remove=True), capabilities=[outer, ToolApproval()])
    paused = await agent.run("go")
    await agent.run(None, session=paused.session, approvals={"c1": Approve()})
    assert outer.entered == ["c1", "c1"]
    assert outer.outcomes == ["c1:deferred", "c1:returned"]


# ------------------------------------------------------------------------------ messages


async def test_the_rejection_message_is_a_template() -> None:
    approval = ToolApproval(rejection="Denied {tool} ({call_id}): {reason}.")
    result, _ = await run_once(
        ToolApproval(approver=lambda call: Reject("policy"), rejection=approval.rejection),
        [remove()],
        remove=True,
    )
    assert result.output == "remove: Denied remove (c1): policy."
    assert DEFAULT_REJECTION == "The user rejected this call: {reason}"


async def test_the_rejection_message_may_be_a_function_returning_json() -> None:
    def rejection(call: ToolCall, decision: Reject) -> dict[str, Any]:
        return {"rejected": call.tool_name, "why": decision.reason}

    result, _ = await run_once(
        ToolApproval(approver=lambda call: Reject("policy"), rejection=rejection), [remove()], remove=True
    )
    answer = next(p for p in result.session.messages[-2].parts if isinstance(p, ToolReturnPart))
    assert answer.content == {"rejected": "remove", "why": "policy"}


# ------------------------------------------------------------------------------ values


def test_decisions_are_frozen_values() -> None:
    assert Approve() == Approve()
    assert Reject("x") == Reject("x") != Reject("y")
    assert Reject("  ").reason == "no reason given"
    given = {"path": "a"}
    edit = Edit(given)
    given["path"] = "changed"
    assert edit.args == {"path": "a"}, "Edit keeps a copy"
    assert Edit({"path": "a"}) == edit
    assert hash(Edit({"path": "a"})) == hash(edit)
    with pytest.raises(AttributeError):
        edit.args = {}  # type: ignore[misc]


def test_bad_decision_values_raise_type_errors_naming_the_argument() -> None:
    with pytest.raises(TypeError, match=r"Edit\(args\) must be a mapping .* got list"):
        Edit([("path", "a")])  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match=r"Edit\(args\) names its arguments with strings; got the key 1"):
        Edit({1: "a"})  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match=r"Reject\(reason\) must be a str, got int"):
        Reject(3)  # pyright: ignore[reportArgumentType]


def test_the_decision_error_is_an_approval_error_that_stops_the_run() -> None:
    error = DecisionError("c9", 42, source="the decision in approvals")
    assert isinstance(error, ApprovalError)
    assert isinstance(error, RunStopped)
    assert str(error) == (
        "the decision in approvals for tool call 'c9' is a int (42); "
        "give Approve(), Reject(reason) or Edit(args) from harness_tool_approval"
    )


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"tools": "remove"},
            TypeError,
            r"tools must be a list of tool names, not a string; did you mean \['remove'\]",
        ),
        ({"tools": 3}, TypeError, "tools must be a list of tool names, got int"),
        ({"tools": ["ok", ""]}, TypeError, r"tools must hold tool names \(non-empty strings\), got ''"),
        ({"require": "yes"}, TypeError, "require must be a function or None, got str"),
        ({"approver": 1}, TypeError, "approver must be a function or None, got int"),
        ({"rejection": 1}, TypeError, "rejection must be a template string or a function"),
        (
            {"rejection": "No: {why}"},
            ValueError,
            r"rejection template 'No: \{why\}' is invalid .* \{reason\}, \{tool\}, \{call_id\}",
        ),
    ],
)
def test_bad_configuration_raises_naming_the_parameter(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        ToolApproval(**kwargs)


def test_a_bad_stack_string_names_the_entry_and_the_parameter() -> None:
    with pytest.raises(StackConfigError, match="tool_approval"):
        Agent(planned(), capabilities=["tool_approval:colour=blue"])


def test_the_tools_are_kept_as_tool_names() -> None:
    approval = ToolApproval(tools=["b", "a", "a"])
    assert approval.tool_names == frozenset({"a", "b"})
    assert not hasattr(approval, "tools"), "a capability's tools attribute means tools it provides"


def test_approval_errors_are_harness_errors() -> None:
    from harness.errors import HarnessError

    assert issubclass(DecisionError, HarnessError)


async def test_a_held_call_stays_held_when_the_resuming_agent_would_not_ask() -> None:
    box = Box()
    strict = Agent(planned(remove()), tools=box.tools(), capabilities=[ToolApproval(tools=["remove"])])
    paused = await strict.run("go")
    lenient = Agent(planned(remove()), tools=box.tools(), capabilities=[ToolApproval()])
    again = await lenient.run(None, session=paused.session)
    assert again.status == "awaiting_approval"
    assert box.ran == []
    assert reason_of(again) == "awaiting approval: ToolApproval(tools=...) lists remove"
    done = await lenient.run(None, session=again.session, approvals={"c1": Approve()})
    assert box.ran == ["remove x"]
    assert done.status == "completed"


async def test_a_held_call_is_offered_to_the_approver_when_resumed_without_a_decision() -> None:
    box = Box()
    agent = Agent(planned(remove()), tools=box.tools(remove=True), capabilities=[ToolApproval()])
    paused = await agent.run("go")
    deciding = Agent(
        planned(remove()),
        tools=box.tools(remove=True),
        capabilities=[ToolApproval(approver=lambda call: Edit({"path": "y"}))],
    )
    done = await deciding.run(None, session=paused.session)
    assert done.output == "remove: removed y"
    assert box.ran == ["remove y"]


# ------------------------------------------------------------------------------ with harness-tool-limits


async def test_with_tool_limits_outside_a_call_over_its_limit_is_refused_before_anyone_is_asked() -> None:
    from harness_tool_limits import ToolLimits

    box = Box()
    model = planned(remove("a", "c1"), remove("b", "c2"))
    agent = Agent(
        model, tools=box.tools(remove=True), capabilities=[ToolLimits(per_tool={"remove": 1}), ToolApproval()]
    )
    paused = await agent.run("go")
    assert [c.tool_call_id for c in paused.pending_approvals] == ["c1"]
    done = await agent.run(None, session=paused.session, approvals={"c1": Approve()})
    assert done.status == "completed", "c2 is over the limit: refused, not held"
    assert box.ran == ["remove a"]
    assert done.output is not None
    assert done.output.startswith("remove: call refused by the tool-call limits")


async def test_with_tool_approval_outside_a_held_call_reaches_tool_limits_only_when_it_runs() -> None:
    from harness_tool_limits import ToolLimits

    box = Box()
    limits = ToolLimits(per_tool={"remove": 1})
    model = planned([*remove("a", "c1"), *remove("b", "c2")])
    agent = Agent(model, tools=box.tools(remove=True), capabilities=[ToolApproval(), limits])
    paused = await agent.run("go")
    assert [c.tool_call_id for c in paused.pending_approvals] == ["c1", "c2"]
    done = await agent.run(None, session=paused.session, approvals={"c1": Reject("no"), "c2": Approve()})
    # the rejected call never reached the limit, so the approved one is under it and runs
    assert box.ran == ["remove b"]
    assert done.output == "remove: The user rejected this call: no\nremove: removed b"


async def test_a_rejection_function_that_raises_is_a_capability_error_and_the_tool_never_runs() -> None:
    def rejection(call: ToolCall, decision: Reject) -> str:
        raise ValueError("template service down")

    approval = ToolApproval(approver=lambda call: Reject("no"), rejection=rejection)
    box = Box()
    agent = Agent(planned(remove()), tools=box.tools(remove=True), capabilities=[approval])
    with pytest.raises(CapabilityError, match=r"tool_approval.*template service down"):
        await agent.run("go")
    assert box.ran == []
