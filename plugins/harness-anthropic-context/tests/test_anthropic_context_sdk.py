"""AnthropicContextManagement with the real ``anthropic`` and ``openai`` SDKs against loopback servers.

The servers are the loopback server of the core's model tests (``tests/models/conftest.py``):
they answer as the providers' API references document and record the headers and JSON body
of every request the SDKs sent, so these tests assert exactly what went over the wire.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pytest

pytest.importorskip("anthropic")
pytest.importorskip("openai")
loopback = pytest.importorskip("tests.models.conftest", reason="needs the core's loopback server")

from harness_anthropic_context import (  # noqa: E402
    PAUSE_TEXT,
    SUMMARY_PREFIX,
    AnthropicContextManagement,
    applied_edits,
    compaction_parts,
    is_compaction_pause,
)
from harness_model_fallback import ModelFallback  # noqa: E402

from harness import Agent, CompactionEvent, RequestContext, Session, open_store  # noqa: E402
from harness.core import CanonicalMessage, ModelSettings  # noqa: E402
from harness.history import check_invariants  # noqa: E402
from harness.hooks import PluginManager, hookimpl  # noqa: E402
from harness.models.anthropic import AnthropicModel  # noqa: E402
from harness.models.anthropic import RetryPolicy as AnthropicRetry  # noqa: E402
from harness.models.openai import OpenAIModel, RetryPolicy  # noqa: E402
from harness.run import Compaction  # noqa: E402

if TYPE_CHECKING:
    from tests.models.conftest import FakeServer  # pyright: ignore[reportMissingTypeStubs]

BETAS = "context-management-2025-06-27,compact-2026-01-12"
SUMMARY = "The user asked for the failing test in src/app.py; it was test_login (KeyError: 'token')."
COMPACTION_BLOCK: dict[str, Any] = {
    "type": "compaction",
    "content": SUMMARY,
    "encrypted_content": "EqoBCkgIBxABGAIiQL7Xs+opaque+metadata==",
    "signature": "sig_7Hq2mN0pQ",
}
APPLIED = [{"type": "clear_tool_uses_20250919", "cleared_tool_uses": 3, "cleared_input_tokens": 12_000}]
CONFIG: dict[str, Any] = {
    "clear_tool_uses": {
        "trigger": 30_000,
        "keep": 3,
        "clear_at_least": 5_000,
        "exclude_tools": ["web_search"],
        "clear_tool_inputs": True,
    },
    "compaction": {
        "trigger": 150_000,
        "instructions": "Keep every file path.",
        "pause_after_compaction": False,
    },
}
EDITS = [
    {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "input_tokens", "value": 30_000},
        "keep": {"type": "tool_uses", "value": 3},
        "clear_at_least": {"type": "input_tokens", "value": 5_000},
        "exclude_tools": ["web_search"],
        "clear_tool_inputs": True,
    },
    {
        "type": "compact_20260112",
        "trigger": {"type": "input_tokens", "value": 150_000},
        "instructions": "Keep every file path.",
        "pause_after_compaction": False,
    },
]


@pytest.fixture
def anthropic_server() -> Iterator[FakeServer]:
    server = loopback.FakeServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def openai_server() -> Iterator[FakeServer]:
    server = loopback.FakeServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def no_sleep(delay: float) -> None:
    del delay


@pytest.fixture
async def claude(anthropic_server: FakeServer) -> AsyncIterator[AnthropicModel]:
    model = AnthropicModel(
        "claude-sonnet-4-6",
        api_key="sk-ant-test",
        base_url=anthropic_server.url,
        retry=AnthropicRetry(max_retries=0, base_delay=0.0, jitter=0.0, sleep=no_sleep),
        timeout=5.0,
    )
    yield model
    await model.aclose()


@pytest.fixture
async def gpt(openai_server: FakeServer) -> AsyncIterator[OpenAIModel]:
    model = OpenAIModel(
        "gpt-4o-mini",
        api_key="sk-test-key",
        base_url=openai_server.url + "/v1",
        retry=RetryPolicy(max_retries=0, base_delay=0.0, jitter=0.0, sleep=no_sleep),
        timeout=5.0,
    )
    yield model
    await model.aclose()


def message(
    content: list[dict[str, Any]], *, stop_reason: str = "end_turn", context_management: Any = None
) -> dict[str, Any]:
    """A Message object as the API reference shows it."""
    body: dict[str, Any] = {
        "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 2095, "output_tokens": 503},
    }
    if context_management is not None:
        body["context_management"] = context_management
    return body


def completion(text: str) -> dict[str, Any]:
    """A chat.completion object as the API reference shows it."""
    return {
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion",
        "created": 1741570283,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None, "annotations": []},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 19, "completion_tokens": 10, "total_tokens": 29},
    }


def event(data: dict[str, Any]) -> str:
    return loopback.sse(data, data["type"])


def streamed_text(text: str) -> Any:
    """A streamed message holding one text block."""
    start = {**message([]), "stop_reason": None, "usage": {"input_tokens": 2095, "output_tokens": 1}}
    return loopback.Stream(
        [
            event({"type": "message_start", "message": start}),
            event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
            event({"type": "content_block_stop", "index": 0}),
            event(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                }
            ),
            event({"type": "message_stop"}),
        ]
    )


def streamed_compaction(text: str) -> Any:
    """A streamed message: a compaction block (its summary in one compaction_delta), then text."""
    start = {**message([]), "stop_reason": None, "usage": {"input_tokens": 2095, "output_tokens": 1}}
    opening = {"type": "compaction", "content": None, "signature": COMPACTION_BLOCK["signature"]}
    delta = {
        "type": "compaction_delta",
        "content": SUMMARY,
        "encrypted_content": COMPACTION_BLOCK["encrypted_content"],
    }
    events = [
        event({"type": "message_start", "message": start}),
        event({"type": "content_block_start", "index": 0, "content_block": opening}),
        event({"type": "content_block_delta", "index": 0, "delta": delta}),
        event({"type": "content_block_stop", "index": 0}),
        event({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        event({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": text}}),
        event({"type": "content_block_stop", "index": 1}),
        event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 503},
                "context_management": {"applied_edits": APPLIED},
            }
        ),
        event({"type": "message_stop"}),
    ]
    return loopback.Stream(events)


class Events:
    """An observer keeping every ``CompactionEvent`` reported."""

    def __init__(self) -> None:
        self.events: list[CompactionEvent] = []

    @hookimpl
    def on_compaction(self, ctx: RequestContext, event: CompactionEvent) -> None:
        del ctx
        self.events.append(event)


def agent_with(model: Any, *capabilities: Any, events: Events | None = None, **kwargs: Any) -> Agent:
    manager = PluginManager()
    if events is not None:
        manager.register(events)
    return Agent(model, capabilities=list(capabilities), plugin_manager=manager, **kwargs)


def dumped(value: Any) -> str:
    """The JSON text of ``value`` as ``json.dumps`` writes it: key order and values, byte for byte."""
    return json.dumps(value, ensure_ascii=False)


# ------------------------------------------------------------------------------ the request


async def test_anthropic_request_carries_the_edits_and_the_beta_header(
    anthropic_server: FakeServer, claude: AnthropicModel
) -> None:
    anthropic_server.reply(message([{"type": "text", "text": "hello"}]))
    result = await agent_with(claude, AnthropicContextManagement(**CONFIG)).run("hi")
    assert result.output == "hello"
    [request] = anthropic_server.requests
    assert request.path == "/v1/messages"
    assert request.headers["anthropic-beta"] == BETAS
    assert request.body == {
        "model": "claude-sonnet-4-6",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "context_management": {"edits": EDITS},
    }


async def test_clear_thinking_goes_first_and_only_with_thinking_on(
    anthropic_server: FakeServer, claude: AnthropicModel
) -> None:
    capability = AnthropicContextManagement(clear_tool_uses=True, clear_thinking={"keep": 2})
    thinking = {"type": "enabled", "budget_tokens": 2048}
    anthropic_server.reply(message([{"type": "text", "text": "a"}]))
    anthropic_server.reply(message([{"type": "text", "text": "b"}]))
    agent = agent_with(claude, capability, settings=ModelSettings(extra={"thinking": thinking}))
    await agent.run("with thinking")
    await agent_with(claude, capability).run("without thinking")
    first, second = anthropic_server.requests
    assert first.body["thinking"] == thinking
    assert first.body["context_management"] == {
        "edits": [
            {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 2}},
            {"type": "clear_tool_uses_20250919"},
        ]
    }
    assert second.body["context_management"] == {"edits": [{"type": "clear_tool_uses_20250919"}]}
    assert (
        first.headers["anthropic-beta"] == second.headers["anthropic-beta"] == "context-management-2025-06-27"
    )


async def test_headers_and_edits_the_user_set_are_kept(
    anthropic_server: FakeServer, claude: AnthropicModel
) -> None:
    settings = ModelSettings(
        extra={
            "extra_headers": {"Anthropic-Beta": "interleaved-thinking-2025-05-14", "x-trace": "1"},
            "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        }
    )
    anthropic_server.reply(message([{"type": "text", "text": "ok"}]))
    agent = agent_with(claude, AnthropicContextManagement(compaction=True), settings=settings)
    await agent.run("hi")
    [request] = anthropic_server.requests
    assert request.headers["anthropic-beta"] == f"interleaved-thinking-2025-05-14,{BETAS}"
    assert request.headers["x-trace"] == "1"
    assert request.body["context_management"] == {
        "edits": [{"type": "compact_20260112"}, {"type": "clear_thinking_20251015", "keep": "all"}]
    }


async def test_openai_request_gets_none_of_it(openai_server: FakeServer, gpt: OpenAIModel) -> None:
    openai_server.reply(completion("hello"))
    result = await agent_with(gpt, AnthropicContextManagement(**CONFIG)).run("hi")
    assert result.output == "hello"
    [request] = openai_server.requests
    assert request.path == "/v1/chat/completions"
    assert "anthropic-beta" not in request.headers
    assert request.body == {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


async def test_a_stack_string_configures_it(anthropic_server: FakeServer, claude: AnthropicModel) -> None:
    stack = (
        "anthropic_context_management:clear_tool_uses_trigger=30000,clear_tool_uses_keep=3,"
        "clear_tool_uses_clear_at_least=5000,clear_tool_uses_exclude_tools=web_search,"
        "clear_tool_uses_clear_tool_inputs=true,compaction_trigger=150000,"
        'compaction_instructions="Keep every file path.",compaction_pause_after_compaction=false'
    )
    anthropic_server.reply(message([{"type": "text", "text": "ok"}]))
    await Agent(claude, capabilities=stack).run("hi")
    [request] = anthropic_server.requests
    assert request.body["context_management"] == {"edits": EDITS}
    assert request.headers["anthropic-beta"] == BETAS


# ------------------------------------------------------------------------------ compaction blocks


async def test_a_compaction_block_goes_back_verbatim_and_the_edits_are_reported(
    anthropic_server: FakeServer, claude: AnthropicModel
) -> None:
    reply = message(
        [COMPACTION_BLOCK, {"type": "text", "text": "Found it."}],
        context_management={"applied_edits": APPLIED},
    )
    anthropic_server.reply(reply)
    anthropic_server.reply(message([{"type": "text", "text": "Fixed."}]))
    events = Events()
    agent = agent_with(claude, AnthropicContextManagement(**CONFIG), events=events)
    first = await agent.run("find the failing test")
    response = first.all_messages[-1]
    assert applied_edits(response) == APPLIED
    [part] = compaction_parts(response)
    assert {k: v for k, v in part.data.items() if k != "part_kind"} == COMPACTION_BLOCK
    assert events.events == []  # reported on the next request, the first that can see it
    second = await agent.run("fix it", session=first.session)
    assert second.output == "Fixed."
    body = anthropic_server.requests[1].body
    sent = body["messages"][1]
    assert sent == {"role": "assistant", "content": [COMPACTION_BLOCK, {"type": "text", "text": "Found it."}]}
    assert dumped(sent["content"][0]) == dumped(reply["content"][0])
    assert anthropic_server.requests[1].headers["anthropic-beta"] == BETAS
    # no post-compaction receipt: harness did not compact, and the server already told the model
    assert body["messages"][2:] == [{"role": "user", "content": [{"type": "text", "text": "fix it"}]}]
    [event] = events.events
    assert event.strategy == "anthropic_context_management"
    assert event.reason == (
        "Anthropic server: clear_tool_uses_20250919 cleared 3 tool uses (12,000 input tokens); "
        "compact_20260112 summarized the earlier context (1 compaction block(s))"
    )
    assert event.details["server_side"] is True
    assert event.details["applied_edits"] == APPLIED
    assert event.details["summary_chars"] == len(SUMMARY)
    assert event.messages_before == event.messages_after == 3
    assert event.tokens_before > 0
    assert event.tokens_after == 0  # the server cleared 12,000 tokens: more than harness counts here


async def test_a_streamed_compaction_block_goes_back_as_a_plain_response_would_hold_it(
    anthropic_server: FakeServer, claude: AnthropicModel
) -> None:
    anthropic_server.queue(
        loopback.Reply(streamed_compaction("Found it.")), loopback.Reply(streamed_text("Fixed."))
    )
    agent = agent_with(claude, AnthropicContextManagement(**CONFIG))
    seen: list[Any] = []
    async with agent.run_stream("find the failing test") as stream:
        seen.extend([item async for item in stream])
    first = stream.result
    assert first.output == "Found it."
    response = first.all_messages[-1]
    assert applied_edits(response) == APPLIED
    assert response.extra["provider_details"]["context_management"] == {"applied_edits": APPLIED}
    async with agent.run_stream("fix it", session=first.session) as stream:
        seen.extend([item async for item in stream])
    assert anthropic_server.requests[0].body["stream"] is True
    sent_block = anthropic_server.requests[1].body["messages"][1]["content"][0]
    assert sent_block == COMPACTION_BLOCK
    # the streamed block's keys in the order they arrived: the start's, then the delta's
    assert list(sent_block) == ["type", "content", "signature", "encrypted_content"]
    [compaction] = [item for item in seen if isinstance(item, Compaction)]
    assert compaction.event.details["applied_edits"] == APPLIED


async def test_pause_after_compaction_ends_the_run_on_the_block_and_the_next_prompt_continues(
    anthropic_server: FakeServer, claude: AnthropicModel
) -> None:
    anthropic_server.reply(message([COMPACTION_BLOCK], stop_reason="compaction"))
    anthropic_server.reply(message([{"type": "text", "text": "Carrying on."}]))
    capability = AnthropicContextManagement(compaction={"pause_after_compaction": True})
    agent = agent_with(claude, capability)
    paused = await agent.run("long task")
    response = paused.all_messages[-1]
    assert is_compaction_pause(response)
    assert response.finish_reason == "stop"
    assert paused.output == PAUSE_TEXT
    assert compaction_parts(response)[0].data["content"] == SUMMARY
    assert check_invariants(paused.all_messages) == []
    resumed = await agent.run("go on", session=paused.session)
    assert resumed.output == "Carrying on."
    assert anthropic_server.requests[0].body["context_management"] == {
        "edits": [{"type": "compact_20260112", "pause_after_compaction": True}]
    }
    assert anthropic_server.requests[1].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "long task"}]},
        {"role": "assistant", "content": [COMPACTION_BLOCK]},
        {"role": "user", "content": [{"type": "text", "text": "go on"}]},
    ]


# ------------------------------------------------------------------------------ provider switch, stores


@pytest.mark.parametrize("store_kind", ["sqlite", "file"])
async def test_a_session_moves_to_openai_and_back_with_the_block_intact(
    anthropic_server: FakeServer,
    openai_server: FakeServer,
    claude: AnthropicModel,
    gpt: OpenAIModel,
    tmp_path: Path,
    store_kind: str,
) -> None:
    url = (
        f"sqlite:///{tmp_path / 'sessions.db'}" if store_kind == "sqlite" else f"file://{tmp_path / 'files'}"
    )
    capability = AnthropicContextManagement(**CONFIG)
    reply = message([COMPACTION_BLOCK, {"type": "text", "text": "Found it."}])
    anthropic_server.reply(reply)
    openai_server.reply(completion("On OpenAI now."))
    anthropic_server.reply(message([{"type": "text", "text": "Back on Claude."}]))

    store = open_store(url)
    first = await agent_with(claude, capability).run(
        "find the failing test", session=Session.create(store=store)
    )
    session_id = first.session.session_id
    store.close()

    store = open_store(url)  # a fresh process: the history comes from the store
    moved = await agent_with(gpt, capability).run("fix it", session=Session.open(store, session_id))
    assert moved.output == "On OpenAI now."
    store.close()
    [openai_request] = openai_server.requests
    assert openai_request.body == {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "user", "content": "find the failing test"},
            {"role": "assistant", "content": f"{SUMMARY_PREFIX}\n{SUMMARY}\n\nFound it."},
            {"role": "user", "content": "fix it"},
        ],
    }
    assert "anthropic-beta" not in openai_request.headers

    store = open_store(url)
    session = Session.open(store, session_id)
    assert check_invariants(session.messages) == []
    back = await agent_with(claude, capability).run("and now?", session=session)
    store.close()
    assert back.output == "Back on Claude."
    body = anthropic_server.requests[1].body
    assert body["messages"][1]["content"][0] == COMPACTION_BLOCK
    assert dumped(body["messages"][1]["content"][0]) == dumped(reply["content"][0])
    assert body["messages"][2:] == [
        {"role": "user", "content": [{"type": "text", "text": "fix it"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "On OpenAI now."}]},
        {"role": "user", "content": [{"type": "text", "text": "and now?"}]},
    ]
    assert body["context_management"] == {"edits": EDITS}


async def test_a_fallback_to_openai_mid_request_sends_a_valid_request_without_the_parameters(
    anthropic_server: FakeServer, openai_server: FakeServer, claude: AnthropicModel, gpt: OpenAIModel
) -> None:
    anthropic_server.reply(message([COMPACTION_BLOCK, {"type": "text", "text": "Found it."}]))
    anthropic_server.reply(
        {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}, status=429
    )
    openai_server.reply(completion("Answered by OpenAI."))
    capabilities = [AnthropicContextManagement(**CONFIG), ModelFallback(models=[gpt], on=["rate_limit"])]
    agent = agent_with(claude, *capabilities)
    first = await agent.run("find the failing test")
    second = await agent.run("fix it", session=first.session)
    assert second.output == "Answered by OpenAI."
    refused = anthropic_server.requests[1]
    assert refused.body["context_management"] == {"edits": EDITS}
    assert refused.body["messages"][1]["content"][0] == COMPACTION_BLOCK
    [fallback] = openai_server.requests
    assert "anthropic-beta" not in fallback.headers
    assert fallback.body == {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "user", "content": "find the failing test"},
            {"role": "assistant", "content": f"{SUMMARY_PREFIX}\n{SUMMARY}\n\nFound it."},
            {"role": "user", "content": "fix it"},
        ],
    }
    stored = second.all_messages
    assert compaction_parts(stored[1]), "the stored history keeps the block; only the request changed"
    assert check_invariants(stored) == []


class AsksClaude:
    """A capability making its own model call (as a summarizer does) before the first request."""

    name = "asks_claude"

    def __init__(self, model: AnthropicModel) -> None:
        self.model = model

    @hookimpl
    async def before_model_request(self, ctx: RequestContext) -> None:
        if ctx.requests == 0:
            await ctx.request_model(self.model, [CanonicalMessage.user("summarize")], source=self.name)


@pytest.mark.parametrize("calls", ["requests", "all"])
async def test_capability_calls_get_the_parameters_only_with_calls_all(
    anthropic_server: FakeServer, claude: AnthropicModel, calls: Literal["requests", "all"]
) -> None:
    anthropic_server.reply(message([{"type": "text", "text": "a summary"}]))
    anthropic_server.reply(message([{"type": "text", "text": "the answer"}]))
    capability = AnthropicContextManagement(compaction=True, calls=calls)
    result = await agent_with(claude, AsksClaude(claude), capability).run("hi")
    assert result.output == "the answer"
    own, run = anthropic_server.requests
    assert own.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "summarize"}]}]
    assert run.body["context_management"] == {"edits": [{"type": "compact_20260112"}]}
    if calls == "all":
        assert own.body["context_management"] == run.body["context_management"]
        assert own.headers["anthropic-beta"] == "compact-2026-01-12"
    else:
        assert "context_management" not in own.body
        assert "anthropic-beta" not in own.headers
