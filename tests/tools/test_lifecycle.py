"""ToolCallRegistry: lifecycle, guarded transitions, events, sync with history."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import CanonicalMessage, RetryPromptPart, ToolCallPart, ToolReturnPart
from harness.errors import IllegalTransition
from harness.tools import ToolCallRegistry, ToolCallStatus


def part(call_id: str = "c1", name: str = "bash") -> ToolCallPart:
    return ToolCallPart(tool_call_id=call_id, tool_name=name, args={"command": "ls"})


def test_lifecycle_with_timestamps_and_events() -> None:
    registry = ToolCallRegistry()
    event = registry.register(part())
    assert event.kind == "registered"
    assert event.record.status is ToolCallStatus.PENDING
    assert event.record.args == {"command": "ls"}
    started = registry.start("c1")
    assert started.kind == "started"
    assert started.record.started_at is not None
    registry.note_attempt("c1")
    done = registry.complete("c1", "output")
    assert done.kind == "completed"
    record = registry.get("c1")
    assert record.status is ToolCallStatus.COMPLETED
    assert record.result == "output"
    assert record.attempts == 1
    assert record.completed_at is not None
    assert record.started_at is not None
    assert record.registered_at <= record.started_at <= record.completed_at
    assert record.is_finished
    assert started.record.status is ToolCallStatus.RUNNING  # events are snapshots


def test_fail_and_cancel() -> None:
    registry = ToolCallRegistry()
    registry.register(part("a"))
    registry.register(part("b"))
    registry.start("a")
    assert registry.fail("a", "ValueError: x").record.error == "ValueError: x"
    cancel = registry.cancel("b", "aborted")
    assert cancel.kind == "cancelled"
    assert cancel.record.error == "aborted"
    assert [r.status for r in registry.records()] == [ToolCallStatus.FAILED, ToolCallStatus.CANCELLED]
    assert registry.records(ToolCallStatus.FAILED)[0].tool_call_id == "a"
    assert registry.unfinished() == []


@pytest.mark.parametrize("terminal", ["complete", "fail", "cancel"])
@pytest.mark.parametrize("then", ["complete", "fail", "cancel", "start"])
def test_finished_calls_cannot_change(terminal: str, then: str) -> None:
    registry = ToolCallRegistry()
    registry.register(part())
    registry.start("c1")
    getattr(registry, terminal)("c1", "x")
    action = (
        (lambda: registry.start("c1")) if then == "start" else (lambda: getattr(registry, then)("c1", "y"))
    )
    with pytest.raises(IllegalTransition, match="c1") as info:
        action()
    assert info.value.current is not None
    assert info.value.current.finished


def test_guards_on_unknown_duplicate_and_double_start() -> None:
    registry = ToolCallRegistry()
    with pytest.raises(IllegalTransition, match="is not registered"):
        registry.start("nope")
    registry.register(part())
    with pytest.raises(IllegalTransition, match="already registered"):
        registry.register(part())
    registry.start("c1")
    with pytest.raises(IllegalTransition, match="cannot start"):
        registry.start("c1")
    with pytest.raises(KeyError, match="nope"):
        registry.get("nope")


def test_pending_can_finish_without_running_and_helpers() -> None:
    registry = ToolCallRegistry()
    for i in range(4):
        registry.register(part(f"c{i}"))
    registry.cancel("c0")
    registry.complete("c1")
    assert [r.tool_call_id for r in registry.recent(2)] == ["c2", "c3"]
    assert registry.recent(0) == []
    assert len(registry) == 4
    assert "c3" in registry
    assert [r.tool_call_id for r in registry.unfinished()] == ["c2", "c3"]
    registry.clear()
    assert len(registry) == 0


def test_long_results_truncated() -> None:
    registry = ToolCallRegistry()
    registry.register(part())
    assert len(registry.complete("c1", "x" * 10_000).record.result or "") == 2000


def test_check_against_history() -> None:
    registry = ToolCallRegistry()
    history = [
        CanonicalMessage.user("go"),
        CanonicalMessage.response(part("ok"), part("retry"), part("cancelled"), part("running")),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="ok", tool_name="bash", content="out"),
            RetryPromptPart("fix", tool_name="bash", tool_call_id="retry"),
            ToolReturnPart(tool_call_id="cancelled", tool_name="bash", content="Tool execution aborted"),
        ),
    ]
    for call_id in ("ok", "retry", "cancelled", "running"):
        registry.register(part(call_id))
    registry.complete("ok")
    registry.fail("retry", "bad")
    registry.cancel("cancelled")
    registry.start("running")
    assert registry.check_against(history) == []
    registry.register(part("ghost"))
    registry.complete("running")
    problems = registry.check_against(history)
    assert "ghost: registered but no ToolCallPart carries it" in problems
    assert "running: completed but no ToolReturnPart answers it" in problems
    stale = ToolCallRegistry()
    stale.register(part("ok"))
    assert stale.check_against(history) == ["ok: answered in history but still pending in the registry"]
    only_retry = ToolCallRegistry()
    only_retry.register(part("retry"))
    only_retry.complete("retry")
    assert only_retry.check_against(history) == ["retry: completed but no ToolReturnPart answers it"]
    unanswered = ToolCallRegistry()
    unanswered.register(part("running"))
    unanswered.fail("running", "x")
    unanswered.register(part("other"))
    assert len(unanswered.check_against([*history, CanonicalMessage.response(part("other"))])) == 1


def apply(registry: ToolCallRegistry, op: str, call_id: str) -> object:
    return registry.start(call_id) if op == "start" else getattr(registry, op)(call_id, "x")


OPS = st.lists(
    st.tuples(st.sampled_from(["start", "complete", "fail", "cancel"]), st.integers(0, 3)), max_size=30
)


@settings(max_examples=200, deadline=None)
@given(ops=OPS)
def test_random_transitions_respect_the_state_machine(ops: list[tuple[str, int]]) -> None:
    registry = ToolCallRegistry()
    for i in range(4):
        registry.register(part(f"c{i}"))
    for op, index in ops:
        call_id = f"c{index}"
        before = registry.get(call_id).status
        allowed = not before.finished and (op != "start" or before is ToolCallStatus.PENDING)
        if allowed:
            event = apply(registry, op, call_id)
            assert getattr(event, "record", None) is registry.get(call_id)
        else:
            with pytest.raises(IllegalTransition):
                apply(registry, op, call_id)
            assert registry.get(call_id).status is before


def test_each_run_state_starts_fresh_with_its_own_registry() -> None:
    from harness.core import ToolCallPart as Call
    from harness.tools import RunState

    used = RunState(original_query="task")
    used.current_iteration = used.iteration_count = used.batch_counter = 4
    used.consecutive_empty_responses = 2
    used.tool_registry.register(Call(tool_call_id="x", tool_name="t"))
    fresh = RunState(original_query=used.original_query)
    assert (fresh.current_iteration, fresh.iteration_count, fresh.batch_counter) == (0, 0, 0)
    assert fresh.consecutive_empty_responses == 0
    assert len(fresh.tool_registry) == 0
    assert len(used.tool_registry) == 1, "two runs never share a registry"
    assert fresh.original_query == "task"
