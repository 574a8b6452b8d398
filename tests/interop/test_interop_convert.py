"""harness.interop.pydantic_ai: lossless conversion of every pydantic-ai part kind, both ways."""

from __future__ import annotations

import typing
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import messages as pai
from pydantic_ai.usage import RequestUsage

from harness.core import (
    CanonicalMessage,
    RetryPromptPart,
    SystemPromptPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownPart,
    UserPromptPart,
)
from harness.errors import InteropError
from harness.interop.pydantic_ai import messages_from_pydantic_ai, messages_to_pydantic_ai
from harness.wire import load_messages

ADAPTER = pai.ModelMessagesTypeAdapter
STAMP = datetime(2025, 3, 4, 5, 6, 7, 890000, tzinfo=UTC)


def _normalised(messages: list[Any]) -> list[Any]:
    """pydantic-ai's own serialisation round trip (fills inferred values, narrows binary content)."""
    return list(ADAPTER.validate_python(ADAPTER.dump_python(messages, mode="json")))


def _request(*parts: Any, **fields: Any) -> pai.ModelRequest:
    return pai.ModelRequest(parts=list(parts), timestamp=STAMP, **fields)


def _response(*parts: Any, **fields: Any) -> pai.ModelResponse:
    return pai.ModelResponse(parts=list(parts), timestamp=STAMP, **fields)


def _from_json(item: dict[str, Any]) -> pai.ModelRequest | pai.ModelResponse:
    return ADAPTER.validate_python([item])[0]


