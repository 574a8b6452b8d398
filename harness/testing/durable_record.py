"""What the durable test kit records: canonical request bodies and crash-safe JSON Lines.

Part of :mod:`harness.testing.durable` (import the public names from there).

* :func:`request_body` is the canonical, provider-facing JSON of one model request: roles,
  texts, tool calls and returns, retry prompts, tool definitions and the sampling settings,
  with keys sorted and no timestamps, usage, provider ids or harness marks. Two requests a
  provider could not tell apart have the same bytes.
* :func:`append_record` appends one JSON line with ``flush`` + ``fsync`` under an exclusive
  ``flock``, so several worker processes can share one folder and every line written before
  a ``SIGKILL`` survives it.
* :func:`recorded_requests` / :func:`recorded_tool_calls` read the lines back as typed
  records; :func:`wait_for` polls for a file or a condition (the block point).
* :func:`assert_exactly_once` / :func:`exactly_once_problems`: no request sent twice, no
  completed tool run twice, an interrupted tool re-run only when idempotent;
  :func:`canonical_history` compares final histories of runs made at other times.
"""

from __future__ import annotations

__all__ = [
    "BLOCKED_FILE",
    "REQUESTS_FILE",
    "TOOLS_FILE",
    "RecordedRequest",
    "RecordedToolCall",
    "append_record",
    "assert_exactly_once",
    "canonical_history",
    "canonical_json",
    "exactly_once_problems",
    "next_index",
    "recorded_requests",
    "recorded_tool_calls",
    "request_body",
    "wait_for",
]

import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal, cast

import attrs

from harness.core.messages import (
    CanonicalMessage,
    JsonValue,
    Part,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownPart,
    UserPromptPart,
)
from harness.core.model import ModelSettings, ToolDefinition

REQUESTS_FILE: Final = "requests.jsonl"
"""Every arrival at the scenario model, one JSON line each."""
TOOLS_FILE: Final = "tools.jsonl"
"""Every start and end of a scenario tool, one JSON line each."""
BLOCKED_FILE: Final = "blocked"
"""Written (with the pid and what blocked) when the scenario blocks at its block point."""
_LOCK_FILE: Final = ".lock"
_COUNTS_FILE: Final = "counts.json"


def _json_default(value: object) -> JsonValue:
    if isinstance(value, tuple | set | frozenset):
        return list(cast("tuple[Any, ...]", value))
    return str(value)


