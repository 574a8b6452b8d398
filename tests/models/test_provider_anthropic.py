"""AnthropicModel against a loopback server answering as the Messages API reference documents."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest

from harness import Agent
from harness.core import (
    CanonicalMessage,
    ModelSettings,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolDefinition,
    ToolReturnPart,
    UnknownPart,
    UserPromptPart,
)
from harness.errors import (
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelRateLimitError,
    ModelUnavailableError,
)
from harness.models.anthropic import (
    CONTINUATION_TEXT,
    DEFAULT_MAX_TOKENS,
    AnthropicModel,
    RetryPolicy,
    anthropic_tool_id,
    to_anthropic_messages,
)

if TYPE_CHECKING:
    from tests.models.conftest import FakeServer, Sleeps  # pyright: ignore[reportMissingTypeStubs]

WEATHER = ToolDefinition(
    "get_weather",
    "Current weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"


def message(
    content: list[dict[str, Any]], *, stop_reason: str = "end_turn", usage: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A Message object as the API reference shows it."""
    return {
        "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage
        or {
            "input_tokens": 2095,
            "output_tokens": 503,
            "cache_creation_input_tokens": 1000,
            "cache_read_input_tokens": 5000,
        },
    }


def text_message(text: str) -> dict[str, Any]:
    return message([{"type": "text", "text": text}])


def api_error(kind: str, text: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": kind, "message": text},
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
    }


@pytest.fixture
async def model(fake_server: FakeServer, sleeps: Sleeps) -> AsyncIterator[AnthropicModel]:
    m = AnthropicModel(
        "claude-sonnet-4-6",
        api_key="sk-ant-test",
        base_url=fake_server.url,
        retry=RetryPolicy(max_retries=2, base_delay=0.25, jitter=0.0, sleep=sleeps),
        timeout=5.0,
    )
    yield m
    await m.aclose()


def user(text: str) -> CanonicalMessage:
    return CanonicalMessage.request(UserPromptPart(text))


async def test_thinking_and_tool_use_response(fake_server: FakeServer, model: AnthropicModel) -> None:
    fake_server.reply(
        message(
            [
                {"type": "thinking", "thinking": "The user wants Paris weather.", "signature": SIGNATURE},
                {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "toolu_01A09q90qw90lq917835lq9",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
            ],
            stop_reason="tool_use",
        )
    )
    history = [CanonicalMessage.request(SystemPromptPart("Be terse."), UserPromptPart("Weather in Paris?"))]
    response = await model.request(history, [WEATHER], ModelSettings(temperature=0.5))

    [sent] = fake_server.requests
    assert sent.path == "/v1/messages"
    # The key travels as x-api-key or as a bearer token, depending on the SDK version.
    assert "sk-ant-test" in (
        sent.headers.get("x-api-key"),
        sent.headers.get("authorization", "").removeprefix("Bearer "),
    )
    assert "anthropic-version" in sent.headers
    assert sent.body == {
        "model": "claude-sonnet-4-6",
        "max_tokens": DEFAULT_MAX_TOKENS,
        "system": "Be terse.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]}],
        "tools": [
            {
                "name": "get_weather",
                "description": "Current weather in a city.",
                "input_schema": WEATHER.parameters_json_schema,
            }
        ],
        "temperature": 0.5,
    }
    assert response.parts == (
        ThoughtPart("The user wants Paris weather.", signature=SIGNATURE, provider_name="anthropic"),
        ThoughtPart(
            "",
            signature="EmwKAhgBEgy3va3pzix/LafPsn4a",
            provider_name="anthropic",
            extra={"id": "redacted_thinking"},
        ),
        TextPart("Checking."),
        ToolCallPart(
            tool_call_id="toolu_01A09q90qw90lq917835lq9", tool_name="get_weather", args={"city": "Paris"}
        ),
    )
    assert response.finish_reason == "tool_call"
    assert response.extra["provider_details"] == {"finish_reason": "tool_use"}
    assert response.provider_response_id == "msg_013Zva2CMHLNnXjNJJKqJ2EF"
    assert response.model_name == "claude-sonnet-4-6"
    usage = response.usage
    assert usage is not None
    # Anthropic's input_tokens excludes cache reads and writes.
    assert (usage.request_tokens, usage.response_tokens) == (2095 + 1000 + 5000, 503)
    assert (usage.cached_tokens, usage.cache_write_tokens) == (5000, 1000)


async def test_thinking_goes_back_verbatim_with_tool_results(
    fake_server: FakeServer, model: AnthropicModel
) -> None:
    fake_server.reply(text_message("It is sunny."))
    history = [
        user("Weather in Paris?"),
        CanonicalMessage.response(
            ThoughtPart("The user wants Paris weather.", signature=SIGNATURE, provider_name="anthropic"),
            ThoughtPart(
                "", signature="REDACTED", provider_name="anthropic", extra={"id": "redacted_thinking"}
            ),
            ThoughtPart("foreign thoughts", provider_name="openai"),
            TextPart("   "),
            ToolCallPart(tool_call_id="toolu_1", tool_name="get_weather", args={"city": "Paris"}),
            ToolCallPart(tool_call_id="toolu_2", tool_name="get_weather", args='{"city": "Nice"}'),
        ),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="toolu_2", tool_name="get_weather", content={"sky": "clear"}),
            RetryPromptPart("unknown city", tool_name="get_weather", tool_call_id="toolu_1"),
            UserPromptPart("Be quick."),
        ),
    ]
    response = await model.request(history, [WEATHER], ModelSettings(max_tokens=1000))
    body = fake_server.bodies[0]
    assert body["max_tokens"] == 1000
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "The user wants Paris weather.", "signature": SIGNATURE},
                {"type": "redacted_thinking", "data": "REDACTED"},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Nice"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "unknown city",
                    "is_error": True,
                },
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": '{"sky": "clear"}'},
                {"type": "text", "text": "Be quick."},
            ],
        },
    ]
    assert response.parts == (TextPart("It is sunny."),)


