"""New session ids follow one rule, in ``Session.create`` as in the CLI; a taken id fails at create."""

from __future__ import annotations

import asyncio
import pickle
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import Agent
from harness.cli import cli
from harness.errors import SessionConflictError, SessionIdError
from harness.models.test import TestModel
from harness.session import Session, ThreadedStore
from harness.session.ids import SESSION_ID_PATTERN, check_session_id
from harness.stores import open_store

BAD_IDS = {
    "": "it is empty",
    "../evil": "path separator",
    "a/b": "path separator",
    "a\\b": "path separator",
    "x\x00y": "control character",
    "tab\there": "control character",
    "x" * 5000: "5000 characters long",
    "..": "starts with '.'",
    ".hidden": "starts with '.'",
    "héllo": "holds 'é'",
    "a b": "holds ' '",
    "-flag": "does not start with a letter or a digit",
}


@pytest.mark.parametrize("bad", sorted(BAD_IDS), ids=repr)
def test_create_in_a_store_refuses_a_bad_id_before_anything_is_written(tmp_path: Path, bad: str) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = open_store(url)
    try:
        with pytest.raises(SessionIdError, match="use 1-64 letters") as caught:
            Session.create(store=store, session_id=bad)
        assert BAD_IDS[bad] in caught.value.reason
        message = str(caught.value)
        assert "\n" not in message
        assert len(message) < 300  # a 5,000-character id is shortened, not echoed
        assert caught.value.session_id == bad
        assert store.list_sessions() == []
    finally:
        store.close()


@pytest.mark.parametrize("bad", ["", "../evil", "x\x00y", "x" * 5000])
def test_create_as_a_file_refuses_a_bad_id(tmp_path: Path, bad: str) -> None:
    with pytest.raises(SessionIdError):
        Session.create(tmp_path, session_id=bad)
    assert list(tmp_path.iterdir()) == []


def test_a_taken_id_fails_at_create_not_inside_the_run(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    try:
        first = Session.create(store=store, session_id="release")
        Agent(TestModel(final_text="one")).run_sync("hi", session=first)
        with pytest.raises(SessionConflictError, match="already exists") as caught:
            Session.create(store=store, session_id="release")
        assert caught.value.session_id == "release"
        assert caught.value.actual == first.revision
        assert Session.open(store, "release").revision == first.revision  # nothing was changed
    finally:
        store.close()


def test_acreate_checks_the_id_against_an_async_store(tmp_path: Path) -> None:
    async def main() -> None:
        store = ThreadedStore(open_store(f"sqlite:///{tmp_path / 's.db'}"))
        session = await Session.acreate(store=store, session_id="notes")
        await Agent(TestModel()).run("hi", session=session)
        with pytest.raises(SessionConflictError):
            await Session.acreate(store=store, session_id="notes")
        with pytest.raises(SessionIdError):
            await Session.acreate(store=store, session_id="../notes")
        store.close()

    asyncio.run(main())


def test_fork_refuses_a_bad_new_id(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    try:
        session = Session.create(store=store)
        Agent(TestModel()).run_sync("hi", session=session)
        with pytest.raises(SessionIdError, match="path separator"):
            session.fork("../copy")
        assert [h.session_id for h in store.list_sessions()] == [session.session_id]
    finally:
        store.close()


def test_the_default_id_and_ordinary_names_pass() -> None:
    assert SESSION_ID_PATTERN.fullmatch(Session().session_id)
    for good in ("release", "review-b", "a.b_c-1", "X" * 64):
        assert check_session_id(good) == good


def test_the_cli_applies_the_same_rule(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    session = Session.create(store=store, session_id="base")
    Agent(TestModel()).run_sync("hi", session=session)
    store.close()
    result = CliRunner().invoke(
        cli, ["sessions", "--store", f"sqlite:///{tmp_path / 's.db'}", "fork", "base", "--as", "../evil"]
    )
    assert result.exit_code == 2
    assert "it holds a path separator; use 1-64 letters" in result.output


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_an_id_is_accepted_exactly_when_it_matches_the_pattern(value: str) -> None:
    if SESSION_ID_PATTERN.fullmatch(value) is not None:
        assert check_session_id(value) == value
    else:
        with pytest.raises(SessionIdError, match=r"starting with a letter or digit$"):
            check_session_id(value)


def test_session_id_error_round_trips_through_pickle() -> None:
    error = SessionIdError("../evil", "it holds a path separator")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is SessionIdError
    assert (copy.session_id, copy.reason, str(copy)) == (error.session_id, error.reason, str(error))


def test_acreate_refuses_an_id_taken_through_the_sync_api_and_changes_nothing(tmp_path: Path) -> None:
    sync = open_store(f"sqlite:///{tmp_path / 's.db'}")
    first = Session.create(store=sync, session_id="shared")
    Agent(TestModel(final_text="one")).run_sync("hi", session=first)

    async def main() -> None:
        for store in (sync, ThreadedStore(sync)):  # a sync store is read off the loop as well
            with pytest.raises(SessionConflictError, match="already exists") as caught:
                await Session.acreate(store=store, session_id="shared")
            assert caught.value.actual == first.revision

    try:
        asyncio.run(main())
        assert [(h.session_id, h.revision) for h in sync.list_sessions()] == [("shared", first.revision)]
    finally:
        sync.close()
