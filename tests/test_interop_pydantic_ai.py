"""harness.interop.pydantic_ai: lossless conversion and harness stacks inside pydantic-ai agents."""

from __future__ import annotations

import subprocess
import sys
import typing
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import pytest

pytest.importorskip("pydantic_ai")

from harness_clear_tool_results import ClearToolResults
from harness_limit_warner import LimitWarner
from harness_sliding_window import SlidingWindow
from pydantic_ai import Agent
from pydantic_ai import messages as pai
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

import harness.interop.pydantic_ai as interop
from harness import Capability, CapabilityError, CompactionEvent, RequestContext, hookimpl
from harness.interop.pydantic_ai import (
    STASH_KEY,
    HarnessCapabilities,
    InteropError,
    MessageConverter,
    as_history_processor,
    messages_from_pydantic_ai,
    messages_to_pydantic_ai,
)
from harness.messages import (
    CanonicalMessage,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownPart,
    UserPromptPart,
    harness_mark,
    with_harness_mark,
)
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


def test_harness_only_values_survive_pydantic_ai() -> None:
    history = [
        CanonicalMessage.request(
            SystemPromptPart("sys"),
            with_harness_mark(UserPromptPart("task"), preserved_by="sliding_window"),
            RetryPromptPart("retry without a call"),
        ),
        CanonicalMessage.response(
            with_harness_mark(TextPart("text"), kind="note"),
            ThoughtPart("thinking", metadata={"k": 1}),
            ToolCallPart("c1", "read", {"p": 1}, metadata={"m": 2}),
        ),
        CanonicalMessage.request(RetryPromptPart("bad args", tool_name="read", tool_call_id="c1")),
    ]
    theirs = messages_to_pydantic_ai(history)
    assert all(isinstance(m, (pai.ModelRequest, pai.ModelResponse)) for m in theirs)
    assert STASH_KEY in (theirs[0].metadata or {})
    back = messages_from_pydantic_ai(theirs)
    assert back == history
    assert harness_mark(back[0].parts[1]) == {"preserved_by": "sliding_window"}
    # The stash survives pydantic-ai's own JSON round trip (it is plain metadata).
    assert messages_from_pydantic_ai(list(ADAPTER.validate_json(ADAPTER.dump_json(theirs)))) == history


def test_a_stash_entry_is_ignored_once_pydantic_ai_changed_the_part() -> None:
    marked = with_harness_mark(UserPromptPart("task"), preserved_by="sliding_window")
    (theirs,) = messages_to_pydantic_ai([CanonicalMessage.request(SystemPromptPart("s"), marked)])
    assert isinstance(theirs, pai.ModelRequest)
    edited = pai.ModelRequest(
        parts=[theirs.parts[0], pai.UserPromptPart("rewritten", timestamp=STAMP)], metadata=theirs.metadata
    )
    (back,) = messages_from_pydantic_ai([edited])
    prompt = back.parts[1]
    assert isinstance(prompt, UserPromptPart)
    assert prompt.content == "rewritten"
    assert harness_mark(prompt) is None
    assert back.metadata is None


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
        CanonicalMessage.response(ToolCallPart("c1", "read", {})),
        CanonicalMessage.request(ToolReturnPart("c1", None, "out")),
    ]
    with pytest.raises(InteropError, match=r"message 2, part 0, field 'tool_name'.*pydantic-ai refuses"):
        messages_to_pydantic_ai(nameless)
    assert messages_to_pydantic_ai([]) == []


def test_importing_harness_interop_does_not_import_pydantic_ai() -> None:
    code = "import sys, harness.interop; print('pydantic_ai' in sys.modules, harness.interop.__all__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "[]"]


def test_missing_pydantic_ai_raises_interop_error_with_install_hint() -> None:
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'pydantic_ai' or name.startswith('pydantic_ai.'):\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from harness.errors import HarnessError\n"
        "try:\n"
        "    import harness.interop.pydantic_ai\n"
        "except HarnessError as exc:\n"
        "    print(type(exc).__name__, '|', exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("InteropError |")
    assert 'pip install "harness-loop[pydantic-ai]"' in out.stdout


