"""Compatibility of harness.wire with pydantic-ai's ``ModelMessagesTypeAdapter`` (both directions)."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pydantic_ai")

from pydantic_ai import messages as pai
from pydantic_ai.usage import RequestUsage

from harness.core import (
    CanonicalMessage,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    Usage,
    UserPromptPart,
)
from harness.wire import dump_messages, load_messages

ADAPTER = pai.ModelMessagesTypeAdapter
STAMP = datetime(2025, 3, 4, 5, 6, 7, 890000, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _quiet_pydantic_ai_deprecations() -> Iterator[None]:
    # pydantic-ai 2.x deprecates RetryPromptPart and warns (with a UserWarning subclass) when one is built.
    with warnings.catch_warnings():
        _ignore_deprecations()
        yield


def _ignore_deprecations() -> None:
    warnings.simplefilter("ignore", DeprecationWarning)
    warnings.filterwarnings("ignore", message=r".*RetryPromptPart. is deprecated")


def _strip(value: Any, keys: frozenset[str]) -> Any:
    """Drop ``keys`` at every depth (pydantic-ai fills timestamps with "now" when absent)."""
    if isinstance(value, dict):
        return {k: _strip(v, keys) for k, v in value.items() if k not in keys}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list):
        return [_strip(v, keys) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return value


_VOLATILE = frozenset({"timestamp"})


def test_corpus_file_loads_in_pydantic_ai_after_our_dump(corpus_file: Path) -> None:
    raw = corpus_file.read_bytes()
    ours = dump_messages(load_messages(raw))
    theirs_from_ours = ADAPTER.validate_json(ours)
    theirs_from_raw = ADAPTER.validate_json(raw)
    original = json.loads(raw)
    assert len(theirs_from_ours) == len(original)
    assert [len(m.parts) for m in theirs_from_ours] == [len(m["parts"]) for m in original]
    assert [m.kind for m in theirs_from_ours] == [m["kind"] for m in original]
    assert _strip(json.loads(ADAPTER.dump_json(theirs_from_ours)), _VOLATILE) == _strip(
        json.loads(ADAPTER.dump_json(theirs_from_raw)), _VOLATILE
    )


def _pydantic_history() -> list[pai.ModelMessage]:
    return [
        pai.ModelRequest(
            parts=[
                pai.SystemPromptPart("be brief", timestamp=STAMP),
                pai.UserPromptPart(
                    ["look at this", pai.ImageUrl("https://example.com/a.png")],
                    timestamp=STAMP,
                ),
                pai.UserPromptPart("plain", timestamp=STAMP),
            ],
            timestamp=STAMP,
            instructions="be kind",
            run_id="run-1",
        ),
        pai.ModelResponse(
            parts=[
                pai.ThinkingPart("let me see", signature="sig==", provider_name="anthropic"),
                pai.TextPart("reading"),
                pai.ToolCallPart("read", '{"path": "a.py"}', "call-str"),
                pai.ToolCallPart("read", {"path": "b.py"}, "call-dict"),
                pai.ToolCallPart("read", {"path": "c.py"}, "call-retry"),
            ],
            usage=RequestUsage(
                input_tokens=120, output_tokens=30, cache_read_tokens=100, cache_write_tokens=5
            ),
            model_name="claude-test",
            timestamp=STAMP,
            provider_name="anthropic",
            provider_response_id="msg_1",
            finish_reason="tool_call",
        ),
        pai.ModelRequest(
            parts=[
                pai.ToolReturnPart("read", "print(1)", "call-str", timestamp=STAMP),
                pai.ToolReturnPart("read", {"lines": 3, "text": ["x"]}, "call-dict", timestamp=STAMP),
                pai.RetryPromptPart(  # pyright: ignore[reportDeprecated]
                    "no such file", tool_name="read", tool_call_id="call-retry", timestamp=STAMP
                ),
                pai.RetryPromptPart("answer in JSON", timestamp=STAMP),  # pyright: ignore[reportDeprecated]
            ],
            timestamp=STAMP,
        ),
        pai.ModelResponse(parts=[pai.TextPart("done")], timestamp=STAMP, model_name="claude-test"),
    ]


def test_pydantic_ai_dump_round_trips_through_us() -> None:
    original = _pydantic_history()
    theirs = ADAPTER.dump_json(original)
    loaded = load_messages(theirs)
    ours = dump_messages(loaded)
    assert json.loads(ours) == json.loads(theirs)
    assert ADAPTER.validate_json(ours) == ADAPTER.validate_json(theirs)
    reloaded = ADAPTER.validate_json(ours)
    # message 2 holds RetryPromptParts, which pydantic-ai translates when it validates
    assert [m for i, m in enumerate(reloaded) if i != 2] == [m for i, m in enumerate(original) if i != 2]
    assert [len(m.parts) for m in reloaded] == [len(m.parts) for m in original]


def test_pydantic_ai_dump_is_read_into_the_right_harness_parts() -> None:
    first, response, returns, last = load_messages(ADAPTER.dump_json(_pydantic_history()))
    system, image_prompt, plain = first.parts
    assert isinstance(system, SystemPromptPart)
    assert system.timestamp == STAMP
    assert isinstance(image_prompt, UserPromptPart)
    assert image_prompt.content[0] == "look at this"
    assert isinstance(image_prompt.content[1], dict)
    assert image_prompt.content[1]["kind"] == "image-url"
    assert isinstance(plain, UserPromptPart)
    assert plain.content == "plain"
    assert first.instructions == "be kind"
    assert first.run_id == "run-1"

    thinking, text, call_str, call_dict, _ = response.parts
    assert isinstance(thinking, ThoughtPart)
    assert thinking == ThoughtPart(
        "let me see", signature="sig==", provider_name="anthropic", extra=thinking.extra
    )
    assert isinstance(text, TextPart)
    assert text == TextPart("reading", extra=text.extra)
    assert isinstance(call_str, ToolCallPart)
    assert call_str.args == '{"path": "a.py"}'
    assert isinstance(call_dict, ToolCallPart)
    assert call_dict.args == {"path": "b.py"}
    assert response.usage == Usage(
        request_tokens=120,
        response_tokens=30,
        cached_tokens=100,
        cache_write_tokens=5,
        extra=response.usage.extra if response.usage else {},
    )
    assert response.model_name == "claude-test"
    assert response.provider_response_id == "msg_1"
    assert response.finish_reason == "tool_call"
    assert response.timestamp == STAMP

    ret_str, ret_dict, retry, retry_no_tool = returns.parts
    assert isinstance(ret_str, ToolReturnPart)
    assert (ret_str.tool_call_id, ret_str.tool_name, ret_str.content) == ("call-str", "read", "print(1)")
    assert isinstance(ret_dict, ToolReturnPart)
    assert ret_dict.content == {"lines": 3, "text": ["x"]}
    assert isinstance(retry, RetryPromptPart)
    assert retry.answers_tool_call
    assert retry.tool_call_id == "call-retry"
    assert isinstance(retry_no_tool, RetryPromptPart)
    assert not retry_no_tool.answers_tool_call
    assert last.parts == (TextPart("done", extra=last.parts[0].extra),)  # pyright: ignore[reportAttributeAccessIssue]


def test_our_history_loads_in_pydantic_ai_with_the_same_content() -> None:
    history = [
        CanonicalMessage.request(SystemPromptPart("sys"), UserPromptPart("hi")).replace(timestamp=STAMP),
        CanonicalMessage.response(
            ThoughtPart("hm", signature="s", provider_name="anthropic"),
            ToolCallPart(tool_call_id="c1", tool_name="read", args={"path": "a"}),
            ToolCallPart(tool_call_id="c2", tool_name="read", args='{"path": "b"}'),
        ).replace(usage=Usage(10, 2, 4, 1), model_name="m", timestamp=STAMP),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="c1", tool_name="read", content={"ok": True}, timestamp=STAMP),
            RetryPromptPart("try again", tool_name="read", tool_call_id="c2", timestamp=STAMP),
        ),
        CanonicalMessage.response(TextPart("done")).replace(timestamp=STAMP),
    ]
    theirs = ADAPTER.validate_json(dump_messages(history))
    assert [type(m).__name__ for m in theirs] == [
        "ModelRequest",
        "ModelResponse",
        "ModelRequest",
        "ModelResponse",
    ]
    assert [len(m.parts) for m in theirs] == [len(m.parts) for m in history]
    response = theirs[1]
    assert isinstance(response, pai.ModelResponse)
    assert response.usage == RequestUsage(
        input_tokens=10, output_tokens=2, cache_read_tokens=4, cache_write_tokens=1
    )
    thinking, call_dict, call_str = response.parts
    assert isinstance(thinking, pai.ThinkingPart)
    assert thinking.signature == "s"
    assert isinstance(call_dict, pai.ToolCallPart)
    assert call_dict.args == {"path": "a"}
    assert isinstance(call_str, pai.ToolCallPart)
    assert call_str.args == '{"path": "b"}'
    returns = theirs[2]
    tool_return, retry = returns.parts
    assert isinstance(tool_return, pai.ToolReturnPart)
    assert tool_return.content == {"ok": True}
    # pydantic-ai 2.x reads a retry prompt that names a tool as that call's retried return
    assert isinstance(retry, pai.ToolReturnPart)
    assert (retry.tool_call_id, retry.outcome) == ("c2", "retried")


_names = st.text(alphabet="abcdefghij_", min_size=1, max_size=8)
_plain = st.text(max_size=20)
_metadata = st.none() | st.dictionaries(_names, st.integers() | _plain, max_size=2)


@st.composite
def _compatible_histories(draw: st.DrawFn) -> list[CanonicalMessage]:
    """Histories using only what pydantic-ai can represent (tool returns name their tool)."""
    history: list[CanonicalMessage] = []
    for index in range(draw(st.integers(0, 4))):
        call_ids = [f"c{index}_{n}" for n in range(draw(st.integers(0, 2)))]
        history.append(
            CanonicalMessage.request(
                draw(
                    st.sampled_from(
                        [
                            UserPromptPart(draw(_plain), metadata=draw(_metadata)),
                            SystemPromptPart(draw(_plain), metadata=draw(_metadata)),
                            RetryPromptPart(draw(_plain)),
                        ]
                    )
                ),
                *(
                    ToolReturnPart(tool_call_id=f"r{index}_{n}", tool_name="tool", content=draw(_plain))
                    for n in range(draw(st.integers(0, 2)))
                ),
            )
        )
        history.append(
            CanonicalMessage.response(
                TextPart(draw(_plain)),
                *(
                    ToolCallPart(
                        tool_call_id=call_id,
                        tool_name=draw(_names),
                        args=draw(st.none() | st.just("{}") | st.just({"a": 1})),
                    )
                    for call_id in call_ids
                ),
            ).replace(model_name=draw(st.none() | _names), usage=draw(st.none() | st.just(Usage(3, 4))))
        )
    return history


@settings(max_examples=60, deadline=None)
@given(_compatible_histories())
def test_generated_histories_load_in_pydantic_ai(history: list[CanonicalMessage]) -> None:
    with warnings.catch_warnings():
        _ignore_deprecations()
        theirs = ADAPTER.validate_json(dump_messages(history))
    assert [m.kind for m in theirs] == [m.kind for m in history]
    assert [len(m.parts) for m in theirs] == [len(m.parts) for m in history]
    for ours_message, their_message in zip(history, theirs, strict=True):
        for ours_part, their_part in zip(ours_message.parts, their_message.parts, strict=True):
            if isinstance(ours_part, (ToolCallPart, ToolReturnPart)):
                assert cast("Any", their_part).tool_call_id == ours_part.tool_call_id
            if isinstance(ours_part, (TextPart, UserPromptPart, SystemPromptPart, ToolReturnPart)):
                assert cast("Any", their_part).content == ours_part.content
