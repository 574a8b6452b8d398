"""The agent the SIGKILL suite kills: a real ``Agent`` on a stored session, checkpointed every step.

``python crash_agent.py <store url> <side folder> <steps>`` starts a *zygote*: it imports
harness and loads the installed plugins once (its warm-up run uses a private in-memory
store), prints ``ready``, then reads one command a line from stdin:

* ``run <session id> <delay>``: fork a child that opens the store and runs (or resumes) the
  session; after ``<delay>`` seconds SIGKILL it if it is still running, and print
  ``killed`` or ``exited <code>``;
* ``run <session id> none``: the same, never killed (the run to the end).

The child runs an ``Agent`` with the offline ``FunctionModel``: ``<steps>`` responses with
tool calls (every third one two calls, in parallel), then a final ``done``. ``read`` is
idempotent, ``write`` is not (``idempotent=False``). Every tool execution first appends
its call id as a line to the session's side file (``<side folder>/<session id>.calls``,
``O_APPEND``, fsynced), so the parent counts
executions; then the tool takes a few milliseconds, so kills land inside tools too.
``ClearToolResults`` clears old results now and then, so kills also land around edits.

A new session is created with the prompt; a stored one is resumed with ``run(None)``
(the loop answers unanswered calls from the tool-effect ledger); a finished one (its
last message is the final response) exits 0 at once.
"""

from __future__ import annotations

__all__ = ["FINAL_TEXT", "PROMPT", "calls_of_step", "finished", "main", "run_session", "side_file"]

import asyncio
import gc
import os
import signal
import sys
import time
import warnings
from collections.abc import Sequence
from typing import Any

from harness.config.store import open_store
from harness.core.messages import CanonicalMessage, TextPart, ToolCallPart, Usage
from harness.errors import SessionNotFoundError
from harness.hooks.manager import PluginManager
from harness.models.function import FunctionInfo, FunctionModel
from harness.run import Agent
from harness.session import Session
from harness.tools import RunContext
from harness.tools.tool import Tool

PROMPT = "Update every record, then say done."
FINAL_TEXT = "done"


def calls_of_step(step: int) -> list[tuple[str, str]]:
    """``(call id, tool)`` of the calls the model makes at ``step``."""
    if step % 3 == 2:
        return [(f"s{step:03d}_0", "read"), (f"s{step:03d}_1", "write")]
    return [(f"s{step:03d}_0", "read" if step % 2 == 0 else "write")]


def finished(messages: Sequence[CanonicalMessage]) -> bool:
    """The run reached its final response."""
    if not messages or messages[-1].kind != "response" or messages[-1].tool_calls:
        return False
    return any(isinstance(p, TextPart) and p.content == FINAL_TEXT for p in messages[-1].parts)


def _model(steps: int) -> FunctionModel:
    usage = Usage(request_tokens=1, response_tokens=1)

    def respond(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        del info
        step = sum(1 for m in messages if m.kind == "response" and m.tool_calls)
        if step >= steps:
            return CanonicalMessage.response(TextPart(FINAL_TEXT), usage=usage)
        parts = [
            ToolCallPart(
                tool_call_id=call_id,
                tool_name=tool,
                args={"key": f"record-{step}", **({"value": "x" * 64} if tool == "write" else {})},
            )
            for call_id, tool in calls_of_step(step)
        ]
        return CanonicalMessage.response(TextPart(f"step {step}"), *parts, usage=usage)

    return FunctionModel(respond)


def _tools(side: str) -> list[Tool]:
    def note(ctx: RunContext) -> None:
        fd = os.open(side, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{ctx.tool_call_id}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    async def read(ctx: RunContext, key: str) -> str:
        """Read a record.

        Args:
            ctx: The run context.
            key: The record.
        """
        note(ctx)
        await asyncio.sleep(0.002)
        return f"{key} = " + "r" * 400

    async def write(ctx: RunContext, key: str, value: str) -> str:
        """Write a record (not idempotent).

        Args:
            ctx: The run context.
            key: The record.
            value: Its new value.
        """
        note(ctx)
        await asyncio.sleep(0.002)
        return f"wrote {len(value)} characters to {key}"

    return [Tool.from_function(read), Tool.from_function(write, idempotent=False)]


def _capabilities() -> list[Any]:
    from harness_clear_tool_results import ClearToolResults

    return [ClearToolResults(max_messages=24, keep_pairs=2)]


def side_file(folder: str, session_id: str) -> str:
    """Where the executions of ``session_id``'s tool calls are counted."""
    return os.path.join(folder, f"{session_id}.calls")


def run_session(url: str, manager: PluginManager, session_id: str, folder: str, steps: int) -> int:
    """Run or resume ``session_id`` to its end (the child's whole life)."""
    side = side_file(folder, session_id)
    store = open_store(url, plugin_manager=manager)
    try:
        try:
            session = Session.open(store, session_id)
        except SessionNotFoundError:
            session = Session.create(store=store, session_id=session_id, working_directory="/crash")
            prompt: str | None = PROMPT
        else:
            if finished(session.messages):
                return 0
            prompt = None
        agent = Agent(
            _model(steps), tools=_tools(side), capabilities=_capabilities(), max_iterations=steps * 2 + 5
        )
        result = asyncio.run(agent.run(prompt, session=session))
        return 0 if result.output == FINAL_TEXT else 3
    finally:
        store.close()


def main(argv: Sequence[str]) -> None:
    """The zygote loop (see the module docstring)."""
    url, side, steps = argv[0], argv[1], int(argv[2])
    warnings.simplefilter("ignore")  # experimental-plugin notices would clutter the report
    manager = PluginManager()
    manager.load_entrypoint_plugins()
    # One run in memory first, so every lazy import happens here and not in each child.
    run_session("sqlite:///:memory:", manager, "warmup", side, 3)
    os.unlink(side_file(side, "warmup"))
    gc.freeze()  # the children share the zygote's heap without the collector touching (copying) it
    print("ready", flush=True)
    for line in sys.stdin:
        command, session_id, delay = line.split()
        assert command == "run"
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = run_session(url, manager, session_id, side, steps)
            except BaseException as exc:  # reported to the parent on stderr, then a distinct exit code
                print(f"child error: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                code = 2
            finally:
                os._exit(code)
        if delay == "none":
            _, status = os.waitpid(pid, 0)
        else:
            deadline = time.monotonic() + float(delay)
            status = None
            while time.monotonic() < deadline:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                status = None
                time.sleep(0.001)
            if status is None:
                os.kill(pid, signal.SIGKILL)
                _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
            print("killed", flush=True)
        else:
            print(f"exited {os.waitstatus_to_exitcode(status)}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
