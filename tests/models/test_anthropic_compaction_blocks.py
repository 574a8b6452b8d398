"""AnthropicModel and server-side context management: compaction blocks and applied edits, no plugin.

The loopback server answers as the Messages API does with ``context_management`` on:
``compaction`` blocks in the content (streamed as ``content_block_start`` plus one
``compaction_delta``), ``context_management.applied_edits`` on the message (on
``message_delta`` when streamed), and ``stop_reason: "compaction"`` for a paused compaction.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest

from harness import dump_messages, load_messages
from harness.core import CanonicalMessage, ModelSettings, ResponseDone, UnknownPart, UserPromptPart
from harness.models.anthropic import COMPACTION_KIND, AnthropicModel, RetryPolicy, to_anthropic_messages
from tests.models.conftest import Stream, sse  # pyright: ignore[reportMissingTypeStubs]

if TYPE_CHECKING:
    from tests.models.conftest import FakeServer  # pyright: ignore[reportMissingTypeStubs]

BLOCK: dict[str, Any] = {
    "type": "compaction",
    "content": "Summary: the user wants test_login fixed (KeyError: 'token' in src/app.py).",
    "encrypted_content": "EqoBCkgIBxABGAIiQL7X+opaque==",
    "signature": "sig_7Hq2mN0pQ",
}
APPLIED = {
    "applied_edits": [
        {"type": "clear_thinking_20251015", "cleared_thinking_turns": 2, "cleared_input_tokens": 900}
    ]
}


def message(content: list[dict[str, Any]], *, stop_reason: str = "end_turn") -> dict[str, Any]:
    return {
        "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 2095, "output_tokens": 503},
        "context_management": APPLIED,
    }


@pytest.fixture
async def model(fake_server: FakeServer) -> AsyncIterator[AnthropicModel]:
    m = AnthropicModel(
        "claude-sonnet-4-6", api_key="sk-ant-test", base_url=fake_server.url, retry=RetryPolicy(max_retries=0)
    )
    yield m
    await m.aclose()


def user(text: str) -> CanonicalMessage:
    return CanonicalMessage.request(UserPromptPart(text))


async def test_a_compaction_block_is_kept_whole_and_sent_back_in_place(
    fake_server: FakeServer, model: AnthropicModel
) -> None:
    server_tool = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"q": "x"}}
    fake_server.reply(message([BLOCK, server_tool, {"type": "text", "text": "Found it."}]))
    response = await model.request([user("go")], [], ModelSettings())
    assert response.parts[0] == UnknownPart(COMPACTION_KIND, data={**BLOCK, "part_kind": COMPACTION_KIND})
    assert response.extra["provider_details"] == {"finish_reason": "end_turn", "context_management": APPLIED}
    history = load_messages(dump_messages([user("go"), response, user("more")]))
    assert history[1].parts[0] == response.parts[0], "the block loads back equal"
    turns = to_anthropic_messages(history).messages
    assert turns[1] == {"role": "assistant", "content": [BLOCK, {"type": "text", "text": "Found it."}]}
    assert list(turns[1]["content"][0]) == list(BLOCK), "the keys in the order they came"


async def test_a_paused_compaction_maps_to_stop_and_keeps_the_raw_reason(
    fake_server: FakeServer, model: AnthropicModel
) -> None:
    fake_server.reply(message([BLOCK], stop_reason="compaction"))
    response = await model.request([user("go")], [], ModelSettings())
    assert response.finish_reason == "stop"
    assert response.extra["provider_details"]["finish_reason"] == "compaction"
    assert [p.part_kind for p in response.parts] == [COMPACTION_KIND]


def event(data: dict[str, Any]) -> str:
    return sse(data, data["type"])


async def test_a_streamed_compaction_block_adds_up_to_the_plain_one(
    fake_server: FakeServer, model: AnthropicModel
) -> None:
    start = {**message([]), "stop_reason": None, "usage": {"input_tokens": 2095, "output_tokens": 1}}
    del start["context_management"]
    opening = {"type": "compaction", "content": None, "signature": BLOCK["signature"]}
    compaction = {
        "type": "compaction_delta",
        "content": BLOCK["content"],
        "encrypted_content": BLOCK["encrypted_content"],
    }
    events = [
        event({"type": "message_start", "message": start}),
        event({"type": "content_block_start", "index": 0, "content_block": opening}),
        event({"type": "content_block_delta", "index": 0, "delta": compaction}),
        event({"type": "content_block_stop", "index": 0}),
        event({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        event(
            {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Found it."}}
        ),
        event({"type": "content_block_stop", "index": 1}),
        event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 503},
                "context_management": APPLIED,
            }
        ),
        event({"type": "message_stop"}),
    ]
    fake_server.reply(Stream(events))
    items = [item async for item in model.request_stream([user("go")], [], ModelSettings())]
    done = items[-1]
    assert isinstance(done, ResponseDone)
    streamed = done.message
    [part] = [p for p in streamed.parts if isinstance(p, UnknownPart)]
    assert dict(part.data) == {**BLOCK, "part_kind": COMPACTION_KIND}
    assert streamed.extra["provider_details"] == {"finish_reason": "end_turn", "context_management": APPLIED}
    assert [type(i).__name__ for i in items[:-1]] == ["TextDelta"], "a compaction block yields no delta"
    turns = to_anthropic_messages([user("go"), streamed, user("more")]).messages
    assert turns[1]["content"][0] == BLOCK
