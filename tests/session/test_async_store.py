"""The async store seam: checkpoints awaited off the event loop, in order, and never abandoned half way."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from harness import CanonicalMessage, TextPart
from harness.errors import SessionStoreError
from harness.session import (
    Checkpoint,
    Session,
    SessionStore,
    ThreadedStore,
    async_store,
    finish_shielded,
    is_async_store,
)
from harness.session.delegating import DelegatingStore
from harness.stores import SqliteStore


class SlowStore(DelegatingStore):
    """A real SQLite store whose commits take ``delay`` seconds and note the thread they ran on."""

    def __init__(self, inner: SessionStore, delay: float = 0.0) -> None:
        super().__init__(inner)
        self.delay = delay
        self.threads: list[int] = []

    def commit(self, checkpoint: Checkpoint) -> int:
        self.threads.append(threading.get_ident())
        time.sleep(self.delay)
        return self.inner.commit(checkpoint)


def sqlite(tmp_path: Path, delay: float = 0.0) -> SlowStore:
    return SlowStore(SqliteStore(tmp_path / "sessions.db"), delay)


async def test_a_checkpoint_is_written_on_the_stores_thread_not_the_event_loops(tmp_path: Path) -> None:
    store = sqlite(tmp_path)
    session = Session.create(store=store, messages=[CanonicalMessage.user("hi")])
    assert await session.acheckpoint() == 1
    assert store.threads
    assert store.threads[0] != threading.get_ident()
    assert await session.acheckpoint() == 1  # nothing changed: nothing written
    assert len(store.threads) == 1
    session.messages.append(CanonicalMessage.response(TextPart("hello")))
    assert await session.acheckpoint() == 2
    reopened = await Session.aopen(store, session.session_id)
    assert [m.kind for m in reopened.messages] == ["request", "response"]
    assert reopened.revision == 2
    store.close()


async def test_the_adapter_of_a_store_is_the_same_object_every_time(tmp_path: Path) -> None:
    store = sqlite(tmp_path)
    adapter = async_store(store)
    assert isinstance(adapter, ThreadedStore)
    assert async_store(store) is adapter
    assert async_store(adapter) is adapter
    assert is_async_store(adapter)
    assert not is_async_store(store)
    with pytest.raises(TypeError, match="not a session store"):
        async_store(object())  # type: ignore[arg-type]
    await adapter.aclose()


async def test_checkpoints_asked_for_at_once_are_written_one_at_a_time_in_order(tmp_path: Path) -> None:
    store = sqlite(tmp_path, delay=0.02)
    session = Session.create(store=store, messages=[CanonicalMessage.user("0")])
    await session.acheckpoint()

    async def step(n: int) -> int:
        session.messages.append(CanonicalMessage.user(str(n)))
        return await session.acheckpoint()

    revisions = await asyncio.gather(*(step(n) for n in range(1, 6)))
    assert sorted(revisions) == revisions  # in the order asked, no conflict with itself
    assert session.revision == store.head(session.session_id).revision
    stored = Session.open(store, session.session_id)
    assert [m.parts[0].content for m in stored.messages] == [str(n) for n in range(6)]  # type: ignore[union-attr]
    store.close()


async def test_a_cancellation_during_a_write_waits_for_the_write_and_is_raised_after_it(
    tmp_path: Path,
) -> None:
    store = sqlite(tmp_path, delay=0.3)
    session = Session.create(store=store, messages=[CanonicalMessage.user("hi")])
    task = asyncio.create_task(session.acheckpoint())
    await asyncio.sleep(0.05)  # the commit is running on the store's thread
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert session.revision == 1 == store.head(session.session_id).revision  # the session knows what landed
    session.messages.append(CanonicalMessage.response(TextPart("hello")))
    assert await session.acheckpoint() == 2  # no conflict with its own earlier write
    store.close()


async def test_finish_shielded_runs_the_callback_before_raising_the_cancellation() -> None:
    done: list[int] = []

    async def write() -> int:
        await asyncio.sleep(0.1)
        return 7

    task = asyncio.create_task(finish_shielded(write(), done.append))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert done == [7]
    assert await finish_shielded(write()) == 7


async def test_synchronous_calls_on_an_async_only_store_say_what_to_await_instead(tmp_path: Path) -> None:
    adapter = ThreadedStore(SqliteStore(tmp_path / "s.db"))
    session = Session.create(store=adapter, messages=[CanonicalMessage.user("hi")])
    with pytest.raises(SessionStoreError, match=r"await session.acheckpoint\(\)"):
        session.checkpoint()
    await session.acheckpoint()
    with pytest.raises(SessionStoreError, match=r"await Session.aopen"):
        Session.open(adapter, session.session_id)  # type: ignore[arg-type]
    with pytest.raises(SessionStoreError, match=r"await session.atranscript\(\)"):
        session.transcript()
    assert [m.kind for m in await session.atranscript()] == ["request"]
    with pytest.raises(SessionStoreError, match=r"await session.afork\(\)"):
        session.fork()
    copy = await session.afork("copy")
    assert copy.session_id == "copy"
    assert copy.forked_from == session.session_id
    await adapter.aclose()


def test_max_threads_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_threads"):
        ThreadedStore(SqliteStore(tmp_path / "s.db"), max_threads=0)
