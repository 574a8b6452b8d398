"""ReplaySafeStore: a replayed run skips the commits an earlier execution applied, then goes live."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import pytest

from harness import open_store
from harness.core.effects import InProcessEffects, ToolCallUnit, ToolOutcome
from harness.core.messages import CanonicalMessage, TextPart, ToolReturnPart, UserPromptPart, harness_mark
from harness.durable import DURABLE_MARK, ReplaySafeStore, snapshot_session
from harness.durable.resume import OUTCOME_UNKNOWN_CONTENT
from harness.errors import SessionConflictError, SessionStoreError
from harness.run import Agent, RunResult
from harness.session import Session, SessionStore
from harness.session.delegating import DelegatingStore
from harness.session.records import Checkpoint
from harness.testing import scripted_model, tool_call
from harness.tools.tool import Tool

FIXED = datetime(2031, 2, 3, 4, 5, 6, tzinfo=UTC)
SESSION = "5e55" * 8
RUN = "workflow-7"


class Crash(BaseException):
    """The worker died (no ``except Exception`` catches it)."""


class Deterministic(InProcessEffects):
    """A fixed clock and counted ids: two executions of one run make the same commits."""

    def __init__(self, replay: ReplaySafeStore | None = None) -> None:
        self.count = 0
        self.replay = replay
        self.started_seen: dict[str, bool] = {}

    def now(self) -> datetime:
        return FIXED

    def new_id(self) -> str:
        self.count += 1
        return f"{self.count:032x}"

    async def model_request(self, unit: Any) -> CanonicalMessage:
        return (await super().model_request(unit)).replace(timestamp=None)

    async def tool_call(self, unit: ToolCallUnit) -> ToolOutcome:
        if self.replay is not None:
            self.started_seen[unit.call.tool_call_id] = self.replay.started_before(unit.call.tool_call_id)
        return await super().tool_call(unit)


class Dying(DelegatingStore):
    """A store whose worker can die: once dead, every commit fails (nothing more is written)."""

    def __init__(self, inner: SessionStore) -> None:
        super().__init__(inner)
        self.dead = False

    def commit(self, checkpoint: Checkpoint) -> int:
        if self.dead:
            raise SessionStoreError(self.url, "the worker is dead")
        return super().commit(checkpoint)


class Tools:
    """The run's tools; ``crash_at`` kills the worker while that call runs."""

    def __init__(self, dying: Dying | None = None, crash_at: int | None = None) -> None:
        self.dying = dying
        self.crash_at = crash_at
        self.ran: list[int] = []
        self.marks: list[Any] = []
        self.store: SessionStore | None = None

    def probe(self, n: int) -> str:
        """Return a numbered result.

        Args:
            n: The number.
        """
        self.ran.append(n)
        if self.store is not None:
            self.marks.append(self.store.head(SESSION).metadata.get(DURABLE_MARK))
        if n == self.crash_at:
            if self.dying is not None:
                self.dying.dead = True
            raise Crash(f"killed while call {n} ran")
        return f"result {n}"


def agent_for(tools: Tools, *, idempotent: bool = True) -> Agent:
    model = scripted_model(*[tool_call("probe", {"n": n}) for n in range(1, 5)], "all done")
    return Agent(model, tools=[Tool.from_function(tools.probe, name="probe", idempotent=idempotent)])


def open_at(path: Path) -> SessionStore:
    return open_store(f"sqlite:///{path}")


def seed(store: SessionStore) -> None:
    """The session as it was before the run: one earlier exchange, written by a plain writer."""
    session = Session.create(
        store=store,
        session_id=SESSION,
        project_id="proj",
        working_directory="/work",
        created_at=FIXED,
        last_modified=FIXED,
    )
    session.messages = [_prompt("earlier question"), _answer("earlier answer")]
    session.checkpoint()


def _prompt(text: str) -> CanonicalMessage:
    return CanonicalMessage.request(UserPromptPart(text, timestamp=FIXED))


