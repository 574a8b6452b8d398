"""The engine-neutral replay check: a run replayed after a crash sends the same requests.

Part of :mod:`harness.testing.durable` (import the public names from there).

:class:`JournalEffects` is the smallest durable engine: an in-memory journal of every
effect of a run, in order (each model-request unit's response, each tool unit's outcome,
each ``now()`` and ``new_id()``), in the project's wire format (JSON, never pickle). Given
the journal of an earlier execution it *replays*: journaled units return their recorded
output without calling the model or the tool, and the run goes live where the journal
ends. ``crash_at=k`` simulates a killed worker: unit ``k`` raises a private
``BaseException``, and from then on every effect and every store call raises it too, so
nothing the dead worker would not have written reaches the journal or the store.

``now()`` and ``new_id()`` are functions of their position in the journal (a fixed epoch
plus one second per position, a hash of the position), so an uninterrupted run and a
replayed one agree on every timestamp and id and their histories compare byte for byte.

:func:`assert_replay_identical` runs an agent uninterrupted, then, for each crash point,
crashes a run there and replays it, once with a fresh agent from the factory (a new worker
process) and once with the agent that crashed (a worker replaying a run it already ran,
as an engine does after evicting a cached run). Every model-request unit's canonical body
(:func:`~harness.testing.durable_record.request_body`), the final history and, with a
store, the stored session must equal the uninterrupted run's. A capability that keeps a
counter on ``self`` instead of rebuilding it from the history fails it.
"""

from __future__ import annotations

__all__ = ["JournalEffects", "JournalEntry", "UnitRecord", "assert_replay_identical"]

import gc
import hashlib
import json
import tempfile
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, cast

import attrs

from harness.core.effects import Effects, InProcessEffects, ModelRequestUnit, ToolCallUnit, ToolOutcome
from harness.core.messages import CanonicalMessage, harness_mark
from harness.testing.durable_record import canonical_json, request_body

if TYPE_CHECKING:
    from harness.run.agent import Agent, RunResult
    from harness.session import Session, SessionStore

EPOCH: Final = datetime(2026, 1, 1, tzinfo=UTC)
"""``JournalEffects.now()`` at journal position 0 (one second later per position)."""
DEFAULT_SESSION_ID: Final = hashlib.sha256(b"harness.testing.durable").hexdigest()[:32]

EntryKind = Literal["now", "new_id", "model_request", "tool_call"]


class _SimulatedCrash(BaseException):
    """The worker "died" here (a ``BaseException``, so no ``except Exception`` swallows it)."""


@attrs.frozen
class JournalEntry:
    """One journaled effect.

    Attributes:
        kind: ``"now"``, ``"new_id"``, ``"model_request"`` or ``"tool_call"``.
        label: What it was, for messages (``"model request 3 (capability, summarizing)"``).
        data: Its output in the wire format: an ISO timestamp, an id, a response message's
            JSON, a :class:`~harness.core.effects.ToolOutcome`'s JSON.
    """

    kind: EntryKind
    label: str
    data: bytes = attrs.field(repr=False)


@attrs.frozen
class UnitRecord:
    """A model-request unit one execution made (replayed from the journal or live).

    Attributes:
        index: The unit's index in the run (1-based).
        purpose: ``"request"`` or ``"capability"``.
        source: ``"agent"`` or the capability's name.
        body: The canonical body of the request.
        messages: The request itself (to attribute a difference to a part and its mark).
        replayed: Whether its response came from the journal.
    """

    index: int
    purpose: str
    source: str
    body: bytes = attrs.field(repr=False)
    messages: tuple[CanonicalMessage, ...] = attrs.field(repr=False)
    replayed: bool


def _encode_message(message: CanonicalMessage) -> bytes:
    from harness.wire import messages_to_jsonable

    return canonical_json(messages_to_jsonable([message])[0])


def _decode_message(data: bytes) -> CanonicalMessage:
    from harness.wire import messages_from_jsonable

    return messages_from_jsonable([json.loads(data)])[0]


