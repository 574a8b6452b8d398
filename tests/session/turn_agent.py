"""One of two processes that run turns on the same stored session at the same time.

``python turn_agent.py <store url> <session id> <name> <turns> <report> <start file>``
opens the store, prints ``ready``, waits for ``<start file>`` to exist (so both
processes start together), then runs ``<turns>`` turns: each opens the session afresh
and runs a real ``Agent`` on it (``FunctionModel``: a ``lookup`` call, then an answer),
the loop checkpointing every step. A run that starts while the other process's run holds
the session's lease fails at once with :class:`~harness.errors.SessionLeaseError` (reported
as ``{"lease": holder}``); one whose checkpoint meets another writer's newer revision (it
opened the session before the other run's last commit) fails with
:class:`~harness.errors.SessionConflictError`. Either way the turn is run again on the
reloaded session.

Every commit attempt is reported as a JSON line in ``<report>``, through a store wrapper
that calls the real store: ``{"revision", "base", "appended": [[seq, body], ...]}`` for
a commit that returned, ``{"conflict": base, "actual": revision}`` for one refused.
"""

from __future__ import annotations

__all__ = ["ReportingStore", "main"]

import asyncio
import json
import os
import random
import sys
import time
import warnings
from collections.abc import Sequence
from typing import IO, Any

from harness.config.store import open_store
from harness.core.messages import CanonicalMessage, TextPart, ToolCallPart, Usage, UserPromptPart
from harness.errors import SessionConflictError, SessionLeaseError
from harness.models.function import FunctionInfo, FunctionModel
from harness.run import Agent
from harness.session import (
    Checkpoint,
    Session,
    SessionStore,
)
from harness.session.delegating import DelegatingStore

MAX_ATTEMPTS = 400


class ReportingStore(DelegatingStore):
    """A real store whose every commit attempt is reported (one JSON line, flushed)."""

    def __init__(self, inner: SessionStore, report: IO[str]) -> None:
        super().__init__(inner)
        self.report = report

    def _emit(self, record: dict[str, Any]) -> None:
        self.report.write(json.dumps(record) + "\n")
        self.report.flush()

    def commit(self, checkpoint: Checkpoint) -> int:
        try:
            revision = self.inner.commit(checkpoint)
        except SessionConflictError as exc:
            self._emit({"conflict": checkpoint.base_revision, "actual": exc.actual})
            raise
        appended = [[entry.seq, entry.body] for entry in checkpoint.appended]
        self._emit({"revision": revision, "base": checkpoint.base_revision, "appended": appended})
        return revision


def _agent(name: str) -> Agent:
    usage = Usage(request_tokens=1, response_tokens=1)

    def respond(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        del info
        last = messages[-1]
        turn = sum(1 for m in messages if m.kind == "response")
        if any(isinstance(p, UserPromptPart) for p in last.parts):
            return CanonicalMessage.response(
                ToolCallPart(
                    tool_call_id=f"{name}-{os.getpid()}-{turn}", tool_name="lookup", args={"key": name}
                )
            )
        return CanonicalMessage.response(TextPart(f"{name} answered after {turn} responses"), usage=usage)

    async def lookup(key: str) -> str:
        """Look a key up (takes a few milliseconds, so the two processes overlap).

        Args:
            key: The key.
        """
        await asyncio.sleep(0.004)
        return f"{key} is known"

    return Agent(FunctionModel(respond), tools=[lookup], max_iterations=10)


def main(argv: Sequence[str]) -> None:
    """Run the turns (see the module docstring)."""
    url, session_id, name, turns, report_path, start_file = (
        argv[0],
        argv[1],
        argv[2],
        int(argv[3]),
        argv[4],
        argv[5],
    )
    warnings.simplefilter("ignore")
    with open(report_path, "a", encoding="utf-8") as report:
        store = ReportingStore(open_store(url), report)
        agent = _agent(name)
        print("ready", flush=True)
        while not os.path.exists(start_file):
            time.sleep(0.001)
        done = 0
        attempts = 0
        while done < turns:
            attempts += 1
            if attempts > MAX_ATTEMPTS:
                raise SystemExit(f"{name}: {MAX_ATTEMPTS} attempts for {turns} turns")
            session = Session.open(store, session_id)
            try:
                asyncio.run(agent.run(f"{name} turn {done}", session=session))
            except SessionLeaseError as exc:  # the other process's run holds the session: wait
                report.write(json.dumps({"lease": exc.holder}) + "\n")
                time.sleep(random.uniform(0, 0.005 * min(attempts, 20)))
                continue
            except SessionConflictError:
                # Back off with jitter, as a real client would: without it, under load the
                # faster process can win every race and starve this one (a livelock, not a bug
                # of the store, which the conflicts themselves show is working).
                time.sleep(random.uniform(0, 0.005 * min(attempts, 20)))
                continue
            done += 1
        report.write(json.dumps({"turns": done, "attempts": attempts}) + "\n")
        store.close()


if __name__ == "__main__":
    main(sys.argv[1:])
