"""The conformance cases with real processes: two racing writers, a writer killed at random moments."""

from __future__ import annotations

__all__ = ["ProcessCases"]

import os
import random
import signal
import time
import uuid
import warnings
from pathlib import Path

import pytest

from harness.core.messages import CanonicalMessage, ToolCallPart, UserPromptPart
from harness.session import Session
from harness.testing.store_kit import ConformanceBase, StoreFactory, new_session
from harness.testing.store_workers import assert_store_consistent, read_side_channel, spawn_worker

with warnings.catch_warnings():  # the marker is registered by harness's own pyproject, maybe not yours
    warnings.simplefilter("ignore")
    _slow = pytest.mark.slow


class ProcessCases(ConformanceBase):
    """The conformance cases with real processes: two racing writers, a writer killed at random moments."""

    # ------------------------------------------------------------------ processes

    def _require_processes(self) -> None:
        if not self.processes:
            pytest.skip(
                f"{type(self).__name__}.processes is False: this store cannot be opened by another process"
            )

    def test_two_processes_racing_on_one_session(self, make_store: StoreFactory, tmp_path: Path) -> None:
        """Two processes commit on one session: one wins each revision, no message is lost or doubled."""
        self._require_processes()
        store = make_store()
        session = new_session(store, [CanonicalMessage.request(UserPromptPart("start"))])
        session.checkpoint()
        go = tmp_path / "go"
        sides = {name: tmp_path / f"race-{name}.txt" for name in ("A", "B")}
        workers = {
            name: spawn_worker(
                "race",
                opener=self.opener,
                spec=make_store.spec,
                session_id=session.session_id,
                side=side,
                name=name,
                commits=self.race_commits,
                go=str(go),
            )
            for name, side in sides.items()
        }
        try:
            deadline = time.monotonic() + 60
            while not all(read_side_channel(side) for side in sides.values()):
                assert time.monotonic() < deadline, "the racing processes never got ready"
                assert all(w.poll() is None for w in workers.values()), self._errors(sides)
                time.sleep(0.005)
            go.touch()
            for worker in workers.values():
                assert worker.wait(timeout=120) == 0, self._errors(sides)
        finally:
            for worker in workers.values():
                if worker.poll() is None:
                    worker.kill()
                    worker.wait()
        won: dict[int, str] = {}
        for name, side in sides.items():
            oks = [line.split() for line in read_side_channel(side) if line.startswith("ok ")]
            assert [label for _, _, label in oks] == [f"{name}-{i}" for i in range(self.race_commits)]
            for _, revision, label in oks:
                assert int(revision) not in won, (
                    f"revision {revision} won by {won.get(int(revision))} and {label}"
                )
                won[int(revision)] = label
        final = self.race_commits * 2 + 1
        assert sorted(won) == list(range(2, final + 1))
        reader = make_store(same=True)
        assert reader.head(session.session_id).revision == final
        prompts = [
            part.content
            for m in Session.open(reader, session.session_id).transcript()
            for part in m.parts
            if isinstance(part, UserPromptPart)
        ]
        assert prompts == ["start", *(won[r] for r in range(2, final + 1))]
        assert_store_consistent(reader, session.session_id, history=False)

    @staticmethod
    def _errors(sides: dict[str, Path]) -> str:
        out: list[str] = []
        for side in sides.values():
            err = side.with_name(side.name + ".err")
            if err.exists():
                out.append(err.read_text(errors="replace")[-3000:])
        return "\n".join(out)

    def _crash_rounds(self, make_store: StoreFactory, tmp_path: Path, rounds: int) -> None:
        self._require_processes()
        store = make_store()
        session = new_session(store, [CanonicalMessage.request(UserPromptPart("crash test"))])
        session.checkpoint()
        sid = session.session_id
        rng = random.Random(os.environ.get("HARNESS_CRASH_SEED", uuid.uuid4().hex))
        iteration_at: dict[int, int] = {1: 0}
        revision = 1
        for round_number in range(rounds):
            side = tmp_path / f"crash-{round_number}.txt"
            worker = spawn_worker(
                "crash", opener=self.opener, spec=make_store.spec, session_id=sid, side=side
            )
            try:
                deadline = time.monotonic() + 60
                while not read_side_channel(side):
                    assert worker.poll() is None, self._errors({"w": side})
                    assert time.monotonic() < deadline, "the crash worker never got ready"
                    time.sleep(0.002)
                time.sleep(rng.uniform(0.0, 0.25))
                assert worker.poll() is None, (
                    f"the crash worker stopped by itself:\n{self._errors({'w': side})}"
                )
                os.kill(worker.pid, signal.SIGKILL)
            finally:
                if worker.poll() is None:
                    worker.kill()
                worker.wait(timeout=30)
            for line in read_side_channel(side)[1:]:
                seen, iteration = (int(v) for v in line.split())
                assert seen == revision + 1, f"round {round_number}: commit {seen} after {revision}"
                revision = seen
                iteration_at[revision] = iteration
            reader = make_store(same=True)
            head = reader.head(sid)
            assert head.revision in (revision, revision + 1), (
                f"round {round_number}: {head.revision} vs {revision}"
            )
            assert_store_consistent(reader, sid)
            reopened = Session.open(reader, sid)
            expected_iteration = iteration_at.get(head.revision, iteration_at[revision] + 1)
            assert reopened.metadata.get("iteration", 0) == expected_iteration
            calls = [
                p.tool_call_id for m in reopened.transcript() for p in m.parts if isinstance(p, ToolCallPart)
            ]
            assert calls == [f"crash_{i}" for i in range(1, expected_iteration + 1)]
            iteration_at[head.revision] = expected_iteration
            revision = head.revision
            reader.close()

    def test_crash_consistency(self, make_store: StoreFactory, tmp_path: Path) -> None:
        """A committing process SIGKILLed at random moments leaves a consistent session, resumable."""
        self._crash_rounds(make_store, tmp_path, self.crash_rounds)

    @_slow
    def test_crash_consistency_many_kills(
        self, make_store: StoreFactory, tmp_path: Path, request: pytest.FixtureRequest
    ) -> None:
        """The crash test with many kills (the slow profile)."""
        markexpr = str(request.config.getoption("markexpr", "") or "")
        if os.environ.get("HARNESS_SLOW") != "1" and ("slow" not in markexpr or "not slow" in markexpr):
            pytest.skip("a slow fault-injection suite: run it with -m slow (or HARNESS_SLOW=1)")
        self._crash_rounds(make_store, tmp_path, self.slow_crash_rounds)