def _answer(text: str) -> CanonicalMessage:
    return CanonicalMessage.response(TextPart(text), timestamp=FIXED, model_name="scripted")


def stored_state(store: SessionStore) -> tuple[Any, ...]:
    """Everything the store holds for the session, but the head's wall-clock ``last_modified``."""
    loaded = store.load(SESSION)
    head = attrs.asdict(loaded.head)
    del head["last_modified"]
    view = [(entry.seq, entry.body, entry.source, body) for entry, body in loaded.view]
    log = [(e.seq, e.body) for e in store.read_log(SESSION)]
    return head, view, loaded.thoughts, loaded.ledger, log, len(store.edits(SESSION))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    opened = open_at(tmp_path / "sessions.db")
    yield opened
    opened.close()


@pytest.fixture
def reference(tmp_path: Path) -> Iterator[SessionStore]:
    """Another store where the same run ran once, uninterrupted."""
    opened = open_at(tmp_path / "reference.db")
    yield opened
    opened.close()


async def run_once(
    store: SessionStore, snapshot: str | None, tools: Tools, *, idempotent: bool = True
) -> tuple[ReplaySafeStore, RunResult, Deterministic]:
    replay = ReplaySafeStore(store, RUN)
    if snapshot is None:
        session = replay.new_session(
            session_id=SESSION,
            project_id="proj",
            working_directory="/work",
            created_at=FIXED,
            last_modified=FIXED,
        )
    else:
        session = replay.session_from_snapshot(snapshot)
    effects = Deterministic(replay)
    result = await agent_for(tools, idempotent=idempotent).run("go", session, effects=effects)
    return replay, result, effects


# ---------------------------------------------------------------- a whole replay skips everything


@pytest.mark.parametrize("earlier", [True, False], ids=["earlier-history", "new-session"])
async def test_a_replayed_run_skips_every_commit_and_leaves_the_store_byte_identical(
    store: SessionStore, earlier: bool
) -> None:
    if earlier:
        seed(store)
    snapshot = snapshot_session(store, SESSION)
    assert (snapshot is None) is not earlier
    tools = Tools()
    tools.store = store
    first, done, _ = await run_once(store, snapshot, tools)
    assert done.output == "all done"
    assert first.commits > 0
    assert first.skipped == 0
    assert first.live
    head = store.head(SESSION)
    assert head.metadata[DURABLE_MARK] == {"run": RUN, "commit": first.commits}
    # every commit was marked, in order: what each tool saw in the head while it ran
    numbers = [mark["commit"] for mark in tools.marks]
    assert all(mark["run"] == RUN for mark in tools.marks)
    assert numbers == sorted(numbers)
    assert len(set(numbers)) == len(numbers) == 4
    loaded, log, edits = store.load(SESSION), store.read_log(SESSION), store.edits(SESSION)

    again_tools = Tools()
    second, replayed, _ = await run_once(store, snapshot, again_tools)
    assert second.commits == first.commits
    assert second.skipped == second.commits
    assert not second.live
    assert store.load(SESSION) == loaded
    assert store.read_log(SESSION) == log
    assert store.edits(SESSION) == edits
    assert replayed.all_messages == done.all_messages
    assert replayed.output == done.output
    assert again_tools.ran == [1, 2, 3, 4]  # these effects ran live: only the commits were skipped


async def test_another_run_key_is_not_taken_for_this_run(store: SessionStore) -> None:
    seed(store)
    snapshot = snapshot_session(store, SESSION)
    await run_once(store, snapshot, Tools())
    other = ReplaySafeStore(store, "another-workflow")
    session = other.session_from_snapshot(snapshot or "")
    with pytest.raises(SessionConflictError):
        await agent_for(Tools()).run("go", session, effects=Deterministic())
    assert other.skipped == 0


# ---------------------------------------------------------------- a crash, then the replay