def canonical_json(value: JsonValue) -> bytes:
    """``value`` as canonical JSON: sorted keys, no spaces, ASCII only (so equal values give equal bytes)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=_json_default
    ).encode("ascii")


def _part(part: Part) -> dict[str, JsonValue]:
    if isinstance(part, SystemPromptPart):
        return {"type": "system", "text": part.content}
    if isinstance(part, UserPromptPart):
        return {"type": "user", "content": part.content}
    if isinstance(part, ToolReturnPart):
        return {
            "type": "tool_return",
            "id": part.tool_call_id,
            "name": part.tool_name,
            "content": part.content,
        }
    if isinstance(part, RetryPromptPart):
        return {"type": "retry", "id": part.tool_call_id, "name": part.tool_name, "content": part.content}
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.content}
    if isinstance(part, ThoughtPart):
        return {"type": "thinking", "text": part.content, "signature": part.signature}
    if isinstance(part, ToolCallPart):
        return {"type": "tool_call", "id": part.tool_call_id, "name": part.tool_name, "args": part.args}
    unknown: UnknownPart = part
    return {"type": unknown.kind, "data": dict(unknown.data)}


def _message(message: CanonicalMessage) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = {
        "role": "user" if message.kind == "request" else "assistant",
        "parts": [_part(p) for p in message.parts],
    }
    if message.instructions is not None:
        out["instructions"] = message.instructions
    return out


def request_body(
    messages: Sequence[CanonicalMessage],
    tools: Sequence[ToolDefinition] = (),
    settings: ModelSettings | None = None,
    *,
    model_name: str | None = None,
) -> bytes:
    """The canonical provider-facing JSON of one model request (see the module docstring).

    Args:
        messages: The messages sent (system prompt and request-scoped parts included).
        tools: The tool definitions sent.
        settings: The request's settings (``max_tokens``, ``temperature`` and ``extra`` are kept;
            ``timeout`` is client-side and left out).
        model_name: The model asked, when it should be part of the body.
    """
    body: dict[str, JsonValue] = {
        "messages": [_message(m) for m in messages],
        "tools": [
            {"name": t.name, "description": t.description, "parameters": t.parameters_json_schema}
            for t in tools
        ],
    }
    if settings is not None:
        body["settings"] = {
            "max_tokens": settings.max_tokens,
            "temperature": settings.temperature,
            "extra": dict(settings.extra),
        }
    if model_name is not None:
        body["model"] = model_name
    return canonical_json(body)


# ---------------------------------------------------------------- crash-safe JSON Lines


@contextlib.contextmanager
def _locked(directory: Path) -> Generator[None]:
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / _LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _append_bytes(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)


def append_record(directory: str | os.PathLike[str], name: str, record: Mapping[str, JsonValue]) -> None:
    """Append ``record`` as one JSON line to ``directory/name``: locked, then flushed and fsynced."""
    folder = Path(directory)
    line = canonical_json(dict(record)) + b"\n"
    with _locked(folder):
        _append_bytes(folder / name, line)


def next_index(directory: str | os.PathLike[str], counter: str, run: str | None) -> int:
    """Increment and return the 1-based arrival number of ``run`` on ``counter`` (locked, fsynced).

    The counts live in ``directory/counts.json`` so that numbering an arrival never rereads
    the (possibly large) records.
    """
    folder = Path(directory)
    path = folder / _COUNTS_FILE
    key = f"{counter}:{run}"
    with _locked(folder):
        counts: dict[str, int] = {}
        if path.exists():
            counts = cast("dict[str, int]", json.loads(path.read_bytes() or b"{}"))
        counts[key] = counts.get(key, 0) + 1
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(canonical_json(counts))
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        tmp.replace(path)
        return counts[key]


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    records: list[dict[str, Any]] = []
    for raw in path.read_bytes().splitlines():
        if raw.strip():
            try:
                records.append(cast("dict[str, Any]", json.loads(raw)))
            except json.JSONDecodeError:  # a line torn by a kill mid-write: not an arrival
                continue
    return records


@attrs.frozen
class RecordedRequest:
    """One arrival at the scenario model.

    Attributes:
        run: The run key (the session id) found in the request, or ``None``.
        index: 1-based arrival number of this run's requests at the model (a request sent
            twice counts twice).
        body: The canonical body bytes (:func:`request_body`); with
            ``Scenario(record_bodies=False)`` the canonical JSON of ``{"sha256": ...}``.
        capability: Whether it was a capability's call (the summarizer: no tools offered).
        pid: The process that received it.
    """

    run: str | None
    index: int
    body: bytes = attrs.field(repr=False)
    capability: bool = False
    pid: int = 0

    @property
    def digest(self) -> str:
        """SHA-256 of the body (the recorded one when bodies were not kept)."""
        parsed = json.loads(self.body)
        if isinstance(parsed, dict) and set(cast("dict[str, Any]", parsed)) == {"sha256"}:
            return str(cast("dict[str, Any]", parsed)["sha256"])
        return hashlib.sha256(self.body).hexdigest()

    def json(self) -> Any:
        """The parsed body."""
        return json.loads(self.body)


@attrs.frozen
class RecordedToolCall:
    """One start or end of a scenario tool.

    Attributes:
        run: The run key (the session id of the run context), or ``None``.
        call_id: The tool call id.
        tool: The tool's name.
        event: ``"start"`` or ``"end"``.
        pid: The process that ran it.
    """

    run: str | None
    call_id: str
    tool: str
    event: Literal["start", "end"]
    pid: int = 0


def recorded_requests(record_dir: str | os.PathLike[str]) -> list[RecordedRequest]:
    """Every arrival at the scenario model, in arrival order."""
    return [
        RecordedRequest(
            run=line.get("run"),
            index=int(line["index"]),
            body=canonical_json(line["body"]),
            capability=bool(line.get("capability", False)),
            pid=int(line.get("pid", 0)),
        )
        for line in _lines(Path(record_dir) / REQUESTS_FILE)
    ]


def recorded_tool_calls(record_dir: str | os.PathLike[str]) -> list[RecordedToolCall]:
    """Every start and end of a scenario tool, in order."""
    return [
        RecordedToolCall(
            run=line.get("run"),
            call_id=str(line["call_id"]),
            tool=str(line["tool"]),
            event=cast("Literal['start', 'end']", line["event"]),
            pid=int(line.get("pid", 0)),
        )
        for line in _lines(Path(record_dir) / TOOLS_FILE)
    ]


def wait_for(
    target: str | os.PathLike[str] | Callable[[], object],
    timeout: float = 30.0,
    *,
    interval: float = 0.02,
    process: subprocess.Popen[Any] | None = None,
    what: str | None = None,
) -> None:
    """Wait until ``target`` (a path) exists, or ``target()`` returns something true.

    Args:
        target: A file to wait for (e.g. ``record_dir / "blocked"``) or a predicate.
        timeout: Seconds to wait.
        interval: Seconds between checks.
        process: A worker process that must stay alive meanwhile: its early exit fails fast.
        what: What is awaited, for the error message.

    Raises:
        TimeoutError: ``timeout`` passed (the message names ``what``).
        RuntimeError: ``process`` exited before the condition held (its exit code is named).
    """
    if callable(target):
        check = target
        label = what or getattr(target, "__name__", "the condition")
    else:
        path = Path(target)
        label = what or str(path)

        def check() -> object:
            return path.exists()

    deadline = time.monotonic() + timeout
    while True:
        if check():
            return
        if process is not None and process.poll() is not None:
            if check():
                return
            raise RuntimeError(f"the worker process exited with code {process.returncode} before {label}")
        if time.monotonic() >= deadline:
            raise TimeoutError(f"waited {timeout:.1f}s for {label}")
        time.sleep(interval)


# ---------------------------------------------------------------- checks on the records


def _drop_timestamps(value: Any) -> Any:
    if isinstance(value, Mapping):
        items = cast("Mapping[str, Any]", value).items()
        return {k: _drop_timestamps(v) for k, v in items if k != "timestamp"}
    if isinstance(value, list | tuple):
        return [_drop_timestamps(v) for v in cast("Sequence[Any]", value)]
    return value


def canonical_history(messages: Sequence[CanonicalMessage]) -> bytes:
    """A history's wire JSON without its timestamps, canonical: to compare runs made at other times.

    Everything else is kept (usage, model names, harness marks, metadata): two runs whose
    histories differ only in when things happened give equal bytes.
    """
    from harness.wire import messages_to_jsonable

    return canonical_json(_drop_timestamps(messages_to_jsonable(messages)))


def _blocked(directory: Path) -> dict[str, Any]:
    path = directory / BLOCKED_FILE
    if not path.exists():
        return {}
    try:
        return cast("dict[str, Any]", json.loads(path.read_bytes()))
    except json.JSONDecodeError:
        return {}


def exactly_once_problems(
    record_dir: str | os.PathLike[str], run: str | None = None, *, idempotent_tools: Sequence[str] = ("work",)
) -> list[str]:
    """What the records show was done more than once (``[]``: nothing).

    * A request body that reached the model twice, except the one in flight at the block
      point (``blocked`` names it), which a resumed run sends once more.
    * A tool call that ended twice, or started again after it ended.
    * A tool call started twice: allowed only for the call running at the block point,
      once more, and only for a tool in ``idempotent_tools`` (a tool that is not must be
      answered "outcome unknown" instead).

    Args:
        record_dir: The scenario's record folder.
        run: Check this run only (default: every run, each on its own).
        idempotent_tools: The tools that may run again after a crash.
    """
    directory = Path(record_dir)
    blocked = _blocked(directory)
    problems: list[str] = []
    requests = [r for r in recorded_requests(directory) if run is None or r.run == run]
    in_flight: set[tuple[str | None, str]] = set()
    if blocked.get("what") == "request":
        for record in requests:
            if record.run == blocked.get("run") and record.index == blocked.get("index"):
                in_flight.add((record.run, record.digest))
    seen: dict[tuple[str | None, str], list[int]] = {}
    for record in requests:
        seen.setdefault((record.run, record.digest), []).append(record.index)
    for (key_run, digest), indexes in seen.items():
        allowed = 2 if (key_run, digest) in in_flight else 1
        if len(indexes) > allowed:
            problems.append(
                f"run {key_run}: one request body (sha256 {digest[:12]}) reached the model "
                f"{len(indexes)} times (arrivals {indexes})"
            )
    events: dict[tuple[str | None, str], list[RecordedToolCall]] = {}
    for call in recorded_tool_calls(directory):
        if run is None or call.run == run:
            events.setdefault((call.run, call.call_id), []).append(call)
    for (key_run, call_id), calls in events.items():
        kinds = [c.event for c in calls]
        tool = calls[0].tool
        if kinds.count("end") > 1:
            problems.append(
                f"run {key_run}: tool call {call_id} ({tool}) completed {kinds.count('end')} times"
            )
        if "end" in kinds and "start" in kinds[kinds.index("end") + 1 :]:
            problems.append(f"run {key_run}: tool call {call_id} ({tool}) ran again after it had completed")
        starts = kinds.count("start")
        if starts > 1:
            interrupted = blocked.get("what") == "tool" and (blocked.get("run"), blocked.get("call_id")) == (
                key_run,
                call_id,
            )
            if not interrupted or starts > 2:
                problems.append(f"run {key_run}: tool call {call_id} ({tool}) started {starts} times")
            elif tool not in idempotent_tools:
                problems.append(
                    f"run {key_run}: tool call {call_id} ({tool}) is not idempotent, was running when its "
                    "worker died, and ran again (its outcome should have been reported unknown)"
                )
    return problems


def assert_exactly_once(
    record_dir: str | os.PathLike[str], run: str | None = None, *, idempotent_tools: Sequence[str] = ("work",)
) -> None:
    """Raise ``AssertionError`` listing :func:`exactly_once_problems`, if there are any."""
    problems = exactly_once_problems(record_dir, run, idempotent_tools=idempotent_tools)
    if problems:
        raise AssertionError("done more than once:\n  " + "\n  ".join(problems))