class JournalEffects:
    """Effects that journal every output in memory and replay an earlier execution's journal.

    Args:
        journal: The journal of an earlier execution of the same run (``()``: a first
            execution).
        crash_at: Simulate a killed worker at this unit (1-based, counting model-request and
            tool-call units): the unit raises, and so does every effect after it.
        live: Where live units run (default: :class:`~harness.core.effects.InProcessEffects`).
        keep_requests: Keep each request's messages on :attr:`requests` (to attribute a
            difference to a part); ``False`` drops them, as a dead worker's memory is gone.

    Attributes:
        entries: This execution's journal: the replayed prefix, then what it did live.
        units: The model-request and tool-call units of this execution.
        requests: Every model-request unit of this execution, replayed ones included.
        crashed: Whether the simulated crash happened.
        divergence: Set when the run asked for another effect than the journal holds at
            that position (every later effect raises ``AssertionError`` with it).
    """

    deltas: bool = True
    """Units carry deltas, as they do for an engine that ships them to another process."""

    def __init__(
        self,
        journal: Iterable[JournalEntry] = (),
        *,
        crash_at: int | None = None,
        live: Effects | None = None,
        keep_requests: bool = True,
    ) -> None:
        self.keep_requests = keep_requests
        self.replay: tuple[JournalEntry, ...] = tuple(journal)
        self.crash_at = crash_at
        self.live: Effects = live if live is not None else InProcessEffects()
        self.entries: list[JournalEntry] = []
        self.units = 0
        self.requests: list[UnitRecord] = []
        self.crashed = False
        self.divergence: str | None = None
        self.dead_hooks: list[Callable[[], None]] = []

    @property
    def size(self) -> int:
        """Bytes journaled (the outputs' wire JSON)."""
        return sum(len(entry.data) for entry in self.entries)

    def _crash(self) -> None:
        if not self.crashed:
            self.crashed = True
            for hook in self.dead_hooks:
                hook()
        raise _SimulatedCrash(f"simulated crash at unit {self.crash_at}")

    def _take(self, kind: EntryKind, label: str, *, unit: bool) -> JournalEntry | None:
        """The journaled entry at the next position, or ``None`` when live (crashing at the crash point)."""
        if self.crashed:
            self._crash()
        if self.divergence is not None:  # sticky: a capability swallowing the first error changes nothing
            raise AssertionError(self.divergence)
        if unit:
            self.units += 1
        position = len(self.entries)
        if position < len(self.replay):
            entry = self.replay[position]
            if (entry.kind, entry.label) != (kind, label):
                self.divergence = (
                    f"the replay diverged from the journal at position {position + 1}: the run asked for "
                    f"{label}, the journal has {entry.label}"
                )
                raise AssertionError(self.divergence)
            self.entries.append(entry)
            return entry
        if unit and self.crash_at is not None and self.units >= self.crash_at:
            self._crash()
        return None

    def _keep(self, kind: EntryKind, label: str, data: bytes) -> None:
        self.entries.append(JournalEntry(kind, label, data))

    def now(self) -> datetime:
        """The journaled time, or ``EPOCH`` plus one second per journal position."""
        entry = self._take("now", "now()", unit=False)
        if entry is not None:
            return datetime.fromisoformat(entry.data.decode("ascii"))
        value = EPOCH + timedelta(seconds=len(self.entries))
        self._keep("now", "now()", value.isoformat().encode("ascii"))
        return value

    def new_id(self) -> str:
        """The journaled id, or a hash of the journal position (32 hexadecimal characters)."""
        entry = self._take("new_id", "new_id()", unit=False)
        if entry is not None:
            return entry.data.decode("ascii")
        value = hashlib.sha256(f"harness.testing.durable:{len(self.entries)}".encode()).hexdigest()[:32]
        self._keep("new_id", "new_id()", value.encode("ascii"))
        return value

    async def model_request(self, unit: ModelRequestUnit) -> CanonicalMessage:
        """The journaled response, or the live one (journaled, and returned as decoded from the journal)."""
        label = f"model request {unit.index} ({unit.purpose}, {unit.source})"
        body = request_body(unit.messages, unit.tools, unit.settings, model_name=unit.model.model_name)
        entry = self._take("model_request", label, unit=True)
        self.requests.append(
            UnitRecord(
                unit.index,
                unit.purpose,
                unit.source,
                body,
                tuple(unit.messages) if self.keep_requests else (),
                entry is not None,
            )
        )
        if entry is not None:
            return _decode_message(entry.data)
        data = _encode_message(await self.live.model_request(unit))
        if self.crashed:  # the crash came while the request was in flight
            self._crash()
        self._keep("model_request", label, data)
        return _decode_message(data)

    async def tool_call(self, unit: ToolCallUnit) -> ToolOutcome:
        """The journaled outcome, or the live one (journaled, and returned as decoded from the journal)."""
        label = f"tool call {unit.call.tool_call_id} ({unit.call.tool_name})"
        entry = self._take("tool_call", label, unit=True)
        if entry is not None:
            return ToolOutcome.from_json(json.loads(entry.data))
        data = canonical_json((await self.live.tool_call(unit)).to_json())
        if self.crashed:
            self._crash()
        self._keep("tool_call", label, data)
        return ToolOutcome.from_json(json.loads(data))


