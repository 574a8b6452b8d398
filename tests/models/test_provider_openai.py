"""OpenAIModel against a loopback server answering as the Chat Completions API reference documents."""

from __future__ import annotations

import json
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
    UserPromptPart,
)
from harness.errors import (
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelError,
    ModelRateLimitError,
    ModelTimeoutError,
    ModelUnavailableError,
)
from harness.models._mapping import PENDING_RESULT
from harness.models.openai import OpenAIModel, RetryPolicy, to_openai_messages

if TYPE_CHECKING:
    from tests.models.conftest import FakeServer, Sleeps  # pyright: ignore[reportMissingTypeStubs]

WEATHER = ToolDefinition(
    "get_weather",
    "Current weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def completion(
    message: dict[str, Any], *, finish_reason: str = "stop", usage: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A chat.completion object as the API reference shows it."""
    return {
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion",
        "created": 1741570283,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "refusal": None, "annotations": [], **message},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": usage
        or {
            "prompt_tokens": 1117,
            "completion_tokens": 46,
            "total_tokens": 1163,
            "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
        "service_tier": "default",
        "system_fingerprint": "fp_06737a9306",
    }


def text_completion(text: str) -> dict[str, Any]:
    return completion({"content": text})


def api_error(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


@pytest.fixture
async def model(fake_server: FakeServer, sleeps: Sleeps) -> AsyncIterator[OpenAIModel]:
    m = OpenAIModel(
        "gpt-4o-mini",
        api_key="sk-test-key",
        base_url=fake_server.url + "/v1",
        retry=RetryPolicy(max_retries=2, base_delay=0.25, jitter=0.0, sleep=sleeps),
        timeout=5.0,
    )
    yield m
    await m.aclose()


def user(text: str) -> CanonicalMessage:
    return CanonicalMessage.request(UserPromptPart(text))


async def test_tool_call_request_and_response(fake_server: FakeServer, model: OpenAIModel) -> None:
    fake_server.reply(
        completion(
            {
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_abc123",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            finish_reason="tool_calls",
        )
    )
    history = [CanonicalMessage.request(SystemPromptPart("Be terse."), UserPromptPart("Weather in Paris?"))]
    response = await model.request(history, [WEATHER], ModelSettings(max_tokens=300, temperature=0.2))

    [sent] = fake_server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test-key"
    assert sent.body == {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": "Weather in Paris?"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather in a city.",
                    "parameters": WEATHER.parameters_json_schema,
                },
            }
        ],
        "max_tokens": 300,  # a custom base_url sends the widely supported field
        "temperature": 0.2,
    }
    assert response.parts == (
        ToolCallPart(tool_call_id="call_abc123", tool_name="get_weather", args={"city": "Paris"}),
    )
    assert response.finish_reason == "tool_call"
    assert response.provider_name == "openai"
    assert response.provider_response_id == "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG"
    assert response.model_name == "gpt-4o-mini-2024-07-18"
    assert response.usage is not None
    assert (response.usage.request_tokens, response.usage.response_tokens) == (1117, 46)
    assert response.usage.cached_tokens == 1024


async def test_openai_itself_gets_max_completion_tokens(fake_server: FakeServer, sleeps: Sleeps) -> None:
    m = OpenAIModel("gpt-4o", api_key="k", client=None, retry=RetryPolicy(sleep=sleeps))
    assert m.max_tokens_field == "max_completion_tokens"
    body = m.request_body([user("hi")], [], ModelSettings(max_tokens=7))
    assert body["max_completion_tokens"] == 7
    assert "max_tokens" not in body


async def test_whole_history_maps_in_order(fake_server: FakeServer, model: OpenAIModel) -> None:
    fake_server.reply(text_completion("All done."))
    history = [
        CanonicalMessage.request(SystemPromptPart("sys"), UserPromptPart("start")),
        CanonicalMessage.response(
            ThoughtPart("private reasoning", provider_name="anthropic", signature="sig"),
            TextPart("Calling two tools."),
            ToolCallPart(tool_call_id="c1", tool_name="get_weather", args={"city": "Oslo"}),
            ToolCallPart(tool_call_id="c2", tool_name="get_weather", args='{"city": 3'),
        ),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="c1", tool_name="get_weather", content={"temp": 3, "sky": "snow"}),
            RetryPromptPart("city must be a string", tool_name="get_weather", tool_call_id="c2"),
        ),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="c3", tool_name="get_weather", args={"city": "Rome"})
        ),
        CanonicalMessage.request(RetryPromptPart("Please answer in French.")),
        CanonicalMessage.response(TextPart("D'accord.")),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="c3", tool_name="get_weather", content="sunny"),
            UserPromptPart("thanks"),
        ),
    ]
    response = await model.request(history, [WEATHER], ModelSettings())
    assert fake_server.bodies[0]["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "start"},
        {
            "role": "assistant",
            "content": "Calling two tools.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": 3'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 3, "sky": "snow"}'},
        {"role": "tool", "tool_call_id": "c2", "content": "city must be a string"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c3",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
                }
            ],
        },
        # c3 is answered two requests later: a placeholder keeps the API's rule, the late
        # result arrives as user text naming the call.
        {"role": "tool", "tool_call_id": "c3", "content": PENDING_RESULT},
        {"role": "user", "content": "Please answer in French."},
        {"role": "assistant", "content": "D'accord."},
        {"role": "user", "content": "[Result of tool call c3 (get_weather)]\nsunny\n\nthanks"},
    ]
    assert response.parts == (TextPart("All done."),)


async def test_invalid_json_arguments_are_kept_raw(fake_server: FakeServer, model: OpenAIModel) -> None:
    fake_server.reply(
        completion(
            {
                "content": "Let me check.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": "{city:"},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    },
                ],
            },
            finish_reason="tool_calls",
        )
    )
    response = await model.request([user("go")], [WEATHER], ModelSettings())
    assert response.parts == (
        TextPart("Let me check."),
        ToolCallPart(tool_call_id="call_1", tool_name="get_weather", args="{city:"),
        ToolCallPart(tool_call_id="call_2", tool_name="get_weather", args={}),
    )


async def test_reasoning_content_becomes_thinking(fake_server: FakeServer, model: OpenAIModel) -> None:
    fake_server.reply(
        completion(
            {"content": "42", "reasoning_content": "6 times 7"},
            usage={
                "prompt_tokens": 10,
                "completion_tokens": 30,
                "total_tokens": 40,
                "completion_tokens_details": {"reasoning_tokens": 25},
            },
        )
    )
    response = await model.request([user("6*7?")], [], ModelSettings())
    assert response.parts == (ThoughtPart("6 times 7", provider_name="openai"), TextPart("42"))
    assert response.usage is not None
    assert response.usage.extra["reasoning_tokens"] == 25
    assert response.usage.cached_tokens == 0


async def test_settings_extra_reach_body_and_headers(fake_server: FakeServer, model: OpenAIModel) -> None:
    fake_server.reply(text_completion("ok"))
    settings = ModelSettings(extra={"top_p": 0.5, "seed": 7, "extra_headers": {"x-trace": "abc"}})
    await model.request([user("hi")], [], settings)
    [sent] = fake_server.requests
    assert sent.body["top_p"] == 0.5
    assert sent.body["seed"] == 7
    assert "extra_headers" not in sent.body
    assert sent.headers["x-trace"] == "abc"
    assert "tools" not in sent.body


async def test_rate_limit_retried_after_retry_after(
    fake_server: FakeServer, model: OpenAIModel, sleeps: Sleeps
) -> None:
    fake_server.reply(
        api_error("Rate limit reached for gpt-4o-mini", "requests", "rate_limit_exceeded"),
        status=429,
        headers={"retry-after": "0.01"},
    )
    fake_server.reply(
        api_error("Rate limit reached for gpt-4o-mini", "tokens", "rate_limit_exceeded"),
        status=429,
        headers={"retry-after-ms": "20"},
    )
    fake_server.reply(text_completion("finally"))
    response = await model.request([user("hi")], [], ModelSettings())
    assert response.parts == (TextPart("finally"),)
    assert len(fake_server.requests) == 3
    assert fake_server.bodies[0] == fake_server.bodies[2]  # the same request is re-sent
    assert sleeps.delays == [pytest.approx(0.01), pytest.approx(0.02)]


async def test_rate_limit_gives_up_with_typed_error(
    fake_server: FakeServer, model: OpenAIModel, sleeps: Sleeps
) -> None:
    for _ in range(3):
        fake_server.reply(api_error("Rate limit reached", "requests", "rate_limit_exceeded"), status=429)
    with pytest.raises(ModelRateLimitError) as info:
        await model.request([user("hi")], [], ModelSettings())
    error = info.value
    assert (error.provider, error.status_code, error.attempts) == ("openai", 429, 3)
    assert error.provider_message == "Rate limit reached"
    assert "Rate limit reached" in str(error)
    assert len(fake_server.requests) == 3
    assert sleeps.delays == [0.25, 0.5]  # exponential backoff without retry-after


async def test_too_long_retry_after_fails_at_once(fake_server: FakeServer, sleeps: Sleeps) -> None:
    async with OpenAIModel(
        "gpt-4o-mini",
        api_key="k",
        base_url=fake_server.url + "/v1",
        retry=RetryPolicy(max_retry_after=5, sleep=sleeps),
    ) as m:
        fake_server.reply(api_error("slow down", "requests"), status=429, headers={"retry-after": "3600"})
        with pytest.raises(ModelRateLimitError):
            await m.request([user("hi")], [], ModelSettings())
    assert len(fake_server.requests) == 1
    assert sleeps.delays == []


async def test_server_errors_retried_then_succeed(
    fake_server: FakeServer, model: OpenAIModel, sleeps: Sleeps
) -> None:
    fake_server.reply(
        api_error("The server had an error while processing your request.", "server_error"), status=500
    )
    fake_server.reply({"error": {"message": "Bad gateway", "type": "server_error"}}, status=502)
    fake_server.reply(text_completion("recovered"))
    response = await model.request([user("hi")], [], ModelSettings())
    assert response.parts == (TextPart("recovered"),)
    assert len(fake_server.requests) == 3
    assert sleeps.delays == [0.25, 0.5]


async def test_server_errors_exhaust_retries(fake_server: FakeServer, model: OpenAIModel) -> None:
    for _ in range(3):
        fake_server.reply(api_error("The server had an error", "server_error"), status=500)
    with pytest.raises(ModelUnavailableError) as info:
        await model.request([user("hi")], [], ModelSettings())
    assert info.value.status_code == 500
    assert info.value.provider_message == "The server had an error"
    assert isinstance(info.value, ModelError)


async def test_authentication_error_is_never_retried(fake_server: FakeServer, model: OpenAIModel) -> None:
    fake_server.reply(
        api_error("Incorrect API key provided: sk-test-key.", "invalid_request_error", "invalid_api_key"),
        status=401,
    )
    with pytest.raises(ModelAuthenticationError) as info:
        await model.request([user("hi")], [], ModelSettings())
    assert info.value.status_code == 401
    assert info.value.provider_message == "Incorrect API key provided: sk-test-key."
    assert len(fake_server.requests) == 1


async def test_bad_request_is_never_retried(fake_server: FakeServer, model: OpenAIModel) -> None:
    message = (
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
        "with 'tool_calls'."
    )
    fake_server.reply(api_error(message, "invalid_request_error"), status=400)
    with pytest.raises(ModelBadRequestError) as info:
        await model.request([user("hi")], [], ModelSettings())
    assert info.value.status_code == 400
    assert info.value.provider_message == message
    assert len(fake_server.requests) == 1


async def test_timeouts_are_retried_then_typed(fake_server: FakeServer, sleeps: Sleeps) -> None:
    async with OpenAIModel(
        "gpt-4o-mini",
        api_key="k",
        base_url=fake_server.url + "/v1",
        retry=RetryPolicy(max_retries=1, base_delay=0.0, sleep=sleeps),
    ) as m:
        fake_server.reply(text_completion("late"), delay=0.6)
        fake_server.reply(text_completion("late again"), delay=0.6)
        with pytest.raises(ModelTimeoutError) as info:
            await m.request([user("hi")], [], ModelSettings(timeout=0.1))
    assert info.value.attempts == 2
    assert info.value.status_code is None
    assert len(fake_server.requests) == 2


async def test_missing_api_key_is_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    m = OpenAIModel("gpt-4o-mini")
    with pytest.raises(ModelAuthenticationError, match="OPENAI_API_KEY"):
        await m.request([user("hi")], [], ModelSettings())


async def test_local_server_needs_no_key(fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fake_server.reply(text_completion("hello from llama"))
    async with OpenAIModel("llama3.2", base_url=fake_server.url + "/v1", provider_name="ollama") as m:
        response = await m.request([user("hi")], [], ModelSettings())
    assert response.provider_name == "ollama"
    assert fake_server.requests[0].headers["authorization"] == "Bearer none"
    assert m.context_window is None  # local windows depend on the server: pass context_window=


async def test_agent_runs_a_tool_loop_over_http(fake_server: FakeServer, model: OpenAIModel) -> None:
    def get_weather(city: str) -> str:
        """Current weather in a city."""
        return f"{city}: 21C"

    fake_server.reply(
        completion(
            {
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_w",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": json.dumps({"city": "Lyon"})},
                    }
                ],
            },
            finish_reason="tool_calls",
        )
    )
    fake_server.reply(text_completion("It is 21C in Lyon."))
    agent = Agent(model, tools=[get_weather], system_prompt="You report weather.")
    result = await agent.run("Weather in Lyon?")
    assert result.output == "It is 21C in Lyon."
    second = fake_server.bodies[1]["messages"]
    assert second[0] == {"role": "system", "content": "You report weather."}
    assert second[-1] == {"role": "tool", "tool_call_id": "call_w", "content": "Lyon: 21C"}
    assert second[-2]["tool_calls"][0]["id"] == "call_w"
    assert result.usage.request_tokens == 2 * 1117


def test_developer_role_and_instructions() -> None:
    history = [
        CanonicalMessage.request(UserPromptPart("a"), instructions="old"),
        CanonicalMessage.response(TextPart("b")),
        CanonicalMessage.request(UserPromptPart("c"), instructions="new"),
    ]
    mapped = to_openai_messages(history, system_role="developer")
    assert mapped[0] == {"role": "developer", "content": "new"}


def test_images_and_content_lists() -> None:
    history = [
        CanonicalMessage.request(
            UserPromptPart(("look", {"kind": "image-url", "url": "https://x/img.png"})),
            UserPromptPart(("and", {"kind": "binary", "data": "QUJD", "media_type": "image/png"}, {"n": 1})),
        )
    ]
    assert to_openai_messages(history) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "https://x/img.png"}},
                {"type": "text", "text": "and"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}},
                {"type": "text", "text": '{"n": 1}'},
            ],
        }
    ]


def test_thinking_only_response_is_skipped_and_neighbours_merge() -> None:
    history = [
        user("one"),
        CanonicalMessage.response(ThoughtPart("hmm")),
        user("two"),
    ]
    assert to_openai_messages(history) == [{"role": "user", "content": "one\n\ntwo"}]


async def test_connection_errors_are_retried_then_typed(sleeps: Sleeps) -> None:
    import socket

    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with OpenAIModel(
        "gpt-4o-mini",
        api_key="k",
        base_url=f"http://127.0.0.1:{port}/v1",
        retry=RetryPolicy(max_retries=2, base_delay=0.0, jitter=0.0, sleep=sleeps),
    ) as m:
        with pytest.raises(ModelUnavailableError) as info:
            await m.request([user("hi")], [], ModelSettings())
    assert info.value.status_code is None
    assert info.value.attempts == 3
    assert sleeps.delays == [0.0, 0.0]


def test_model_error_is_public_and_a_harness_error() -> None:
    import harness

    assert harness.ModelError is ModelError
    assert "ModelError" in harness.__all__
    error = ModelRateLimitError("openai", "slow down", status_code=429, model_name="gpt-4o", attempts=5)
    assert isinstance(error, harness.HarnessError)
    assert str(error) == "openai model 'gpt-4o' (HTTP 429) after 5 attempts: slow down"
