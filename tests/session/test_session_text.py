"""What a session file keeps: any text (lone surrogates too), non-finite floats, usage extras."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import Agent
from harness.core import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart, Usage, UserPromptPart
from harness.errors import SessionSaveError
from harness.models.function import FunctionModel
from harness.session import Session
from harness.wire import dump_messages, load_messages

NON_UTF8_NAME = os.fsdecode(b"caf\xe9")  # "caf\udce9": what os.listdir gives for a Latin-1 file name

# Lone surrogates included (st.text with a union of character strategies would drop them).
any_text = st.lists(st.characters(exclude_categories=()) | st.characters(categories=["Cs"]), max_size=12).map(
    "".join
)


def as_json_reads_it(text: str) -> str:
    """``text`` with each adjacent high + low surrogate pair read as the one character it encodes."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _tool_step(*calls: ToolCallPart, answer: str) -> FunctionModel:
    def respond(messages: list[CanonicalMessage], _info: object) -> CanonicalMessage | str:
        if len(messages) == 1:
            return CanonicalMessage.response(*calls)
        return answer

    return FunctionModel(respond)


def test_a_run_whose_tool_lists_a_non_utf8_file_name_is_saved_and_loads_identical(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    os.close(os.open(tmp_path / "work" / os.fsencode(b"caf\xe9").decode("latin-1"), os.O_CREAT | os.O_WRONLY))

    def list_dir() -> list[str]:
        """List the files of the project."""
        return [NON_UTF8_NAME, "café.txt"]

    session = Session.create(tmp_path)
    agent = Agent(
        _tool_step(
            ToolCallPart(tool_call_id="c1", tool_name="list_dir", args={}), answer=f"found {NON_UTF8_NAME}"
        ),
        tools=[list_dir],
    )
    result = agent.run_sync("what is there?", session=session)
    assert result.output == "found caf\udce9"
    assert session.path is not None
    raw = session.path.read_bytes()
    raw.decode("utf-8")  # strict: the file is valid UTF-8
    assert "café.txt".encode() in raw  # other non-ASCII text stays readable
    assert b"caf\\udce9" in raw
    loaded = Session.load(session.path)
    assert loaded.messages == session.messages
    returns = [p for m in loaded.messages for p in m.parts if isinstance(p, ToolReturnPart)]
    assert returns[0].content == [NON_UTF8_NAME, "café.txt"]
    assert os.fsencode(returns[0].content[0]) == b"caf\xe9"


def test_a_file_holding_an_escaped_lone_surrogate_loads_and_saves_again(tmp_path: Path) -> None:
    session = Session.create(tmp_path, working_directory="/home/u/caf\udce9")
    session.messages = [CanonicalMessage.user("hi")]
    session.save()
    assert session.path is not None
    doc = json.loads(session.path.read_bytes())
    doc["messages"][0]["parts"][0]["content"] = "\ud800 alone"
    doc["thoughts"] = ["thought \udfff"]
    session.path.write_text(json.dumps(doc))  # ensure_ascii: written as \ud800 escapes
    loaded = Session.load(session.path)
    assert loaded.messages == [CanonicalMessage.user("\ud800 alone")]
    loaded.save()
    again = Session.load(session.path)
    assert again.messages == [CanonicalMessage.user("\ud800 alone")]
    assert again.thoughts == ["thought \udfff"]
    assert again.working_directory == "/home/u/caf\udce9"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=any_text)
def test_any_text_in_any_field_round_trips(tmp_path: Path, text: str) -> None:
    session = Session.new(working_directory=text, current_model=text, thoughts=[text])
    session.usage = Usage(1, 2, extra={text: text})
    session.messages = [
        CanonicalMessage.request(UserPromptPart(text)),
        CanonicalMessage.response(
            TextPart(text), ToolCallPart(tool_call_id="c1", tool_name="t", args={text: [text]})
        ),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="c1", tool_name="t", content={"out": text}, metadata={"m": text})
        ),
    ]
    path = session.save(tmp_path / "s.json")
    path.read_bytes().decode("utf-8")
    loaded = Session.load(path)
    read = as_json_reads_it(text)
    assert loaded.working_directory == read
    assert loaded.current_model == read
    assert loaded.thoughts == [read]
    assert loaded.usage == Usage(1, 2, extra={read: read})
    assert loaded.messages == load_messages(dump_messages(session.messages))
    assert loaded.messages[1].parts[0] == TextPart(read)


