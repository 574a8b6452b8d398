"""The worker command line: ``python -m harness_temporal worker ...`` and ``harness worker temporal ...``."""

from __future__ import annotations

__all__ = ["main", "worker"]

import asyncio
import os
import sys

import click


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
def worker(
    address: str,
    namespace: str,
    task_queue: str,
    agents: tuple[str, ...],
    stores: tuple[str, ...],
    sticky_timeout: float,
) -> None:
    """Run a Temporal worker for harness runs until SIGINT or SIGTERM.

    Each run names its agent and its store, by reference: @NAME for a store given here as
    --store NAME=URL, or a URL without credentials (matched against these, else opened with
    the credentials of the environment, PGPASSWORD or ~/.pgpass). The worker builds the agent
    with harness.config.load_agent and opens the store (every worker must reach the same one).
    """
    from harness_temporal.engine import run_worker

    click.echo(f"harness-temporal worker: {address} namespace={namespace} task-queue={task_queue}", err=True)
    asyncio.run(
        run_worker(
            address,
            namespace=namespace,
            task_queue=task_queue,
            agents=agents,
            stores=stores,
            sticky_timeout=sticky_timeout,
        )
    )
    _exit_cleanly()


def _exit_cleanly() -> None:
    """End the process with status 0 once the worker has shut down and closed its stores.

    Temporal's native runtime keeps its own threads alive until the interpreter is torn
    down; a signal-driven shutdown racing that teardown was seen to end the process with
    SIGSEGV after everything had been written and closed. A supervisor must read a clean
    stop as a clean stop, so nothing of the teardown is left to run.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@click.group("harness-temporal")
def main() -> None:
    """Harness runs on Temporal."""


main.add_command(worker)