class _KillableStore:
    """A store proxy that refuses every call once its worker "died" (nothing more is written)."""

    def __init__(self, inner: SessionStore) -> None:
        self._inner = inner
        self.dead = False

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.dead:
                raise _SimulatedCrash("the worker is dead: no store call")
            return value(*args, **kwargs)

        return call

    def kill(self) -> None:
        self.dead = True


# ---------------------------------------------------------------- the check


@attrs.frozen
class _Execution:
    effects: JournalEffects
    result: RunResult | None
    agent: Agent


def _capability_names(agent: Agent) -> list[str]:
    from harness.hooks import capability_name

    return [capability_name(c) for c in agent.plugin_manager.capabilities]


def _first_difference(a: bytes, b: bytes) -> int:
    for position, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return position
    return min(len(a), len(b))


def _around(data: bytes, position: int) -> str:
    return data[max(0, position - 80) : position + 80].decode("ascii", "replace")


def _marks(messages: Sequence[CanonicalMessage], other: Sequence[CanonicalMessage]) -> list[str]:
    """The harness marks of the first differing message's parts (which capability wrote them)."""
    for index, (x, y) in enumerate(zip(messages, other, strict=False)):
        if request_body([x]) != request_body([y]):
            found = [dict(m) for m in (harness_mark(p) for p in (*x.parts, *y.parts)) if m is not None]
            return [f"message {index}: harness marks {found}"] if found else [f"message {index}"]
    if len(messages) != len(other):
        return [f"message count {len(other)} vs {len(messages)}"]
    return []


def _compare_requests(
    reference: list[UnitRecord], replayed: list[UnitRecord], context: str, stack: list[str]
) -> None:
    for ref, got in zip(reference, replayed, strict=False):
        if (ref.purpose, ref.source) != (got.purpose, got.source) or ref.body != got.body:
            position = _first_difference(ref.body, got.body)
            where = "; ".join(_marks(ref.messages, got.messages))
            raise AssertionError(
                f"{context}: model-request unit {got.index} ({got.purpose}, source {got.source!r}, "
                f"{'replayed from the journal' if got.replayed else 'live'}) differs from the uninterrupted "
                f"run's unit {ref.index} ({ref.purpose}, source {ref.source!r}) at byte {position}"
                f"{' (' + where + ')' if where else ''}; capabilities in the stack: {stack}\n"
                f"  uninterrupted: ...{_around(ref.body, position)}...\n"
                f"  replayed:      ...{_around(got.body, position)}..."
            )
    if len(reference) != len(replayed):
        raise AssertionError(
            f"{context}: the replayed run made {len(replayed)} model-request units, the uninterrupted "
            f"run {len(reference)} (identical up to unit {min(len(reference), len(replayed))}); "
            f"capabilities in the stack: {stack}"
        )