def test_non_finite_floats_in_tool_results_are_stored_as_null_as_the_wire_format_does(tmp_path: Path) -> None:
    def stats() -> dict[str, float]:
        """Column statistics."""
        return {"mean": math.nan, "max": math.inf, "min": -math.inf, "n": 3.0}

    session = Session.create(tmp_path)
    Agent(
        _tool_step(ToolCallPart(tool_call_id="c1", tool_name="stats", args={}), answer="ok"), tools=[stats]
    ).run_sync("go", session=session)
    assert session.path is not None
    raw = session.path.read_bytes()
    json.loads(raw, parse_constant=lambda name: pytest.fail(f"{name} written"))
    loaded = Session.load(session.path)
    returns = [p for m in loaded.messages for p in m.parts if isinstance(p, ToolReturnPart)]
    assert returns[0].content == {"mean": None, "max": None, "min": None, "n": 3.0}
    wire = json.loads(dump_messages(session.messages))  # the same policy, byte for byte
    assert wire == json.loads(raw)["messages"]


def test_an_old_file_holding_nan_tokens_loads_and_saves(tmp_path: Path) -> None:
    session = Session.create(tmp_path)
    session.messages = [
        CanonicalMessage.request(ToolReturnPart(tool_call_id="c1", tool_name="stats", content={"mean": 1.0}))
    ]
    session.save()
    assert session.path is not None
    text = session.path.read_text().replace('"mean": 1.0', '"mean": NaN')
    assert '"mean": NaN' in text
    session.path.write_text(text)
    loaded = Session.load(session.path)
    (part,) = loaded.messages[0].parts
    assert isinstance(part, ToolReturnPart)
    assert part.content == {"mean": None}
    loaded.save()
    assert b"NaN" not in session.path.read_bytes()


def test_a_value_json_cannot_hold_is_a_located_save_error_and_writes_nothing(tmp_path: Path) -> None:
    session = Session.create(tmp_path)
    session.messages = [
        CanonicalMessage.user("hi"),
        CanonicalMessage.response(ToolCallPart(tool_call_id="c1", tool_name="t", args={})),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="c1", tool_name="t", content={"handle": object(), "x": math.nan})
        ),
    ]
    with pytest.raises(SessionSaveError, match=r"message 2, part 0, field 'content'.*object is not JSON"):
        session.save()
    assert session.path is not None
    assert not session.path.exists()


def _priced(cost: float, **fields: Any) -> FunctionModel:
    def respond(_messages: list[CanonicalMessage], _info: object) -> CanonicalMessage:
        return CanonicalMessage.response(TextPart("ok"), usage=Usage(10, 2, extra={"cost": cost, **fields}))

    return FunctionModel(respond)


@pytest.mark.parametrize("version", [1, 2])
def test_usage_extras_of_a_loaded_file_survive_runs(tmp_path: Path, version: int) -> None:
    session = Session.create(tmp_path)
    session.save()
    assert session.path is not None
    doc = json.loads(session.path.read_bytes())
    doc["version"] = version
    doc["session_total_usage"] = (
        {"prompt_tokens": 100, "completion_tokens": 20, "cached_tokens": 0, "cost": 0.5, "currency": "USD"}
        if version == 1
        else {"request_tokens": 100, "response_tokens": 20, "cost": 0.5, "currency": "USD"}
    )
    session.path.write_text(json.dumps(doc))
    loaded = Session.load(session.path)
    Agent(FunctionModel.from_responses("a")).run_sync("one", session=loaded)  # a run reporting no cost
    assert loaded.usage.extra == {"cost": 0.5, "currency": "USD"}
    Agent(_priced(0.25, currency="EUR")).run_sync("two", session=loaded)
    assert loaded.usage.extra == {"cost": 0.75, "currency": "EUR"}
    written = json.loads(session.path.read_bytes())["session_total_usage"]
    assert written["cost"] == 0.75
    assert written["currency"] == "EUR"
    assert Session.load(session.path).usage == loaded.usage


def test_harness_compact_writes_sessions_through_the_same_encoder(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from harness.cli import cli

    messages = [CanonicalMessage.user(f"list {NON_UTF8_NAME}")]
    for turn in range(6):
        messages.append(
            CanonicalMessage.response(ToolCallPart(tool_call_id=f"c{turn}", tool_name="ls", args={}))
        )
        messages.append(
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=f"c{turn}", tool_name="ls", content=[NON_UTF8_NAME, math.nan])
            )
        )
    messages.append(CanonicalMessage.response(TextPart("done")))
    session = Session.new(messages=messages, working_directory=f"/src/{NON_UTF8_NAME}")
    path = session.save(tmp_path / "session.json")
    assert path.read_bytes() == session.to_bytes()
    out = tmp_path / "compacted.json"
    stack = "sliding_window:max_messages=6,keep_messages=4"
    result = CliRunner().invoke(cli, ["compact", str(path), "--stack", stack, "--out", str(out)])
    assert result.exit_code == 0, result.output
    out.read_bytes().decode("utf-8")
    reloaded = Session.load(out)
    assert reloaded.working_directory == f"/src/{NON_UTF8_NAME}"
    returns = [p for m in reloaded.messages for p in m.parts if isinstance(p, ToolReturnPart)]
    assert returns
    assert all(p.content == [NON_UTF8_NAME, None] for p in returns)