# One sample per pydantic-ai part kind (and per notable variant of a kind).
SAMPLES: dict[str, Callable[[], pai.ModelRequest | pai.ModelResponse]] = {
    "system-prompt": lambda: _request(
        pai.SystemPromptPart("be brief", timestamp=STAMP, dynamic_ref="ref", metadata={"a": 1})
    ),
    "system-prompt-request-scope": lambda: _request(
        pai.SystemPromptPart("only now", timestamp=STAMP, scope="request")
    ),
    "user-prompt-str": lambda: _request(pai.UserPromptPart("hello", timestamp=STAMP)),
    "user-prompt-multimodal": lambda: _request(
        pai.UserPromptPart(
            [
                "look",
                pai.ImageUrl("https://example.com/a.png"),
                pai.BinaryContent(b"\x89PNG", media_type="image/png"),
                pai.DocumentUrl("https://example.com/d.pdf"),
                pai.AudioUrl("https://example.com/a.mp3"),
                pai.VideoUrl("https://example.com/v.mp4"),
                pai.TextContent("aside", metadata={"k": 1}),
                pai.CachePoint(),
            ],
            timestamp=STAMP,
        )
    ),
    "tool-return": lambda: _request(
        pai.ToolReturnPart("read", {"lines": [1, 2]}, "c1", timestamp=STAMP, metadata={"m": True})
    ),
    "tool-return-failed": lambda: _request(
        pai.ToolReturnPart("read", "boom", "c1", timestamp=STAMP, outcome="failed")
    ),
    "tool-return-retried": lambda: _request(
        pai.ToolReturnPart("read", "fix the args", "c1", timestamp=STAMP, outcome="retried")
    ),
    "retry-feedback-str": lambda: _request(
        pai.RetryFeedbackPart("answer in JSON", retry=pai.RetryInfo(cause="model_retry"), timestamp=STAMP)
    ),
    "retry-feedback-errors": lambda: _from_json(
        {
            "kind": "request",
            "parts": [
                {
                    "part_kind": "retry-feedback",
                    "content": [{"type": "missing", "loc": ["x"], "msg": "Field required", "input": {}}],
                    "retry": {"cause": "validation_error"},
                    "timestamp": "2025-03-04T05:06:07Z",
                }
            ],
        }
    ),
    "tool-search-return": lambda: _from_json(
        {
            "kind": "request",
            "parts": [
                {
                    "part_kind": "tool-return",
                    "tool_name": "search_tools",
                    "tool_call_id": "s1",
                    "tool_kind": "tool-search",
                    "content": {"discovered_tools": [{"name": "grep"}]},
                    "timestamp": "2025-03-04T05:06:07Z",
                }
            ],
        }
    ),
    "capability-load-return": lambda: _from_json(
        {
            "kind": "request",
            "parts": [
                {
                    "part_kind": "tool-return",
                    "tool_name": "load_capability",
                    "tool_call_id": "l1",
                    "tool_kind": "capability-load",
                    "content": {"message": "loaded"},
                    "timestamp": "2025-03-04T05:06:07Z",
                }
            ],
        }
    ),
    "speech-request": lambda: _request(pai.SpeechPart(speaker="user", transcript="hi there")),
    "tool-availability-delta": lambda: _request(pai.ToolAvailabilityDeltaPart(tools_added=["grep"])),
    "model-settings-delta": lambda: _from_json(
        {
            "kind": "request",
            "parts": [{"part_kind": "model-settings-delta", "settings": {"temperature": 0.5}}],
        }
    ),
    "instruction-delta": lambda: _from_json(
        {"kind": "request", "parts": [{"part_kind": "instruction-delta", "id": None, "content": "new rule"}]}
    ),
    "instruction-baseline": lambda: _from_json(
        {
            "kind": "request",
            "parts": [
                {
                    "part_kind": "instruction-baseline",
                    "instructions": [{"part_kind": "instruction", "content": "x"}],
                }
            ],
        }
    ),
    "compaction-request": lambda: _request(pai.CompactionPart("summary so far", metadata={"by": "me"})),
    "request-fields": lambda: _request(
        pai.UserPromptPart("hi", timestamp=STAMP),
        instructions="be kind",
        run_id="run-1",
        conversation_id="conv-1",
        metadata={"tenant": "t"},
    ),
    "text": lambda: _response(
        pai.TextPart("hello", id="t1", provider_name="openai", provider_details={"x": 1})
    ),
    "thinking": lambda: _response(
        pai.ThinkingPart(
            "hmm", id="th1", signature="sig==", provider_name="anthropic", provider_details={"y": 2}
        )
    ),
    "tool-call-dict": lambda: _response(pai.ToolCallPart("read", {"path": "a.py"}, "c1", id="item-1")),
    "tool-call-str": lambda: _response(pai.ToolCallPart("read", '{"path": "a.py"}', "c2")),
    "tool-call-none": lambda: _response(pai.ToolCallPart("ping", None, "c3")),
    "builtin-tool-call-and-return": lambda: _response(
        pai.NativeToolCallPart("web_search", {"query": "x"}, "b1", provider_name="openai"),
        pai.NativeToolReturnPart(
            "web_search", {"results": [1]}, "b1", provider_name="openai", timestamp=STAMP
        ),
    ),
    "tool-search-calls": lambda: _from_json(
        {
            "kind": "response",
            "parts": [
                {
                    "part_kind": "tool-call",
                    "tool_name": "search_tools",
                    "tool_call_id": "s1",
                    "tool_kind": "tool-search",
                    "args": {"queries": ["grep"]},
                },
                {
                    "part_kind": "tool-call",
                    "tool_name": "load_capability",
                    "tool_call_id": "l1",
                    "tool_kind": "capability-load",
                    "args": {"id": "cap"},
                },
                {
                    "part_kind": "builtin-tool-call",
                    "tool_name": "tool_search",
                    "tool_call_id": "n1",
                    "tool_kind": "tool-search",
                    "args": {"queries": ["q"]},
                },
                {
                    "part_kind": "builtin-tool-return",
                    "tool_name": "tool_search",
                    "tool_call_id": "n1",
                    "tool_kind": "tool-search",
                    "content": {"discovered_tools": [{"name": "x"}]},
                    "timestamp": "2025-03-04T05:06:07Z",
                },
            ],
            "timestamp": "2025-03-04T05:06:07Z",
        }
    ),
    "file": lambda: _response(pai.FilePart(pai.BinaryContent(b"\x89PNG", media_type="image/png"), id="f1")),
    "speech-response": lambda: _response(pai.SpeechPart(speaker="assistant", transcript="hello")),
    "compaction-response": lambda: _response(
        pai.CompactionPart("encrypted", id="cmp", provider_name="openai")
    ),
    "response-fields": lambda: _response(
        pai.TextPart("done"),
        usage=RequestUsage(
            input_tokens=120, output_tokens=30, cache_read_tokens=100, cache_write_tokens=5, details={"r": 3}
        ),
        model_name="claude-test",
        provider_name="anthropic",
        provider_url="https://api.example.com",
        provider_details={"stop": "end"},
        provider_response_id="msg_1",
        finish_reason="stop",
        run_id="run-1",
        conversation_id="conv-1",
        metadata={"trace": "t"},
    ),
}


