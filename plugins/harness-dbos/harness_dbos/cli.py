r"""The command line: ``python -m harness_dbos worker ...`` (or ``harness worker dbos ...``), ``enqueue``.

A worker launches DBOS on the system database, resumes the pending runs of its executor
id, and executes the runs enqueued on its queue until it gets ``SIGTERM`` or ``SIGINT``::

    python -m harness_dbos worker --system-db postgresql://host/dbos --queue harness --concurrency 4 \\
        --executor-id worker-1

It prints one line, ``harness-dbos worker <executor id> ready``, once it is listening.
"""

from __future__ import annotations

__all__ = ["enqueue", "main", "worker"]

import asyncio
import json
import signal
import sys
import threading
import types

import click

from harness_dbos.runs import DEFAULT_QUEUE


@click.group(name="harness-dbos")
def main() -> None:
    """Run harness agents as DBOS workflows: workers and enqueueing."""


@main.command("worker")
@click.option(
    "--system-db", "system_db", required=True, help="DBOS system database: sqlite:///file or postgresql://..."
)
@click.option(
    "--store",
    "stores",
    multiple=True,
    metavar="[NAME=]URL",
    help="A session store runs may name (@NAME), or the default store; opened at startup (repeatable).",
)
@click.option("--agent", "agent", default=None, help="Agent reference package.module:attr (checked to load).")
@click.option("--queue", default=DEFAULT_QUEUE, show_default=True, help="Queue to dequeue runs from.")
@click.option("--concurrency", type=click.IntRange(min=1), default=None, help="Runs executed at once.")
@click.option("--executor-id", default=None, help="DBOS executor id (restart a dead worker with its id).")
@click.option(
    "--adopt", multiple=True, help="Resume the pending runs of this dead executor id too (repeatable)."
)
@click.option(
    "--polling-interval", type=float, default=0.5, show_default=True, help="Queue polling, seconds."
)
@click.option(
    "--connect-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=10.0,
    show_default=True,
    help="Seconds to wait for the system database at start before giving up.",
)
def worker(
    system_db: str,
    stores: tuple[str, ...],
    agent: str | None,
    queue: str,
    concurrency: int | None,
    executor_id: str | None,
    adopt: tuple[str, ...],
    polling_interval: float,
    connect_timeout: float,
) -> None:
    """Execute harness runs from the system database until SIGTERM or SIGINT.

    A system database that cannot be used (unreachable, another scheme than PostgreSQL or
    SQLite) fails at start with one ``EngineConnectionError`` line naming what to check.
    """
    from harness import open_store
    from harness.config import load_agent
    from harness.durable import StoreDirectory
    from harness_dbos.engine import DBOSEngine
    from harness_dbos.preflight import check_system_database, launch_quietly

    check_system_database(system_db, timeout=connect_timeout)
    if agent is not None:
        load_agent(agent)
    directory = StoreDirectory.from_options(stores)
    for name in directory:
        url = directory.url(name)
        if url is not None:
            open_store(url.reveal()).close()
    engine = DBOSEngine(
        system_db,
        stores=directory,
        queue=queue,
        concurrency=concurrency,
        executor_id=executor_id,
        polling_interval=polling_interval,
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: types.FrameType | None) -> None:
        del signum, frame
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    launch_quietly(engine, system_db)
    try:
        if adopt:
            engine.adopt(list(adopt))
        click.echo(f"harness-dbos worker {executor_id or 'local'} ready", file=sys.stdout)
        sys.stdout.flush()
        while not stop.wait(0.5):
            pass
    finally:
        engine.shutdown()


@main.command("enqueue")
@click.option("--system-db", "system_db", required=True, help="DBOS system database URL.")
@click.option(
    "--store",
    "store",
    required=True,
    help="Session store: a URL without credentials, or @NAME the workers know.",
)
@click.option(
    "--strip-credentials",
    is_flag=True,
    help="Journal a store URL that carries a password without it (the workers supply it).",
)
@click.option("--agent", "agent", required=True, help="Agent reference package.module:attr.")
@click.option("--queue", default=DEFAULT_QUEUE, show_default=True)
@click.option("--session-id", default=None, help="Continue this session (default: a new one).")
@click.option("--wait/--no-wait", default=False, help="Wait for the run and print its summary.")
@click.argument("prompt")
def enqueue(
    system_db: str,
    store: str,
    strip_credentials: bool,
    agent: str,
    queue: str,
    session_id: str | None,
    wait: bool,
    prompt: str,
) -> None:
    """Enqueue a run of PROMPT; print its workflow and session ids (and, with --wait, its summary)."""
    from harness_dbos.client import DBOSRunClient

    async def go() -> None:
        client = DBOSRunClient(
            system_db, store_url=store, agent=agent, queue=queue, strip_credentials=strip_credentials
        )
        try:
            handle = await client.enqueue(prompt, session_id)
            click.echo(json.dumps({"workflow_id": handle.workflow_id, "session_id": handle.session_id}))
            if wait:
                summary = await handle.result()
                click.echo(json.dumps(summary.to_json()))
        finally:
            client.close()

    asyncio.run(go())