async def test_prompt_caching_marks_system_tools_and_last_user_turn(fake_server: FakeServer) -> None:
    fake_server.reply(text_message("ok"))
    async with AnthropicModel(
        "claude-haiku-4-5", api_key="k", base_url=fake_server.url, prompt_caching=True
    ) as m:
        history = [
            CanonicalMessage.request(SystemPromptPart("long system prompt"), UserPromptPart("q1")),
            CanonicalMessage.response(TextPart("a1")),
            user("q2"),
        ]
        await m.request(history, [WEATHER], ModelSettings())
    body = fake_server.bodies[0]
    cache = {"type": "ephemeral"}
    assert body["system"] == [{"type": "text", "text": "long system prompt", "cache_control": cache}]
    assert body["tools"][-1]["cache_control"] == cache
    assert body["messages"][-1]["content"] == [{"type": "text", "text": "q2", "cache_control": cache}]
    assert "cache_control" not in body["messages"][0]["content"][0]


async def test_unknown_blocks_are_kept_and_not_sent_back(
    fake_server: FakeServer, model: AnthropicModel
) -> None:
    server_block = {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "web_search",
        "input": {"query": "x"},
    }
    fake_server.reply(message([server_block, {"type": "text", "text": "found"}]))
    response = await model.request([user("search")], [], ModelSettings())
    assert response.parts[0] == UnknownPart("anthropic-server_tool_use", data=server_block)
    mapped = to_anthropic_messages([user("search"), response, user("more")])
    assert mapped.messages[1] == {"role": "assistant", "content": [{"type": "text", "text": "found"}]}


