"""What the store conformance kit runs in other processes, and the consistency check it applies.

:mod:`harness.testing.store_conformance` races two processes on one session and kills a
committing process at random moments. The children run :func:`worker_main` in a fresh
interpreter (``python -c``), open the store from its *spec* (a URL) with an *opener*
named ``"module:function"``, and report every successful commit on a side channel: a
text file they append one line to after each :meth:`~harness.session.Session.checkpoint`
returns (a SIGKILL never loses a line already written; the last one may be torn).

:func:`store_problems` is the check a store's data must pass at any moment, after any
crash: the view refers only to logged messages, the log is append-only and numbered
without gaps (unless pruned), edits and the ledger are well formed, and the view loads.

This module imports no pytest, so a child starts quickly.
"""

from __future__ import annotations

__all__ = [
    "WORKER_COMMAND",
    "Opener",
    "assert_store_consistent",
    "crash_step",
    "open_with_plugins",
    "read_side_channel",
    "resolve_opener",
    "spawn_worker",
    "store_problems",
    "worker_main",
]

import importlib
import itertools
import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from harness.core.messages import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from harness.errors import SessionConflictError, SessionStoreError
from harness.history import check_invariants
from harness.session import LEDGER_STATUSES, LedgerEntry, Session, SessionStore

Opener = Callable[[str], SessionStore]
"""Opens a store from its spec (a URL)."""

WORKER_COMMAND = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"
"""What a child interpreter runs: ``python -c WORKER_COMMAND <this file> <json arguments>``.

The file is run as a script, so the child does not import the whole ``harness.testing``
package (half a second per child).
"""

_manager: Any = None


def open_with_plugins(spec: str) -> SessionStore:
    """Open ``spec`` as ``harness.open_store`` does: with every installed ``harness`` plugin loaded.

    The plugin manager is built once per process. Experimental-API warnings of the
    plugins are silenced (a child's stderr is only read when it fails).
    """
    global _manager
    from harness.hooks.manager import PluginManager
    from harness.stores import open_store

    if _manager is None:
        manager = PluginManager()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            manager.load_entrypoint_plugins()
        _manager = manager
    return open_store(spec, plugin_manager=cast(PluginManager, _manager))


def resolve_opener(path: str) -> Opener:
    """The function ``"module:function"`` names (it takes a spec and returns a store).

    Raises:
        ValueError: ``path`` is not ``module:function`` or names nothing callable.
    """
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"opener must be 'module:function', got {path!r}")
    target: Any = importlib.import_module(module_name)
    for name in attribute.split("."):
        target = getattr(target, name)
    if not callable(target):
        raise ValueError(f"opener {path!r} is not callable")
    return cast(Opener, target)


# --------------------------------------------------------------------- consistency


def store_problems(store: SessionStore, session_id: str, *, history: bool = True) -> list[str]:
    """Every way a stored session is inconsistent; ``[]`` means it is sound.

    Checks the head against the view and the log, that every view reference names a
    logged message (with the same body), that the log's seqs increase and, unless
    pruned, are exactly ``0 .. log_length - 1``, that edits are numbered in order and
    name logged messages, that the ledger's statuses are known, that
    :meth:`Session.open <harness.session.Session.open>` loads the view and (with
    ``history``) that :func:`harness.history.check_invariants` finds nothing in it.
    """
    problems: list[str] = []
    try:
        head = store.head(session_id)
        stored = store.load(session_id)
        log = store.read_log(session_id)
        edits = store.edits(session_id)
    except SessionStoreError as exc:
        return [f"cannot be read: {exc}"]
    if stored.head != head:
        problems.append(f"load() head {stored.head} differs from head() {head}")
    if len(stored.view) != head.view_length:
        problems.append(f"view has {len(stored.view)} entries, head says {head.view_length}")
    seqs = [entry.seq for entry in log]
    if any(b <= a for a, b in itertools.pairwise(seqs)):
        problems.append(f"log seqs do not increase: {seqs}")
    if seqs and seqs[-1] >= head.log_length:
        problems.append(f"log seq {seqs[-1]} is beyond log_length {head.log_length}")
    if not head.log_pruned and seqs != list(range(head.log_length)):
        problems.append(f"log seqs are not 0..{head.log_length - 1}: {seqs[:20]}...")
    bodies = {entry.seq: entry.body for entry in log}
    for position, (entry, body) in enumerate(stored.view):
        if entry.seq is not None:
            if entry.seq not in bodies:
                problems.append(
                    f"view position {position} refers to log message {entry.seq}, which is missing"
                )
            elif bodies[entry.seq] != body:
                problems.append(f"view position {position} does not show log message {entry.seq} as logged")
        elif entry.body != body:
            problems.append(f"view position {position}: overlay body differs from the body loaded")
        if entry.source is not None and not 0 <= entry.source < head.log_length:
            problems.append(f"view position {position}: overlay source {entry.source} is not a log position")
    for index, edit in enumerate(edits):
        if edit.index != index:
            problems.append(f"edit {index} is numbered {edit.index}")
        if edit.revision > head.revision and head.forked_from is None:  # a fork keeps its parent's edits
            problems.append(f"edit {index} has revision {edit.revision}, after the head's {head.revision}")
        if any(not 0 <= seq < head.log_length for seq in edit.replaced):
            problems.append(f"edit {index} replaced messages outside the log: {edit.replaced}")
    for entry in stored.ledger:
        if entry.status not in LEDGER_STATUSES:
            problems.append(f"ledger entry {entry.tool_call_id!r} has status {entry.status!r}")
    try:
        session = Session.open(store, session_id)
    except Exception as exc:  # reported, not raised: this is a checker
        problems.append(f"Session.open fails: {exc!r}")
    else:
        if history:
            problems.extend(f"history: {v}" for v in check_invariants(session.messages))
    return problems