def _history_bytes(result: RunResult) -> bytes:
    from harness.wire import messages_to_jsonable

    return canonical_json(messages_to_jsonable(result.all_messages))


def _stored(store: SessionStore, session_id: str) -> dict[str, Any]:
    """What a stored session holds that a replay must reproduce (head times and marks aside)."""
    from harness.session import Session
    from harness.wire import messages_to_jsonable

    session = Session.open(store, session_id)
    return {
        "view": messages_to_jsonable(session.messages),
        "log": messages_to_jsonable(session.transcript()),
        "usage": attrs.asdict(session.usage),
        "thoughts": list(session.thoughts),
        "total_tokens": session.total_tokens,
        "current_model": session.current_model,
        "ledger": sorted(
            (json.loads(canonical_json(attrs.asdict(e))) for e in session.ledger.values()),
            key=lambda e: str(cast("Mapping[str, Any]", e)["tool_call_id"]),
        ),
    }


def _compare_stored(reference: dict[str, Any], replayed: dict[str, Any], context: str) -> None:
    for key, value in reference.items():
        if canonical_json(value) != canonical_json(replayed[key]):
            ref, got = canonical_json(value), canonical_json(replayed[key])
            position = _first_difference(ref, got)
            raise AssertionError(
                f"{context}: the stored session's {key} differs from the uninterrupted run's "
                f"at byte {position}\n"
                f"  uninterrupted: ...{_around(ref, position)}...\n"
                f"  replayed:      ...{_around(got, position)}..."
            )


class _Runner:
    """Runs one execution of the checked run: its session, its store, its effects."""

    def __init__(self, prompt: str, session_id: str, store: SessionStore | None) -> None:
        self.prompt = prompt
        self.session_id = session_id
        self.store = store

    def session(self, run_key: str, killable: _KillableStore | None) -> Session:
        from harness.session import Session

        fields: dict[str, Any] = {
            "session_id": self.session_id,
            "project_id": "replay-check",
            "working_directory": "/replay-check",
            "created_at": EPOCH,
            "last_modified": EPOCH,
        }
        if self.store is None:
            return Session(**fields)
        from harness.durable.replay_safe import ReplaySafeStore

        inner = cast("SessionStore", killable) if killable is not None else self.store
        return ReplaySafeStore(inner, run_key).new_session(**fields)  # a replay finds the session it created

    async def execute(self, agent: Agent, effects: JournalEffects, run_key: str) -> _Execution:
        killable = _KillableStore(self.store) if self.store is not None else None
        if killable is not None:
            effects.dead_hooks.append(killable.kill)
        session = self.session(run_key, killable)
        try:
            result = await agent.run(self.prompt, session, effects=effects)
        except BaseException:
            if effects.divergence is not None:
                raise AssertionError(f"{run_key}: {effects.divergence}") from None
            if not effects.crashed:
                raise
            return _Execution(effects, None, agent)
        if effects.divergence is not None:
            raise AssertionError(f"{run_key}: {effects.divergence}")
        return _Execution(effects, result, agent)

    def reset(self) -> None:
        if self.store is not None:
            self.store.delete(self.session_id)


def _open_store(url: str) -> SessionStore:
    from harness.hooks.manager import PluginManager
    from harness.stores import open_store

    if url.startswith(("sqlite:", "file:")):
        return open_store(url)
    manager = PluginManager()  # another scheme (postgresql:) comes from an installed plugin
    manager.load_entrypoint_plugins()
    return open_store(url, plugin_manager=manager)