# ---------------------------------------------------------------------------------------
# The caching converter
# ---------------------------------------------------------------------------------------


def _long_history(turns: int) -> list[pai.ModelRequest | pai.ModelResponse]:
    history: list[pai.ModelRequest | pai.ModelResponse] = [
        _request(pai.UserPromptPart("task", timestamp=STAMP))
    ]
    for n in range(turns):
        history.append(_response(pai.ToolCallPart("read", {"n": n}, f"c{n}")))
        history.append(_request(pai.ToolReturnPart("read", f"out {n}", f"c{n}", timestamp=STAMP)))
    return history


@pytest.fixture
def dump_counter(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    counts: list[int] = []
    real = interop._dump  # pyright: ignore[reportPrivateUsage]

    def counting(messages: Any) -> list[dict[str, Any]]:
        counts.append(len(messages))
        return real(messages)

    monkeypatch.setattr(interop, "_dump", counting)
    return counts


def test_converter_converts_each_message_once(dump_counter: list[int]) -> None:
    converter = MessageConverter()
    history = _long_history(20)
    first = converter.to_canonical(history)
    assert dump_counter == [len(history)]
    history.append(_response(pai.TextPart("more")))
    second = converter.to_canonical(history)
    assert dump_counter == [len(history) - 1, 1]
    assert all(a is b for a, b in zip(first, second, strict=False))
    # Unchanged harness messages come back as the very pydantic-ai objects.
    assert all(a is b for a, b in zip(converter.to_pydantic_ai(second), history, strict=True))


def test_converter_notices_in_place_changes_to_a_message() -> None:
    converter = MessageConverter()
    history = _long_history(1)
    converter.to_canonical(history)
    last = history[-1]
    assert isinstance(last, pai.ModelRequest)
    last.run_id = "filled-in-later"  # what pydantic-ai does to the request it sends
    assert converter.to_canonical(history)[-1].run_id == "filled-in-later"


def test_changed_message_reuses_the_unchanged_pydantic_ai_parts() -> None:
    converter = MessageConverter()
    request = _request(
        pai.ToolReturnPart("read", "big output", "c1", timestamp=STAMP),
        pai.UserPromptPart("and then", timestamp=STAMP),
    )
    (canonical,) = converter.to_canonical([request])
    cleared = canonical.replace(
        parts=(ToolReturnPart("c1", "read", "[cleared]", timestamp=STAMP), canonical.parts[1])
    )
    (theirs,) = converter.to_pydantic_ai([cleared])
    assert theirs is not request
    assert theirs.parts[1] is request.parts[1]
    assert isinstance(theirs.parts[0], pai.ToolReturnPart)
    assert theirs.parts[0].content == "[cleared]"
    # ... and the new object maps back to the same harness message without converting.
    assert converter.to_canonical([theirs])[0] is cleared


# ---------------------------------------------------------------------------------------
# Stacks inside pydantic-ai agents
# ---------------------------------------------------------------------------------------

PLAN = (1, 3, 1, 2, 3, 1, 1, 3, 2, 1, 3, 1, 1, 3, 2, 2)  # 30 tool calls, some parallel
BIG = "x" * 400


def _check_sent_history(messages: list[pai.ModelMessage]) -> None:
    """What the model receives: the task first, every call answered, every answer called earlier."""
    first = messages[0]
    assert isinstance(first, pai.ModelRequest)
    assert any(isinstance(p, pai.UserPromptPart) and p.content == "the task" for p in first.parts)
    assert isinstance(messages[-1], pai.ModelRequest)
    called: set[str] = set()
    answered: set[str] = set()
    for message in messages:
        for part in message.parts:
            if isinstance(message, pai.ModelResponse) and isinstance(part, pai.ToolCallPart):
                called.add(part.tool_call_id)
            elif isinstance(part, pai.ToolReturnPart):
                assert part.tool_call_id in called, f"return {part.tool_call_id} without its call"
                answered.add(part.tool_call_id)
    assert called == answered, f"unanswered calls: {called - answered}"


def _scripted_model(seen: list[list[pai.ModelMessage]]) -> FunctionModel:
    def respond(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        _check_sent_history(messages)
        seen.append(list(messages))
        step = len(seen) - 1
        if step < len(PLAN):
            calls = [
                pai.ToolCallPart("read", {"n": f"{step}.{i}"}, f"call-{step}-{i}") for i in range(PLAN[step])
            ]
            return pai.ModelResponse(parts=list(calls))
        return pai.ModelResponse(parts=[pai.TextPart("finished")])

    return FunctionModel(respond)


def _stack() -> list[object]:
    return [ClearToolResults(max_messages=6, keep_pairs=2), SlidingWindow(max_messages=12, keep_messages=6)]


def _agent(seen: list[list[pai.ModelMessage]], capability: Any, executed: list[str]) -> Agent[None, str]:
    agent = Agent(_scripted_model(seen), capabilities=[capability])

    @agent.tool_plain
    def read(n: str) -> str:  # pyright: ignore[reportUnusedFunction]
        executed.append(n)
        return f"{n}: {BIG}"

    return agent


@pytest.mark.parametrize("route", ["history_processor", "capability"])
async def test_agent_with_sliding_window_and_clearing_never_splits_tool_calls(route: str) -> None:
    seen: list[list[pai.ModelMessage]] = []
    executed: list[str] = []
    events: list[CompactionEvent] = []
    if route == "history_processor":
        capability: Any = ProcessHistory(as_history_processor(_stack(), on_event=events.append))
    else:
        capability = HarnessCapabilities(_stack(), on_compaction=events.append)
    result = await _agent(seen, capability, executed).run("the task")

    assert result.output == "finished"
    assert len(executed) == sum(PLAN) == 30
    assert len(seen) == len(PLAN) + 1
    sizes = [len(messages) for messages in seen]
    assert max(sizes) <= 13
    assert {event.strategy for event in events} >= {"clear_tool_results", "sliding_window"}
    cleared = [
        part
        for messages in seen
        for message in messages
        for part in message.parts
        if isinstance(part, pai.ToolReturnPart) and part.content == "[tool result cleared]"
    ]
    assert cleared
    chars = [
        sum(len(str(p.content)) for m in messages for p in m.parts if isinstance(p, pai.ToolReturnPart))
        for messages in seen
    ]
    assert max(chars) < 10 * len(BIG)  # 30 full results would be 30 x 400 characters
    # The stored history holds the edits too (pydantic-ai persists them), and stays valid.
    stored = result.all_messages()
    assert len(stored) <= 14
    _check_sent_history(stored[:-1])


async def test_limit_warning_is_sent_once_and_never_stored_by_the_capability() -> None:
    seen: list[list[pai.ModelMessage]] = []
    warner = LimitWarner(max_context_tokens=50)
    result = await _agent(seen, HarnessCapabilities([*_stack(), warner]), []).run("the task")
    assert result.output == "finished"
    for messages in seen[1:]:  # the first request (the task alone) is below the threshold
        warnings_sent = [_warnings_in(m) for m in messages]
        assert sum(warnings_sent) == 1
        assert warnings_sent[-1] == 1  # at the end of the request being sent
    assert sum(_warnings_in(m) for m in result.all_messages()) == 0


async def test_limit_warning_does_not_pile_up_with_the_history_processor() -> None:
    seen: list[list[pai.ModelMessage]] = []
    warner = LimitWarner(max_context_tokens=50)
    result = await _agent(seen, ProcessHistory(as_history_processor([*_stack(), warner])), []).run("the task")
    assert result.output == "finished"
    for messages in seen[1:]:
        assert [_warnings_in(m) for m in messages][-1] == 1
        assert sum(_warnings_in(m) for m in messages) == 1
    # pydantic-ai stores a processor's output: only the last request keeps its warning.
    stored = [_warnings_in(m) for m in result.all_messages()]
    assert sum(stored) <= 1
    # ... and the requests it was removed from keep no stash entry for it.
    for message in result.all_messages()[:-2]:
        stash: dict[str, Any] = (message.metadata or {}).get(STASH_KEY, {})
        assert all(int(index) < len(message.parts) for index in stash.get("parts", {}))


def _warnings_in(message: pai.ModelMessage) -> int:
    return sum(
        1
        for p in message.parts
        if isinstance(p, pai.UserPromptPart) and str(p.content).startswith("[LimitWarner]")
    )


class _DropsToolReturns(Capability):
    """Breaks the invariants on purpose: removes every tool return."""

    @hookimpl
    async def before_model_request(self, ctx: RequestContext) -> None:
        ctx.messages[:] = [
            m.replace(parts=tuple(p for p in m.parts if not isinstance(p, ToolReturnPart)))
            for m in ctx.messages
        ]


async def test_a_capability_that_breaks_the_history_fails_the_run() -> None:
    processor = as_history_processor([_DropsToolReturns()])
    history = _long_history(2)
    with pytest.raises(CapabilityError, match="drops_tool_returns"):
        await processor.process(history)
    seen: list[list[pai.ModelMessage]] = []
    with pytest.raises(CapabilityError):
        await _agent(seen, HarnessCapabilities([_DropsToolReturns()]), []).run("the task")


async def test_idle_requests_cost_only_the_new_messages(dump_counter: list[int]) -> None:
    processor = as_history_processor([SlidingWindow(max_messages=10_000, keep_messages=10)])
    history = _long_history(500)
    first = await processor.process(history)
    assert not first.changed
    assert all(a is b for a, b in zip(first.sent, history, strict=True))
    history.append(_response(pai.ToolCallPart("read", {}, "late")))
    history.append(_request(pai.ToolReturnPart("read", "late out", "late", timestamp=STAMP)))
    dump_counter.clear()
    second = await processor.process(history)
    assert dump_counter == [2]
    assert second.sent[-1] is history[-1]


async def test_capability_runs_get_their_own_state() -> None:
    capability = HarnessCapabilities(_stack(), context_window=100_000, model_name="gpt-4o")
    run_copy = await capability.for_run(None)  # pyright: ignore[reportArgumentType]
    assert isinstance(run_copy, HarnessCapabilities)
    assert run_copy.processor is not capability.processor
    assert (run_copy.context_window, run_copy.model_name) == (100_000, "gpt-4o")
    assert HarnessCapabilities.get_serialization_name() is None


class _SilentlyClears(Capability):
    """Edits the history without reporting an event: the edit must still be applied."""

    @hookimpl
    async def before_model_request(self, ctx: RequestContext) -> None:
        last = len(ctx.messages) - 1
        ctx.messages[:] = [m if i == last else _cleared(m) for i, m in enumerate(ctx.messages)]


def _cleared(message: CanonicalMessage) -> CanonicalMessage:
    if not any(isinstance(p, ToolReturnPart) for p in message.parts):
        return message
    parts = [attrs.evolve(p, content="gone") if isinstance(p, ToolReturnPart) else p for p in message.parts]
    return message.replace(parts=tuple(parts))


async def test_edits_without_events_are_applied_too() -> None:
    history = _long_history(3)
    processed = await as_history_processor([_SilentlyClears()]).process(history)
    assert processed.changed
    assert not processed.result.events
    contents = [p.content for m in processed.sent for p in m.parts if isinstance(p, pai.ToolReturnPart)]
    assert contents == ["gone", "gone", "out 2"]
    assert processed.sent[0] is history[0]