def _part_classes(union: Any) -> set[type]:
    found: set[type] = set()
    for arg in typing.get_args(union):
        if isinstance(arg, type):
            found.add(arg)
        else:
            found |= _part_classes(arg)
    return found


def test_samples_cover_every_pydantic_ai_part_kind() -> None:
    # RetryPromptPart is deprecated and never built by validation; it has its own test below.
    legacy: set[type] = {pai.RetryPromptPart}  # pyright: ignore[reportDeprecated]
    wanted = (_part_classes(pai.ModelRequestPart) | _part_classes(pai.ModelResponsePart)) - legacy
    built = {type(part) for make in SAMPLES.values() for part in make().parts}
    assert wanted - built == set()


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_part_kind_round_trips_through_harness(name: str) -> None:
    original = SAMPLES[name]()
    normalised = _normalised([original])
    ours = messages_from_pydantic_ai([original])
    assert len(ours[0].parts) == len(original.parts)
    assert messages_to_pydantic_ai(ours) == normalised
    # Once in pydantic-ai's normal form the round trip is exact, twice over.
    again = messages_to_pydantic_ai(messages_from_pydantic_ai(normalised))
    assert again == normalised
    assert messages_to_pydantic_ai(messages_from_pydantic_ai(again)) == normalised


def test_pydantic_ai_parts_map_to_the_right_harness_parts() -> None:
    request = messages_from_pydantic_ai([SAMPLES["system-prompt"](), SAMPLES["user-prompt-multimodal"]()])
    system = request[0].parts[0]
    assert isinstance(system, SystemPromptPart)
    assert (system.content, system.metadata, system.timestamp) == ("be brief", {"a": 1}, STAMP)
    prompt = request[1].parts[0]
    assert isinstance(prompt, UserPromptPart)
    assert isinstance(prompt.content, tuple)
    assert prompt.content[0] == "look"
    assert [item["kind"] for item in prompt.content[1:]] == [
        "image-url",
        "binary",
        "document-url",
        "audio-url",
        "video-url",
        "text-content",
        "cache-point",
    ]
    (response,) = messages_from_pydantic_ai([SAMPLES["thinking"]()])
    thought = response.parts[0]
    assert isinstance(thought, ThoughtPart)
    assert (thought.content, thought.signature, thought.provider_name) == ("hmm", "sig==", "anthropic")
    assert thought.extra["id"] == "th1"
    (calls,) = messages_from_pydantic_ai([SAMPLES["tool-call-dict"](), SAMPLES["tool-call-str"]()][:1])
    call = calls.parts[0]
    assert isinstance(call, ToolCallPart)
    assert (call.tool_call_id, call.tool_name, call.args) == ("c1", "read", {"path": "a.py"})
    (returns,) = messages_from_pydantic_ai([SAMPLES["tool-return-retried"]()])
    retried = returns.parts[0]
    assert isinstance(retried, ToolReturnPart)
    assert retried.extra["outcome"] == "retried"
    (builtin,) = messages_from_pydantic_ai([SAMPLES["builtin-tool-call-and-return"]()])
    assert [type(p) for p in builtin.parts] == [UnknownPart, UnknownPart]
    assert [p.kind for p in builtin.parts if isinstance(p, UnknownPart)] == [
        "builtin-tool-call",
        "builtin-tool-return",
    ]
    (fields,) = messages_from_pydantic_ai([SAMPLES["response-fields"]()])
    assert fields.usage is not None
    assert (fields.usage.request_tokens, fields.usage.cached_tokens) == (120, 100)
    assert (fields.model_name, fields.provider_response_id, fields.finish_reason) == (
        "claude-test",
        "msg_1",
        "stop",
    )
    (req_fields,) = messages_from_pydantic_ai([SAMPLES["request-fields"]()])
    assert (req_fields.instructions, req_fields.run_id, req_fields.metadata) == (
        "be kind",
        "run-1",
        {"tenant": "t"},
    )