def assert_store_consistent(store: SessionStore, session_id: str, *, history: bool = True) -> None:
    """Fail with every problem :func:`store_problems` finds.

    Raises:
        AssertionError: The stored session is inconsistent.
    """
    problems = store_problems(store, session_id, history=history)
    if problems:
        listing = "\n  ".join(problems)
        raise AssertionError(f"session {session_id!r} in {store.url} is inconsistent:\n  {listing}")


# --------------------------------------------------------------------- the crashing writer


def crash_step(session: Session, iteration: int) -> None:
    """One step of the crash-test writer, on a view that ends with a request.

    Appends a response calling a tool and the request answering it (text that names the
    iteration); every third step records the call in the ledger (started, then
    completed) and a thought; every fourth step replaces the oldest tool result still
    shown in full with a placeholder overlay (a compaction-like rewrite). The
    iteration number is kept in ``metadata["iteration"]``.
    """
    call_id = f"crash_{iteration}"
    call = CanonicalMessage.response(
        TextPart(f"step {iteration}"),
        ToolCallPart(tool_call_id=call_id, tool_name="probe", args={"iteration": iteration}),
    )
    answer = CanonicalMessage.request(
        ToolReturnPart(tool_call_id=call_id, tool_name="probe", content=f"probe result {iteration} " * 8)
    )
    session.messages.extend([call, answer])
    if iteration % 3 == 0:
        now = datetime.now(UTC)
        session.record_tool(LedgerEntry(call_id, "probe", "started", now))
        session.record_tool(LedgerEntry(call_id, "probe", "completed", now, now, result='{"ok":true}'))
        session.thoughts.append(f"thought {iteration}")
    if iteration % 4 == 0:
        for index, message in enumerate(session.messages[:-2]):
            part = message.parts[0]
            if (
                isinstance(part, ToolReturnPart)
                and isinstance(part.content, str)
                and part.content[:6] == "probe "
            ):
                placeholder = message.replace(
                    parts=(
                        ToolReturnPart(
                            tool_call_id=part.tool_call_id, tool_name="probe", content="[cleared]"
                        ),
                    )
                )
                session.messages[index] = placeholder
                session.note_overlays([placeholder], [{"strategy": "crash_test", "index": index}])
                break
    session.metadata["iteration"] = iteration


def _race(args: dict[str, Any], store: SessionStore, side: Any) -> None:
    name = str(args["name"])
    commits = int(args["commits"])
    go = Path(args["go"])
    side.write("ready\n")
    side.flush()
    deadline = time.monotonic() + 60
    while not go.exists():
        if time.monotonic() > deadline:
            raise SystemExit("the go file never appeared")
        time.sleep(0.001)
    session = Session.open(store, args["session_id"])
    done = 0
    while done < commits:
        session.messages.extend(
            [
                CanonicalMessage.request(UserPromptPart(f"{name}-{done}")),
                CanonicalMessage.response(TextPart("ok")),
            ]
        )
        try:
            revision = session.checkpoint()
        except SessionConflictError:
            side.write("conflict\n")
            side.flush()
            session = Session.open(store, args["session_id"])
            continue
        side.write(f"ok {revision} {name}-{done}\n")
        side.flush()
        done += 1


def _crash(args: dict[str, Any], store: SessionStore, side: Any) -> None:
    session = Session.open(store, args["session_id"])
    iteration = int(session.metadata.get("iteration", 0))
    side.write("ready\n")
    side.flush()
    while True:
        iteration += 1
        crash_step(session, iteration)
        revision = session.checkpoint()
        side.write(f"{revision} {iteration}\n")
        side.flush()


def _lease(args: dict[str, Any], store: SessionStore, side: Any) -> None:
    """Take the session's run lease, say so, and hold it until killed (never dropping it)."""
    from harness.session.lease import LeasingStore, new_holder

    holder = new_holder(seconds=float(args.get("seconds", 60.0)))
    cast(LeasingStore, store).take_lease(args["session_id"], holder)
    side.write(f"leased {holder.token}\n")
    side.flush()
    time.sleep(120)


def worker_main(argv: Sequence[str] | None = None) -> None:
    """A child's entry point: the last argument is a JSON object (mode, opener, spec, session, side)."""
    raw = (argv if argv is not None else sys.argv)[-1]
    args: dict[str, Any] = json.loads(raw)
    store = resolve_opener(str(args["opener"]))(str(args["spec"]))
    with open(args["side"], "a", encoding="utf-8") as side:
        if args["mode"] == "race":
            _race(args, store, side)
        elif args["mode"] == "lease":
            _lease(args, store, side)
        else:
            _crash(args, store, side)
    store.close()


def spawn_worker(
    mode: str, *, opener: str, spec: str, session_id: str, side: Path, **extra: Any
) -> subprocess.Popen[bytes]:
    """Start a child running :func:`worker_main` (``mode``: ``"race"``, ``"crash"`` or ``"lease"``).

    Its stderr goes to ``<side>.err`` (read it when the child fails).
    """
    args = {
        "mode": mode,
        "opener": opener,
        "spec": spec,
        "session_id": session_id,
        "side": str(side),
        **extra,
    }
    err = open(side.with_name(side.name + ".err"), "wb")  # noqa: SIM115 - closed by the caller's wait
    try:
        return subprocess.Popen(
            [sys.executable, "-c", WORKER_COMMAND, __file__, json.dumps(args)],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
    finally:
        err.close()


def read_side_channel(side: Path) -> list[str]:
    """The complete lines a child wrote to its side channel (a torn last line is dropped)."""
    try:
        text = side.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    lines = text.split("\n")
    return lines[:-1]


if __name__ == "__main__":
    worker_main()