async def assert_replay_identical(
    agent_factory: Callable[[], Agent | Awaitable[Agent]],
    prompt: str,
    *,
    store_url: str | None = None,
    crash_after: Iterable[int] | None = None,
    session_id: str = DEFAULT_SESSION_ID,
    replay_with: Sequence[Literal["fresh", "same"]] = ("fresh", "same"),
) -> int:
    """Check that a run replayed after a crash behaves exactly as an uninterrupted one.

    Args:
        agent_factory: Builds the agent (sync or async); called once per execution.
        prompt: The run's prompt.
        store_url: Run on a stored session in this store (through
            :class:`~harness.durable.replay_safe.ReplaySafeStore`), and compare the stored
            session too. The session ``session_id`` is deleted from it before and after each
            execution. ``None``: an in-memory session.
        crash_after: The units (1-based, model-request and tool-call units in run order) to
            crash at, one replay each; default: every unit of the uninterrupted run.
        session_id: The run's session id.
        replay_with: Which agent replays: ``"fresh"`` (a new one from the factory: a new worker)
            and/or ``"same"`` (the one that crashed: a worker replaying a run it ran before).

    Returns:
        The number of units of the uninterrupted run.

    Raises:
        AssertionError: A replayed run differs: it names the crash point, the agent, the
            first differing unit, its capability and the bytes around the difference.
        ValueError: A crash point is not a unit of the run.
    """

    async def build() -> Agent:
        made = agent_factory()
        if isinstance(made, Awaitable):
            return await made
        return made

    with tempfile.TemporaryDirectory(prefix="harness-replay-") as scratch:
        reference_store = _open_store(f"sqlite:///{Path(scratch) / 'reference.db'}") if store_url else None
        store = _open_store(store_url) if store_url else None
        try:
            reference_runner = _Runner(prompt, session_id, reference_store)
            reference = await reference_runner.execute(
                await build(), JournalEffects(), f"reference:{session_id}"
            )
            assert reference.result is not None
            total = reference.effects.units
            stack = _capability_names(reference.agent)
            reference_history = _history_bytes(reference.result)
            reference_stored = _stored(reference_store, session_id) if reference_store is not None else None
            points = sorted(set(crash_after)) if crash_after is not None else list(range(1, total + 1))
            for point in points:
                if not 1 <= point <= total:
                    raise ValueError(f"crash point {point} is not a unit of the run (it has {total} units)")
            runner = _Runner(prompt, session_id, store)
            for point in points:
                for mode in replay_with:
                    run_key = f"replay-check:{session_id}:{point}:{mode}"
                    runner.reset()
                    crash = JournalEffects(crash_at=point, keep_requests=False)
                    crashed = await runner.execute(await build(), crash, run_key)
                    if not crashed.effects.crashed:
                        raise AssertionError(
                            f"the run never reached unit {point} when run again: it made "
                            f"{crashed.effects.units} units, the uninterrupted run {total}"
                        )
                    agent = crashed.agent if mode == "same" else await build()
                    gc.collect()  # the dead execution's frames and histories are garbage, as in a dead worker
                    replay = await runner.execute(agent, JournalEffects(crashed.effects.entries), run_key)
                    assert replay.result is not None
                    context = f"replay after a crash at unit {point} (with the {mode} agent)"
                    _compare_requests(reference.effects.requests, replay.effects.requests, context, stack)
                    if _history_bytes(replay.result) != reference_history:
                        got = _history_bytes(replay.result)
                        position = _first_difference(reference_history, got)
                        raise AssertionError(
                            f"{context}: the final history differs from the uninterrupted run's at byte "
                            f"{position}\n  uninterrupted: ...{_around(reference_history, position)}...\n"
                            f"  replayed:      ...{_around(got, position)}..."
                        )
                    if store is not None and reference_stored is not None:
                        _compare_stored(reference_stored, _stored(store, session_id), context)
            return total
        finally:
            for opened in (store, reference_store):
                if opened is not None:
                    if opened is store:
                        opened.delete(session_id)
                    opened.close()
