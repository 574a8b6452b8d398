"""harness.testing.durable: the scenario agent, its crash-safe records and its block points."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.core import CanonicalMessage, SystemPromptPart, ToolReturnPart, UserPromptPart
from harness.run import RunResult
from harness.session import Session
from harness.testing.durable import (
    BLOCKED_FILE,
    REQUESTS_FILE,
    SCENARIO_ENV,
    TOOLS_FILE,
    Scenario,
    ScenarioModel,
    assert_exactly_once,
    canonical_history,
    exactly_once_problems,
    make_agent,
    recorded_requests,
    recorded_tool_calls,
    reference_run,
    request_bodies,
    request_body,
    scenario_agent,
    wait_for,
)
from harness.testing.durable_model import work_output
from harness.testing.durable_record import append_record

PROMPT = "Do the scenario."


def test_a_scenario_round_trips_through_json_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = Scenario(record_dir=str(tmp_path), steps=3, block_tool=2, idempotent=False, compaction=False)
    assert Scenario.from_json(scenario.to_json()) == scenario
    assert scenario.env() == {SCENARIO_ENV: scenario.to_json()}
    monkeypatch.setenv(SCENARIO_ENV, scenario.to_json())
    agent = make_agent()
    assert sorted(agent.tools) == ["send_email", "work"]
    assert agent.tools["work"].idempotent
    assert not agent.tools["send_email"].idempotent
    with pytest.raises(ValueError, match="unknown scenario fields: nope"):
        Scenario.from_json(json.dumps({"record_dir": "x", "nope": 1}))
    with pytest.raises(ValueError, match="block_tool must be at least 1"):
        Scenario(record_dir="x", block_tool=0)
    monkeypatch.delenv(SCENARIO_ENV)
    with pytest.raises(RuntimeError, match=SCENARIO_ENV):
        make_agent()


async def test_the_scenario_records_every_request_and_tool_call(tmp_path: Path) -> None:
    scenario = Scenario(record_dir=str(tmp_path), steps=4, output_bytes=300, compaction=False)
    result = await scenario_agent(scenario).run(PROMPT, Session(session_id="run-a"))
    assert result.output == "Done after 4 steps: saw 4 tool results."
    requests = recorded_requests(tmp_path)
    assert [(r.run, r.index, r.capability, r.pid) for r in requests] == [
        ("run-a", i, False, os.getpid()) for i in range(1, 6)
    ]
    # the bodies are the canonical provider-facing JSON of what the model was sent
    last = requests[-1].json()
    assert last["messages"][0]["parts"][1] == {"type": "system", "text": "scenario-run=run-a"}
    assert [t["name"] for t in last["tools"]] == ["work", "send_email"]
    assert "timestamp" not in requests[-1].body.decode()
    returns = [p for m in last["messages"] for p in m["parts"] if p["type"] == "tool_return"]
    assert [p["id"] for p in returns] == ["call_1", "call_2", "call_3", "call_4"]
    assert returns[0]["content"] == work_output("run-a", 1, 300)
    assert len(returns[0]["content"]) == 300
    calls = recorded_tool_calls(tmp_path)
    assert [(c.call_id, c.tool, c.event) for c in calls] == [
        (f"call_{n}", "work", event) for n in range(1, 5) for event in ("start", "end")
    ]
    assert {c.run for c in calls} == {"run-a"}
    assert exactly_once_problems(tmp_path) == []


async def test_large_bodies_can_be_recorded_as_digests(tmp_path: Path) -> None:
    scenario = Scenario(record_dir=str(tmp_path / "d"), steps=2, compaction=False, record_bodies=False)
    full = Scenario(record_dir=str(tmp_path / "f"), steps=2, compaction=False)
    for each in (scenario, full):
        await scenario_agent(each).run(PROMPT, Session(session_id="run-d"))
    digests, bodies = recorded_requests(tmp_path / "d"), recorded_requests(tmp_path / "f")
    assert [set(r.json()) for r in digests] == [{"sha256"}] * 3
    assert [r.digest for r in digests] == [r.digest for r in bodies]


def test_the_answer_is_a_pure_function_of_the_request(tmp_path: Path) -> None:
    model = ScenarioModel(Scenario(record_dir=str(tmp_path), steps=2, block_tool=2, idempotent=False))
    first = [CanonicalMessage.request(SystemPromptPart("scenario-run=r1"), UserPromptPart(PROMPT))]
    tools = scenario_agent(Scenario(record_dir=str(tmp_path), compaction=False)).tool_definitions
    one = model.answer(first, tools)
    assert one == model.answer(list(first), tools)
    assert [(c.tool_call_id, c.tool_name) for c in one.tool_calls] == [("call_1", "work")]
    second = [
        *first,
        one,
        CanonicalMessage.request(ToolReturnPart(tool_call_id="call_1", tool_name="work", content="ok")),
    ]
    assert [(c.tool_call_id, c.tool_name) for c in model.answer(second, tools).tool_calls] == [
        ("call_2", "send_email")
    ]
    summary = model.answer(second, ())  # no tools offered: a capability's call
    assert "scenario-run=r1" in str(summary.parts[0])
    assert not summary.tool_calls
    assert request_body(second, tools) == request_body(list(second), tools)


async def test_compaction_fires_several_times_and_the_summarizer_asks_the_model(tmp_path: Path) -> None:
    scenario = Scenario(record_dir=str(tmp_path), steps=12)
    result = await scenario_agent(scenario).run(PROMPT, Session(session_id="run-c"))
    assert result.output is not None
    assert result.output.startswith("Done after 12 steps")
    requests = recorded_requests(tmp_path)
    summaries = [r for r in requests if r.capability]
    assert len(summaries) >= 3
    assert {r.run for r in requests} == {"run-c"}  # a summarizer's request names its run too
    assert sum(b"[LimitWarner]" in r.body for r in requests) >= 3
    assert len(requests) == 13 + len(summaries)


def test_exactly_once_allows_what_a_crash_at_the_block_point_repeats(tmp_path: Path) -> None:
    def request(index: int, body: str) -> None:
        append_record(tmp_path, REQUESTS_FILE, {"run": "r", "index": index, "body": {"b": body}})

    def tool(call_id: str, name: str, event: str) -> None:
        append_record(tmp_path, TOOLS_FILE, {"run": "r", "call_id": call_id, "tool": name, "event": event})

    request(1, "first")
    tool("call_1", "work", "start")
    tool("call_1", "work", "end")
    request(2, "second")
    (tmp_path / BLOCKED_FILE).write_text(json.dumps({"what": "request", "run": "r", "index": 2}))
    request(3, "second")  # the request in flight when the worker died, sent again by the new one
    assert exactly_once_problems(tmp_path) == []
    request(4, "second")
    tool("call_1", "work", "start")
    assert exactly_once_problems(tmp_path) == [
        f"run r: one request body (sha256 {recorded_requests(tmp_path)[1].digest[:12]}) reached the model "
        "3 times (arrivals [2, 3, 4])",
        "run r: tool call call_1 (work) ran again after it had completed",
        "run r: tool call call_1 (work) started 2 times",
    ]
    other = tmp_path / "other"
    other.mkdir()
    (other / BLOCKED_FILE).write_text(json.dumps({"what": "tool", "run": "r", "call_id": "call_2"}))
    for name in ("work", "send_email"):
        for event in ("start", "start", "end"):
            append_record(other, TOOLS_FILE, {"run": "r", "call_id": "call_2", "tool": name, "event": event})
        problems = exactly_once_problems(other)
        assert (problems == []) == (name == "work"), problems
        (other / TOOLS_FILE).unlink()


def test_canonical_history_ignores_only_the_timestamps() -> None:
    from datetime import UTC, datetime

    def history(when: datetime, text: str) -> list[CanonicalMessage]:
        return [CanonicalMessage.request(UserPromptPart(text, timestamp=when))]

    now, later = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)
    assert canonical_history(history(now, "a")) == canonical_history(history(later, "a"))
    assert canonical_history(history(now, "a")) != canonical_history(history(now, "b"))


def test_wait_for_fails_fast_and_times_out(tmp_path: Path) -> None:
    with pytest.raises(TimeoutError, match="the flag"):
        wait_for(tmp_path / "never", timeout=0.05, what="the flag")
    dead = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    dead.wait()
    with pytest.raises(RuntimeError, match="exited with code 3"):
        wait_for(lambda: False, timeout=5, process=dead)
    (tmp_path / "here").write_text("")
    wait_for(tmp_path / "here", timeout=0.05)


_WORKER = textwrap.dedent(
    """
    import asyncio, sys
    from harness.session import Session
    from harness.testing.durable import make_agent

    result = asyncio.run(make_agent().run("Do the scenario.", Session(session_id="run-k")))
    print(result.output)
    """
)


def _worker(scenario: Scenario) -> subprocess.Popen[str]:
    env = {**os.environ, **scenario.env()}
    return subprocess.Popen([sys.executable, "-c", _WORKER], env=env, stdout=subprocess.PIPE, text=True)


@pytest.mark.parametrize("point", ["block_tool", "block_request"])
def test_a_worker_blocks_once_and_its_records_survive_sigkill(tmp_path: Path, point: str) -> None:
    scenario = Scenario(
        record_dir=str(tmp_path),
        steps=3,
        compaction=False,
        idempotent=False,
        block_tool=2 if point == "block_tool" else None,
        block_request=2 if point == "block_request" else None,
    )
    worker = _worker(scenario)
    try:
        wait_for(tmp_path / BLOCKED_FILE, timeout=60, process=worker)
        worker.send_signal(signal.SIGKILL)
        assert worker.wait(timeout=30) == -signal.SIGKILL
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        assert worker.stdout is not None
        worker.stdout.close()
    blocked = json.loads((tmp_path / BLOCKED_FILE).read_text())
    assert blocked["pid"] == worker.pid
    assert blocked["what"] == point.removeprefix("block_")
    calls = recorded_tool_calls(tmp_path)
    if point == "block_tool":  # killed inside send_email: started, never ended
        assert [(c.call_id, c.tool, c.event) for c in calls][-1] == ("call_2", "send_email", "start")
        assert len(recorded_requests(tmp_path)) == 2
    else:  # killed while the second request was at the model
        assert [r.index for r in recorded_requests(tmp_path)] == [1, 2]
        assert [c.event for c in calls] == ["start", "end"]
    # a second process finds the block point taken and runs through
    second = _worker(scenario)
    out, _ = second.communicate(timeout=60)
    assert second.returncode == 0, out
    assert out.strip() == "Done after 3 steps: saw 3 tool results."
    assert {r.pid for r in recorded_requests(tmp_path)} == {worker.pid, second.pid}
    # without a durable engine the second process started the run over: the check sees it
    problems = exactly_once_problems(tmp_path, "run-k")
    assert "run run-k: tool call call_1 (work) completed 2 times" in problems
    assert any("reached the model 2 times (arrivals [1, 3])" in p for p in problems)
    if point == "block_tool":
        assert any(
            "call_2 (send_email) is not idempotent, was running when its worker died" in p for p in problems
        )
    with pytest.raises(AssertionError, match="done more than once"):
        assert_exactly_once(tmp_path)
    reference = await_reference(scenario, tmp_path / "reference")
    assert request_bodies(tmp_path, "run-k") == request_bodies(tmp_path / "reference", "run-k")
    assert reference.output == out.strip()


def await_reference(scenario: Scenario, record_dir: Path) -> RunResult:
    return asyncio.run(reference_run(scenario, PROMPT, "run-k", record_dir))


async def test_blocking_sleeps_until_cancelled(tmp_path: Path) -> None:
    scenario = Scenario(record_dir=str(tmp_path), steps=2, block_tool=1, compaction=False)
    task = asyncio.ensure_future(scenario_agent(scenario).run(PROMPT, Session(session_id="run-b")))
    await asyncio.to_thread(wait_for, tmp_path / BLOCKED_FILE, 30.0)
    await asyncio.sleep(0.05)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
