"""What crosses Temporal's boundaries and what does not: fallback models, tool contexts, secrets."""

from __future__ import annotations

import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from harness_postgres.testing import require_server, schema_url, temporary_schema
from harness_temporal import ActivityOptions, HarnessActivities, TemporalEngine, create_worker
from harness_temporal.testing import DevServer

import harness
from harness.durable import StoreDirectory
from harness.errors import ModelAuthenticationError
from harness.session import Session
from harness.stores import open_store

AGENTS = '''
"""Agents the Temporal boundary tests run (written by the test, imported by the worker)."""

from harness import Agent, CanonicalMessage, RunContext, TextPart, ToolCallPart
from harness.errors import ModelAuthenticationError, ModelRateLimitError
from harness.models.function import FunctionModel
from harness_model_fallback import ModelFallback


def _limited(messages, info):
    raise ModelRateLimitError("primary", "slow down", status_code=429)


def _answers(messages, info):
    return CanonicalMessage.response(TextPart("from backup"))


fallback_agent = Agent(
    FunctionModel(_limited, model_name="primary"),
    capabilities=[ModelFallback(models=[FunctionModel(_answers, model_name="backup")])],
)


def _refused(messages, info):
    raise ModelAuthenticationError("primary", "invalid x-api-key", status_code=401)


refused_agent = Agent(FunctionModel(_refused, model_name="primary"))


def peek(ctx: RunContext) -> str:
    """Read what crosses into the tool's activity."""
    log = ctx.session.store.read_log(ctx.session.session_id)
    try:
        ctx.messages
    except AttributeError as exc:  # EngineBoundaryError is an AttributeError
        seen = f"{type(exc).__name__}: {exc}"
    else:
        seen = "messages crossed"
    return f"log={len(log)} tool={ctx.tool_name} {seen}"


def _calls_then_reads(messages, info):
    if len(messages) == 1 or not any(p.part_kind == "tool-return" for m in messages for p in m.parts):
        return CanonicalMessage.response(ToolCallPart(tool_call_id="c1", tool_name="peek", args={}))
    returned = [p.content for m in messages for p in m.parts if p.part_kind == "tool-return"]
    return CanonicalMessage.response(TextPart(str(returned[-1])))


boundary_agent = Agent(FunctionModel(_calls_then_reads, model_name="reader"), tools=[peek])
'''

FAST = ActivityOptions(heartbeat=1.5, model_attempts=1, crash_attempts=1)


@pytest.fixture
def agents_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = f"temporal_boundary_agents_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(AGENTS))
    monkeypatch.syspath_prepend(str(tmp_path))  # pyright: ignore[reportUnknownMemberType]
    yield name
    sys.modules.pop(name, None)


async def test_a_fallback_model_answers_inside_a_temporal_run(
    temporal_server: DevServer, tmp_path: Path, agents_module: str
) -> None:
    queue = f"fallback-{uuid.uuid4().hex[:8]}"
    engine = TemporalEngine(
        temporal_server.address,
        task_queue=queue,
        store_url=f"sqlite:///{tmp_path / 'sessions.db'}",
        agent=f"{agents_module}:fallback_agent",
        options=FAST,
    )
    async with create_worker(await engine.client(), task_queue=queue):
        result = await (await engine.start("hi")).result()
    assert result.output == "from backup"
    store = open_store(engine.store_url)
    try:
        [response] = [m for m in Session.open(store, result.session_id).messages if m.kind == "response"]
    finally:
        store.close()
    assert response.metadata is not None
    mark = cast(dict[str, Any], response.metadata["harness"])
    assert mark["answered_by"] == "backup"
    assert [f["model"] for f in cast(list[dict[str, Any]], mark["fallback_from"])] == ["primary"]


async def test_the_client_gets_the_models_own_error_type_with_its_attributes(
    temporal_server: DevServer, tmp_path: Path, agents_module: str
) -> None:
    queue = f"refused-{uuid.uuid4().hex[:8]}"
    engine = TemporalEngine(
        temporal_server.address,
        task_queue=queue,
        store_url=f"sqlite:///{tmp_path / 'sessions.db'}",
        agent=f"{agents_module}:refused_agent",
        options=FAST,
    )
    async with create_worker(await engine.client(), task_queue=queue):
        handle = await engine.start("hi")
        with pytest.raises(ModelAuthenticationError) as caught:
            await handle.result()
    assert type(caught.value) is ModelAuthenticationError
    assert caught.value.status_code == 401
    assert caught.value.provider_message == "invalid x-api-key"
    assert (caught.value.provider, caught.value.model_name, caught.value.attempts) == ("primary", None, 1)
    assert str(caught.value) == "primary (HTTP 401): invalid x-api-key"


async def test_a_tool_reads_the_stored_log_and_gets_a_typed_error_for_the_history(
    temporal_server: DevServer, tmp_path: Path, agents_module: str
) -> None:
    queue = f"boundary-{uuid.uuid4().hex[:8]}"
    engine = TemporalEngine(
        temporal_server.address,
        task_queue=queue,
        store_url=f"sqlite:///{tmp_path / 'sessions.db'}",
        agent=f"{agents_module}:boundary_agent",
        options=FAST,
    )
    async with create_worker(await engine.client(), task_queue=queue):
        result = await (await engine.start("look")).result()
    assert result.output is not None
    assert result.output.startswith(
        "log=2 tool=peek EngineBoundaryError: RunContext.messages is not available"
    )
    assert "harness-temporal" in result.output


async def test_no_password_reaches_the_history_the_activities_or_the_errors(
    temporal_server: DevServer, tmp_path: Path, agents_module: str, caplog: pytest.LogCaptureFixture
) -> None:
    dsn = require_server()
    with temporary_schema(dsn) as schema:
        # The test server trusts loopback connections, so any password is accepted: it only has to
        # be somewhere it could leak from.
        secret, ssl_secret = "TopSecret-7f3a", "SslSecret-91c2"
        url = schema_url(dsn, schema).replace("://root@", f"://root:{secret}@", 1)
        url += f"&sslpassword={ssl_secret}"
        queue = f"secrets-{uuid.uuid4().hex[:8]}"
        engine = TemporalEngine(
            temporal_server.address,
            task_queue=queue,
            store_url="@app",
            agent=f"{agents_module}:boundary_agent",
            options=FAST,
        )
        activities = HarnessActivities(stores=StoreDirectory({"app": url}))
        async with create_worker(await engine.client(), task_queue=queue, activities=activities):
            handle = await engine.start("look")
            result = await handle.result()
            history = await handle.handle.fetch_history()
        activities.close()
        assert result.output is not None
        assert result.output.startswith("log=2")
        journal = b"".join(event.SerializeToString() for event in history.events)  # payloads raw
        assert b'{"name":"app"}' in journal
        store = harness.open_store(url)
        try:
            shown = f"{store.url} {store!r}"
        finally:
            store.close()
        logs = "\n".join(record.getMessage() for record in caplog.records)
        for text in (journal.decode("utf-8", "replace"), shown, logs, str(result)):
            assert secret not in text
            assert ssl_secret not in text
