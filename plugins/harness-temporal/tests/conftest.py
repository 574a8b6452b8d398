"""Fixtures of the harness-temporal tests: the real dev server, worker processes, an engine per test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from harness_temporal import ActivityOptions, TemporalEngine
from harness_temporal.testing import DevServer, temporal_server

from harness.testing.durable import SCENARIO_ENV, Scenario

__all__ = ["temporal_server"]

AGENT = "harness.testing.durable:make_agent"
FAST = ActivityOptions(heartbeat=1.5, model_attempts=3, crash_attempts=2)
"""Short heartbeats, so a killed worker is noticed within seconds."""


@pytest.fixture
def queue() -> str:
    """A task queue of this test's own."""
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def engine_for(
    temporal_server: DevServer, queue: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[[Scenario], TemporalEngine]:
    """An engine on this test's queue and SQLite store, for a scenario (set in this process's env too)."""

    def make(scenario: Scenario) -> TemporalEngine:
        monkeypatch.setenv(SCENARIO_ENV, scenario.to_json())
        return TemporalEngine(
            temporal_server.address,
            task_queue=queue,
            store_url=f"sqlite:///{tmp_path / 'sessions.db'}",
            agent=AGENT,
            options=FAST,
        )

    return make


@pytest.fixture
def spawn_worker(
    temporal_server: DevServer, queue: str, tmp_path: Path
) -> Iterator[Callable[[Scenario], subprocess.Popen[bytes]]]:
    """Start ``python -m harness_temporal worker`` processes for a scenario; all are killed at the end."""
    started: list[subprocess.Popen[bytes]] = []

    def spawn(scenario: Scenario) -> subprocess.Popen[bytes]:
        log = (tmp_path / f"worker-{len(started) + 1}.log").open("wb")
        env = {**os.environ, SCENARIO_ENV: scenario.to_json(), "PYTHONFAULTHANDLER": "1"}
        command = [
            sys.executable,
            "-m",
            "harness_temporal",
            "worker",
            "--address",
            temporal_server.address,
            "--task-queue",
            queue,
            "--agent",
            AGENT,
            "--sticky-timeout",
            "1",
        ]
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        started.append(process)
        return process

    yield spawn
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
        process.wait(10)