@pytest.fixture
def _legacy_retry_parts() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message=r".*RetryPromptPart.*deprecated")
        yield


@pytest.mark.usefixtures("_legacy_retry_parts")
def test_legacy_retry_prompt_parts_round_trip() -> None:
    original = _request(
        pai.RetryPromptPart("no such file", tool_name="read", tool_call_id="c1", timestamp=STAMP),  # pyright: ignore[reportDeprecated]
        pai.RetryPromptPart(  # pyright: ignore[reportDeprecated]
            [{"type": "missing", "loc": ("x",), "msg": "Field required", "input": {}}], timestamp=STAMP
        ),
    )
    ours = messages_from_pydantic_ai([original])
    tool_retry, general = ours[0].parts
    assert isinstance(tool_retry, RetryPromptPart)
    assert (tool_retry.tool_call_id, tool_retry.tool_name, tool_retry.answers_tool_call) == (
        "c1",
        "read",
        True,
    )
    assert isinstance(general, RetryPromptPart)
    assert not general.answers_tool_call
    theirs = messages_to_pydantic_ai(ours)
    # pydantic-ai 2.x stores retry prompts as a retried tool return and as retry feedback ...
    assert [type(p) for p in theirs[0].parts] == [pai.ToolReturnPart, pai.RetryFeedbackPart]
    normalised = _normalised([original])
    assert theirs[0].parts == normalised[0].parts
    # ... and the harness parts come back exactly.
    assert messages_from_pydantic_ai(theirs) == ours


def test_corpus_file_round_trips(corpus_file: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        theirs = list(ADAPTER.validate_json(corpus_file.read_bytes()))
    ours = messages_from_pydantic_ai(theirs)
    assert len(ours) == len(theirs)
    assert [len(m.parts) for m in ours] == [len(m.parts) for m in theirs]
    assert messages_to_pydantic_ai(ours) == theirs
    # What pydantic-ai loaded reads the same as what harness loads from the file, apart
    # from the parts pydantic-ai 2.x translates (retry prompts).
    direct = load_messages(corpus_file.read_bytes())
    assert [m.kind for m in direct] == [m.kind for m in ours]


def test_bad_input_raises_typed_errors() -> None:
    with pytest.raises(InteropError, match="message 1: expected a pydantic-ai ModelRequest"):
        messages_from_pydantic_ai([SAMPLES["text"](), "not a message"])  # pyright: ignore[reportArgumentType]
    with pytest.raises(InteropError, match="message 0: expected a CanonicalMessage"):
        messages_to_pydantic_ai([{"kind": "request"}])  # pyright: ignore[reportArgumentType]
    nameless = [
        CanonicalMessage.request(UserPromptPart("go")),
        CanonicalMessage.response(ToolCallPart(tool_call_id="c1", tool_name="read", args={})),
        CanonicalMessage.request(ToolReturnPart(tool_call_id="c1", tool_name=None, content="out")),
    ]
    with pytest.raises(InteropError, match=r"message 2, part 0, field 'tool_name'.*pydantic-ai refuses"):
        messages_to_pydantic_ai(nameless)
    assert messages_to_pydantic_ai([]) == []