async def test_overloaded_and_rate_limit_are_retried(
    fake_server: FakeServer, model: AnthropicModel, sleeps: Sleeps
) -> None:
    fake_server.reply(api_error("overloaded_error", "Overloaded"), status=529)
    fake_server.reply(
        api_error("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
        status=429,
        headers={"retry-after": "0.01"},
    )
    fake_server.reply(text_message("done"))
    response = await model.request([user("hi")], [], ModelSettings())
    assert response.parts == (TextPart("done"),)
    assert len(fake_server.requests) == 3
    assert sleeps.delays == [0.25, pytest.approx(0.01)]


async def test_rate_limit_exhausted(fake_server: FakeServer, model: AnthropicModel) -> None:
    for _ in range(3):
        fake_server.reply(
            api_error("rate_limit_error", "Too many requests"), status=429, headers={"retry-after": "0"}
        )
    with pytest.raises(ModelRateLimitError) as info:
        await model.request([user("hi")], [], ModelSettings())
    assert (info.value.provider, info.value.status_code, info.value.attempts) == ("anthropic", 429, 3)
    assert info.value.provider_message == "Too many requests"


async def test_server_error_exhausted(fake_server: FakeServer, model: AnthropicModel) -> None:
    for _ in range(3):
        fake_server.reply(api_error("api_error", "Internal server error"), status=500)
    with pytest.raises(ModelUnavailableError, match="Internal server error"):
        await model.request([user("hi")], [], ModelSettings())
    assert len(fake_server.requests) == 3


async def test_authentication_error_not_retried(fake_server: FakeServer, model: AnthropicModel) -> None:
    fake_server.reply(api_error("authentication_error", "invalid x-api-key"), status=401)
    with pytest.raises(ModelAuthenticationError) as info:
        await model.request([user("hi")], [], ModelSettings())
    assert info.value.provider_message == "invalid x-api-key"
    assert len(fake_server.requests) == 1


async def test_bad_request_not_retried(fake_server: FakeServer, model: AnthropicModel) -> None:
    text = "messages.1.content.0: unexpected `tool_use_id` found in `tool_result` blocks"
    fake_server.reply(api_error("invalid_request_error", text), status=400)
    with pytest.raises(ModelBadRequestError) as info:
        await model.request([user("hi")], [], ModelSettings())
    assert info.value.provider_message == text
    assert info.value.status_code == 400
    assert len(fake_server.requests) == 1


async def test_missing_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    with pytest.raises(ModelAuthenticationError, match="ANTHROPIC_API_KEY"):
        await AnthropicModel("claude-sonnet-4-6").request([user("hi")], [], ModelSettings())


async def test_agent_tool_loop_over_http(fake_server: FakeServer, model: AnthropicModel) -> None:
    def get_weather(city: str) -> str:
        """Current weather in a city."""
        return f"{city}: 18C"

    fake_server.reply(
        message(
            [
                {"type": "thinking", "thinking": "call the tool", "signature": SIGNATURE},
                {"type": "tool_use", "id": "toolu_w", "name": "get_weather", "input": {"city": "Bern"}},
            ],
            stop_reason="tool_use",
        )
    )
    fake_server.reply(text_message("18C in Bern."))
    result = await Agent(model, tools=[get_weather], system_prompt="Weather bot.").run("Bern?")
    assert result.output == "18C in Bern."
    second = fake_server.bodies[1]
    assert second["system"] == "Weather bot."
    assert second["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "call the tool",
        "signature": SIGNATURE,
    }
    assert second["messages"][2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_w", "content": "Bern: 18C"}],
    }


def test_invalid_tool_ids_are_rewritten_consistently() -> None:
    history = [
        user("go"),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="call~2", tool_name="t", args={}),
            ToolCallPart(tool_call_id="call.2", tool_name="t", args={}),
        ),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="call~2", tool_name="t", content="a"),
            ToolReturnPart(tool_call_id="call.2", tool_name="t", content="b"),
        ),
    ]
    mapped = to_anthropic_messages(history).messages
    first, second = (block["id"] for block in mapped[1]["content"])
    assert first != second
    assert first == anthropic_tool_id("call~2")
    assert first.startswith("call_2_")
    assert [b["tool_use_id"] for b in mapped[2]["content"]] == [first, second]
    assert anthropic_tool_id("toolu_ok-1") == "toolu_ok-1"


def test_history_starting_with_a_response_gets_a_user_turn() -> None:
    history = [CanonicalMessage.response(TextPart("earlier answer")), user("next")]
    mapped = to_anthropic_messages(history).messages
    assert mapped[0] == {"role": "user", "content": [{"type": "text", "text": CONTINUATION_TEXT}]}
    assert [turn["role"] for turn in mapped] == ["user", "assistant", "user"]


def test_images_map_to_image_blocks() -> None:
    history = [
        CanonicalMessage.request(
            UserPromptPart(
                (
                    "see",
                    {"kind": "image-url", "url": "https://x/a.png"},
                    {"kind": "binary", "data": "QUJD", "media_type": "image/jpeg"},
                )
            )
        )
    ]
    assert to_anthropic_messages(history).messages[0]["content"] == [
        {"type": "text", "text": "see"},
        {"type": "image", "source": {"type": "url", "url": "https://x/a.png"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "QUJD"}},
    ]