async def test_a_crashed_run_replayed_skips_its_prefix_then_goes_live_to_the_uninterrupted_result(
    store: SessionStore, reference: SessionStore
) -> None:
    seed(reference)
    snapshot_ref = snapshot_session(reference, SESSION)
    _, uninterrupted, _ = await run_once(reference, snapshot_ref, Tools())

    seed(store)
    snapshot = snapshot_session(store, SESSION)
    assert snapshot is not None
    dying = Dying(store)
    crashing = Tools(dying, crash_at=3)
    crashed = ReplaySafeStore(dying, RUN)
    with pytest.raises(Crash):
        await agent_for(crashing).run(
            "go", crashed.session_from_snapshot(snapshot), effects=Deterministic(crashed)
        )
    assert crashing.ran == [1, 2, 3]
    applied = store.head(SESSION).metadata[DURABLE_MARK]["commit"]
    assert 0 < applied < crashed.commits  # the recovery's commit after the crash was never written

    tools = Tools()
    replay, result, effects = await run_once(store, snapshot, tools)
    assert replay.skipped == applied
    assert 0 < replay.skipped < replay.commits
    assert replay.live
    assert tools.ran == [1, 2, 3, 4]
    assert result.all_messages == uninterrupted.all_messages
    assert stored_state(store) == stored_state(reference)
    # the earlier execution had recorded calls 1 to 3 as started, not call 4
    assert effects.started_seen == {
        "scripted_1": True,
        "scripted_2": True,
        "scripted_3": True,
        "scripted_4": False,
    }
    assert replay.started_before("scripted_3")
    assert not replay.started_before("scripted_4")
    assert not replay.started_before("never-called")


async def test_a_non_idempotent_call_found_started_is_answered_unknown_instead_of_run_again(
    store: SessionStore,
) -> None:
    journal: dict[str, dict[str, Any]] = {}  # the outcomes the first execution journaled

    class Journaling(Deterministic):
        async def tool_call(self, unit: ToolCallUnit) -> ToolOutcome:
            outcome = await super().tool_call(unit)
            journal[unit.call.tool_call_id] = outcome.to_json()
            return outcome

    class Engine(Deterministic):
        async def tool_call(self, unit: ToolCallUnit) -> ToolOutcome:
            assert self.replay is not None
            recorded = journal.get(unit.call.tool_call_id)
            if recorded is not None:
                return ToolOutcome.from_json(recorded)
            if not unit.idempotent and self.replay.started_before(unit.call.tool_call_id):
                answered.append(unit.call.tool_call_id)
                return ToolOutcome("unknown")
            return await super().tool_call(unit)

    answered: list[str] = []
    seed(store)
    snapshot = snapshot_session(store, SESSION)
    assert snapshot is not None
    dying = Dying(store)
    crashing = Tools(dying, crash_at=2)
    crashed = ReplaySafeStore(dying, RUN)
    with pytest.raises(Crash):
        await agent_for(crashing, idempotent=False).run(
            "go", crashed.session_from_snapshot(snapshot), effects=Journaling(crashed)
        )
    assert list(journal) == ["scripted_1"]  # call 2 died before its outcome was journaled
    replay = ReplaySafeStore(store, RUN)
    tools = Tools()
    result = await agent_for(tools, idempotent=False).run(
        "go", replay.session_from_snapshot(snapshot), effects=Engine(replay)
    )
    assert answered == ["scripted_2"]  # started before, never finished: not run again
    assert tools.ran == [3, 4]
    returns = {
        p.tool_call_id: p for m in result.all_messages for p in m.parts if isinstance(p, ToolReturnPart)
    }
    assert returns["scripted_1"].content == "result 1"
    assert returns["scripted_2"].content == OUTCOME_UNKNOWN_CONTENT
    mark = harness_mark(returns["scripted_2"])
    assert mark is not None
    assert mark.get("outcome_unknown") is True
    assert returns["scripted_3"].content == "result 3"
    assert replay.skipped > 0
    assert replay.live


