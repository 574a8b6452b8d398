"""An Agent run on a session stored in PostgreSQL: checkpointed at every step, resumable elsewhere."""

from __future__ import annotations

from harness_postgres import PostgresStore

from harness import Agent, Session
from harness.testing import scripted_model, tool_call


def lookup(word: str) -> str:
    """Look a word up."""
    return f"{word}: a large flightless bird"


def test_a_run_checkpoints_every_step_and_reopens_anywhere(pg_dsn: str, pg_schema: str) -> None:
    store = PostgresStore(pg_dsn, schema=pg_schema)
    model = scripted_model(tool_call("lookup", {"word": "emu"}, tool_call_id="call_1"), "An emu is a bird.")
    agent = Agent(model, tools=[lookup])
    session = Session.create(store=store)
    result = agent.run_sync("what is an emu?", session=session)
    store.close()

    other = PostgresStore(pg_dsn, schema=pg_schema)
    try:
        head = other.head(session.session_id)
        assert (
            head.revision >= 4
        )  # prompt, response, tool start/finish, tool result, answer: not one save at the end
        reopened = Session.open(other, session.session_id)
        assert reopened.messages == result.all_messages
        assert reopened.transcript() == result.all_messages  # no capability: the log is the view
        assert [e.seq for e in other.read_log(session.session_id)] == list(range(len(result.all_messages)))
        assert reopened.ledger["call_1"].status == "completed"
        assert reopened.usage == session.usage
        assert [h.seq for h in other.search("flightless", session_id=session.session_id)] == [2]

        follow_up = Agent(scripted_model("Yes, it cannot fly."), tools=[lookup])
        again = follow_up.run_sync("can it fly?", session=reopened)
        assert again.all_messages[: len(result.all_messages)] == result.all_messages
        assert other.head(session.session_id).revision > head.revision
        assert Session.open(other, session.session_id).messages == again.all_messages
    finally:
        other.close()
