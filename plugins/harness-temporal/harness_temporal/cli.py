"""The worker command line: ``python -m harness_temporal worker ...`` and ``harness worker temporal ...``."""

from __future__ import annotations

__all__ = ["main", "worker"]

import asyncio
import os
import sys

import click

from harness.errors import HarnessError


@click.command("worker")
@click.option(
    "--address", default="127.0.0.1:7233", show_default=True, help="The Temporal frontend, HOST:PORT."
)
@click.option("--namespace", default="default", show_default=True, help="The Temporal namespace.")
@click.option("--task-queue", default="harness", show_default=True, help="The task queue to poll.")
@click.option(
    "--agent",
    "agents",
    multiple=True,
    metavar="MODULE:ATTR",
    help="An agent this worker runs, loaded at start so a bad reference fails now (repeatable).",
)
@click.option(
    "--store",
    "stores",
    multiple=True,
    metavar="[NAME=]URL",
    help="A session store runs may name (@NAME), or the default store; opened at start (repeatable).",
)
@click.option(
    "--sticky-timeout",
    type=float,
    default=10.0,
    show_default=True,
    help="Seconds before a run cached on a worker that stopped is handed to another worker.",
)
@click.option(
    "--connect-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=10.0,
    show_default=True,
    help="Seconds to wait for the Temporal server at start before giving up.",
)
def worker(
    address: str,
    namespace: str,
    task_queue: str,
    agents: tuple[str, ...],
    stores: tuple[str, ...],
    sticky_timeout: float,
    connect_timeout: float,
) -> None:
    """Run a Temporal worker for harness runs until SIGINT or SIGTERM.

    Each run names its agent and its store, by reference: @NAME for a store given here as
    --store NAME=URL, or a URL without credentials (matched against these, else opened with
    the credentials of the environment, PGPASSWORD or ~/.pgpass). The worker builds the agent
    with harness.config.load_agent and opens the store (every worker must reach the same one).
    No server at --address within --connect-timeout is one EngineConnectionError line (exit 2).
    """
    from harness_temporal.engine import run_worker

    def ready() -> None:
        click.echo(
            f"harness-temporal worker: {address} namespace={namespace} task-queue={task_queue}", err=True
        )

    try:
        asyncio.run(
            run_worker(
                address,
                namespace=namespace,
                task_queue=task_queue,
                agents=agents,
                stores=stores,
                sticky_timeout=sticky_timeout,
                connect_timeout=connect_timeout,
                on_ready=ready,
            )
        )
    except HarnessError as exc:
        # One line, as every harness command reports an error, and out at once: a connection
        # attempt cut short leaves Temporal's native threads running, and the interpreter's
        # teardown would crash on them (a Rust panic after the message).
        text = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        click.echo(f"error: {type(exc).__name__}: {text}", err=True)
        _exit_cleanly(2)
    _exit_cleanly()


def _exit_cleanly(code: int = 0) -> None:
    """End the process with status ``code`` once the worker has shut down and closed its stores.

    Temporal's native runtime keeps its own threads alive until the interpreter is torn
    down; a signal-driven shutdown racing that teardown was seen to end the process with
    SIGSEGV after everything had been written and closed. A supervisor must read a clean
    stop as a clean stop, so nothing of the teardown is left to run.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


@click.group("harness-temporal")
def main() -> None:
    """Harness runs on Temporal."""


main.add_command(worker)