async def test_another_writer_between_the_executions_is_a_conflict(store: SessionStore) -> None:
    seed(store)
    snapshot = snapshot_session(store, SESSION)
    assert snapshot is not None
    dying = Dying(store)
    crashed = ReplaySafeStore(dying, RUN)
    with pytest.raises(Crash):
        await agent_for(Tools(dying, crash_at=3)).run(
            "go", crashed.session_from_snapshot(snapshot), effects=Deterministic(crashed)
        )
    other = Session.open(store, SESSION)  # a plain writer continues the session meanwhile
    other.messages = [*other.messages, _answer("someone else wrote this")]
    other.checkpoint()
    written = store.load(SESSION)

    replay = ReplaySafeStore(store, RUN)
    with pytest.raises(SessionConflictError):
        await agent_for(Tools()).run("go", replay.session_from_snapshot(snapshot), effects=Deterministic())
    assert store.load(SESSION) == written  # nothing of the replay was written over it


# ---------------------------------------------------------------- snapshots


def test_a_snapshot_of_a_missing_session_is_none(store: SessionStore) -> None:
    assert snapshot_session(store, "no-such-session") is None


def test_a_snapshot_gives_back_the_session_as_it_was(store: SessionStore) -> None:
    seed(store)
    snapshot = snapshot_session(store, SESSION)
    assert snapshot is not None
    json.loads(snapshot)  # one JSON text
    opened = Session.open(store, SESSION)
    later = Session.open(store, SESSION)
    later.messages = [*later.messages, _prompt("after the snapshot")]
    later.checkpoint()
    replay = ReplaySafeStore(store, RUN)
    restored = replay.session_from_snapshot(snapshot)
    assert restored.store is replay
    assert restored.messages == opened.messages
    assert restored.revision == opened.revision < later.revision
    assert restored.ledger == opened.ledger
    assert restored.created_at == opened.created_at
    assert restored.metadata == opened.metadata
    from_stored = Session.from_stored(store, store.load(SESSION), edits=len(store.edits(SESSION)))
    assert from_stored.messages == later.messages
    assert from_stored.revision == later.revision


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("not json", id="not-json"),
        pytest.param("[]", id="a-list"),
        pytest.param('{"version": 2}', id="another-version"),
        pytest.param('{"version": 1}', id="no-fields"),
        pytest.param(
            '{"version": 1, "head": [], "view": [], "thoughts": [], "ledger": [], "edits": 0}', id="bad-head"
        ),
    ],
)
def test_an_invalid_snapshot_is_a_store_error_naming_its_source(store: SessionStore, text: str) -> None:
    replay = ReplaySafeStore(store, RUN)
    with pytest.raises(SessionStoreError, match="the session snapshot in the workflow input is not valid"):
        replay.session_from_snapshot(text, source="the workflow input")
    with pytest.raises(SessionStoreError, match="in the run's journal"):
        replay.session_from_snapshot(text)


def test_a_snapshot_with_a_damaged_view_is_a_store_error(store: SessionStore) -> None:
    seed(store)
    snapshot = snapshot_session(store, SESSION)
    assert snapshot is not None
    data = json.loads(snapshot)
    data["view"] = [["one", "two"]]
    with pytest.raises(SessionStoreError, match="journal entry 3"):
        ReplaySafeStore(store, RUN).session_from_snapshot(json.dumps(data), source="journal entry 3")


def test_new_session_refuses_a_taken_id_unless_this_run_created_it(store: SessionStore) -> None:
    seed(store)  # a plain writer's session
    with pytest.raises(SessionConflictError, match="already exists"):
        ReplaySafeStore(store, RUN).new_session(session_id=SESSION)
    first = ReplaySafeStore(store, RUN).new_session(session_id="mine", project_id="proj")
    first.messages = [_prompt("question")]
    first.checkpoint()
    again = ReplaySafeStore(store, RUN).new_session(session_id="mine", project_id="proj")  # a replay
    assert again.session_id == "mine"
    with pytest.raises(SessionConflictError):
        ReplaySafeStore(store, "another-run").new_session(session_id="mine")
