"""A run takes its stored session's lease: a second writer fails at its start, before any model call.

On all three stores (SQLite, the ``file:`` folder, PostgreSQL under ``CI=true`` or with
``$HARNESS_TEST_POSTGRES_DSN``): a second ``Session.open`` object of this process, and a
real second process, get ``SessionLeaseError`` while the first run holds the lease; the
lease is dropped when the run ends; a run killed with SIGKILL never blocks the resume.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import Agent, CanonicalMessage, Session
from harness.config.store import open_store
from harness.errors import SessionLeaseError
from harness.models.function import FunctionInfo, FunctionModel


@pytest.fixture(params=["sqlite", "file", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'sessions.db'}"
    elif request.param == "file":
        yield f"file://{tmp_path / 'sessions'}"
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from harness_postgres.testing import require_server, schema_url, temporary_schema

        dsn = require_server()
        with temporary_schema(dsn, "harness_lease") as schema:
            yield schema_url(dsn, schema)


def counting_agent(calls: list[str], gate: asyncio.Event | None = None) -> Agent:
    """An agent whose model records each call and, with ``gate``, waits for it before answering."""

    async def respond(messages: list[CanonicalMessage], info: FunctionInfo) -> str:
        del messages, info
        calls.append("called")
        if gate is not None:
            await gate.wait()
        return "done"

    return Agent(FunctionModel(respond))


async def wait_for(calls: list[str]) -> None:
    while not calls:
        await asyncio.sleep(0.005)


async def test_a_second_session_object_fails_before_its_model_is_called(url: str) -> None:
    store = open_store(url)
    Session.create(store=store, session_id="shared").checkpoint()
    first, second = Session.open(store, "shared"), Session.open(store, "shared")
    gate = asyncio.Event()
    first_calls: list[str] = []
    running = asyncio.create_task(counting_agent(first_calls, gate).run("one", session=first))
    await wait_for(first_calls)
    second_calls: list[str] = []
    with pytest.raises(
        SessionLeaseError, match=f"'shared' in store .*: another run holds its lease \\(pid {os.getpid()}"
    ):
        await counting_agent(second_calls).run("two", session=second)
    assert second_calls == []  # refused before the model was paid
    gate.set()
    assert (await running).output == "done"
    again = Session.open(store, "shared")  # the lease was dropped with the run's end
    assert (await counting_agent(second_calls).run("three", session=again)).output == "done"
    assert second_calls == ["called"]
    store.close()


CHILD = textwrap.dedent(
    """
    import sys
    from harness import Agent, Session
    from harness.errors import SessionLeaseError
    from harness.models.function import FunctionModel
    from harness.config.store import open_store

    def respond(messages, info):
        print("model called", flush=True)
        return "child answer"

    session = Session.open(open_store(sys.argv[1]), "shared")
    try:
        Agent(FunctionModel(respond)).run_sync("from the child", session=session)
    except SessionLeaseError as error:
        print(type(error).__name__, str(error), flush=True)
        raise SystemExit(3)
    """
)


async def test_a_second_process_fails_before_its_model_is_called(url: str, tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    store = open_store(url)
    Session.create(store=store, session_id="shared").checkpoint()
    gate = asyncio.Event()
    calls: list[str] = []
    running = asyncio.create_task(
        counting_agent(calls, gate).run("parent", session=Session.open(store, "shared"))
    )
    await wait_for(calls)
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        url,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    out, _ = await child.communicate()
    lines = out.decode().splitlines()
    assert child.returncode == 3, lines
    assert len(lines) == 1
    assert lines[0].startswith("SessionLeaseError session 'shared' in store ")
    assert f"another run holds its lease (pid {os.getpid()} on " in lines[0]
    gate.set()
    assert (await running).output == "done"
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        url,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    out, _ = await child.communicate()
    assert (child.returncode, out.decode().splitlines()) == (0, ["model called"])
    store.close()


KILLED = textwrap.dedent(
    """
    import os, signal, sys
    from harness import Agent, Session
    from harness.models.function import FunctionModel
    from harness.config.store import open_store

    def respond(messages, info):
        os.kill(os.getpid(), signal.SIGKILL)  # dies mid-run, holding the lease

    session = Session.open(open_store(sys.argv[1]), "shared")
    Agent(FunctionModel(respond)).run_sync("doomed", session=session)
    """
)


def test_a_run_killed_holding_the_lease_never_blocks_the_resume(url: str, tmp_path: Path) -> None:
    script = tmp_path / "killed.py"
    script.write_text(KILLED)
    store = open_store(url)
    Session.create(store=store, session_id="shared").checkpoint()
    child = subprocess.run(
        [sys.executable, str(script), url], env={**os.environ, "PYTHONWARNINGS": "ignore"}, check=False
    )
    assert child.returncode == -9
    resumed = Session.open(store, "shared")
    calls: list[str] = []
    result = counting_agent(calls).run_sync(None, session=resumed)  # continue the killed run's request
    assert (result.output, calls) == ("done", ["called"])
    store.close()
