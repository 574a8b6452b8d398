"""A run whose model raises a harness error reaches the ``DBOSRunClient`` waiting on it as that error.

DBOS pickles the workflow's exception into its system database and the client unpickles
it: a ``ModelAuthenticationError`` (whose constructor takes required arguments) once came
back as ``TypeError: ModelError.__init__() missing ... 'provider_message'``.
"""

from __future__ import annotations

import asyncio
import os
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from harness_dbos import DBOSRunClient
from harness_dbos.testing import WorkerProcess

from harness.errors import ModelAuthenticationError

AGENT_MODULE = """
from harness import Agent
from harness.errors import ModelAuthenticationError
from harness.models.function import FunctionModel


def refuse(messages, info):
    raise ModelAuthenticationError("openai", "invalid api key", status_code=401, model_name="gpt-test")


agent = Agent(FunctionModel(refuse))
"""


@pytest.fixture
def agent_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A folder holding ``refusing_agent``, on this process's path and the workers' ``PYTHONPATH``."""
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "refusing_agent.py").write_text(textwrap.dedent(AGENT_MODULE))
    monkeypatch.syspath_prepend(str(folder))  # pyright: ignore[reportUnknownMemberType]  # the client loads it too
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    )
    return str(folder)


async def _refused_run(system_db: str, store_url: str, spawn: Callable[..., WorkerProcess]) -> None:
    spawn(system_db)
    client = DBOSRunClient(system_db, store_url=store_url, agent="refusing_agent:agent", polling_interval=0.1)
    try:
        handle = await client.enqueue("Hello?")
        with pytest.raises(ModelAuthenticationError) as caught:
            await asyncio.wait_for(handle.result(), 90)
    finally:
        client.close()
    error = caught.value
    assert type(error) is ModelAuthenticationError
    assert (error.provider, error.provider_message, error.status_code, error.model_name) == (
        "openai",
        "invalid api key",
        401,
        "gpt-test",
    )
    assert str(error) == "openai model 'gpt-test' (HTTP 401): invalid api key"


async def test_a_model_error_reaches_the_client_as_itself_on_sqlite(
    sqlite_system_db: str,
    sqlite_store_url: str,
    agent_path: str,
    spawn: Callable[..., WorkerProcess],
) -> None:
    del agent_path
    await _refused_run(sqlite_system_db, sqlite_store_url, spawn)


async def test_a_model_error_reaches_the_client_as_itself_on_postgresql(
    pg_system_db: str,
    pg_store_url: str,
    agent_path: str,
    spawn: Callable[..., WorkerProcess],
) -> None:
    del agent_path
    await _refused_run(pg_system_db, pg_store_url, spawn)
