"""Context-window refusals become ModelContextLengthError, on both real SDKs, against a loopback server.

The error bodies are the providers' own: OpenAI answers HTTP 400 with
``code: "context_length_exceeded"``; Anthropic answers HTTP 400 ``invalid_request_error``
saying "prompt is too long" (or that input and ``max_tokens`` "exceed context limit"), and
HTTP 413 ``request_too_large`` for a request too big to take at all.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from harness import Agent
from harness.core import CanonicalMessage, ModelSettings, UserPromptPart
from harness.core.streaming import collect_stream
from harness.errors import ModelBadRequestError, ModelContextLengthError, ModelError
from harness.models.anthropic import AnthropicModel
from harness.models.anthropic import RetryPolicy as AnthropicRetry
from harness.models.openai import OpenAIModel, RetryPolicy
from harness.session import Session
from tests.models.conftest import FakeServer, Sleeps  # pyright: ignore[reportMissingTypeStubs]

OPENAI_TOO_LONG = (
    "This model's maximum context length is 128000 tokens. However, your messages resulted in "
    "130542 tokens. Please reduce the length of the messages."
)
OPENAI_WINDOW = "Your input exceeds the context window of this model. Please adjust your input and try again."
ANTHROPIC_TOO_LONG = "prompt is too long: 215763 tokens > 200000 maximum"
ANTHROPIC_LIMIT = (
    "input length and `max_tokens` exceed context limit: 197432 + 8192 > 200000, decrease input "
    "length or `max_tokens` and try again"
)
ANTHROPIC_TOO_LARGE = "Request exceeds the maximum allowed number of bytes."


def openai_error(message: str, code: str | None, param: str | None = "messages") -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def anthropic_error(kind: str, message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": "req_011CSHoEeqs5C35K",
    }


def user(text: str) -> CanonicalMessage:
    return CanonicalMessage.request(UserPromptPart(text))


@pytest.fixture
async def openai_model(fake_server: FakeServer, sleeps: Sleeps) -> AsyncIterator[OpenAIModel]:
    model = OpenAIModel(
        "gpt-4o-mini",
        api_key="sk-test-key",
        base_url=fake_server.url + "/v1",
        retry=RetryPolicy(max_retries=3, base_delay=0.0, jitter=0.0, sleep=sleeps),
        timeout=5.0,
    )
    yield model
    await model.aclose()


@pytest.fixture
async def anthropic_model(fake_server: FakeServer, sleeps: Sleeps) -> AsyncIterator[AnthropicModel]:
    model = AnthropicModel(
        "claude-sonnet-4-6",
        api_key="sk-ant-test",
        base_url=fake_server.url,
        retry=AnthropicRetry(max_retries=3, base_delay=0.0, jitter=0.0, sleep=sleeps),
        timeout=5.0,
    )
    yield model
    await model.aclose()


@pytest.mark.parametrize("message", [OPENAI_TOO_LONG, OPENAI_WINDOW])
async def test_openai_context_length_exceeded_is_typed_and_not_retried(
    fake_server: FakeServer, openai_model: OpenAIModel, sleeps: Sleeps, message: str
) -> None:
    fake_server.reply(openai_error(message, "context_length_exceeded"), status=400)
    with pytest.raises(ModelContextLengthError) as info:
        await openai_model.request([user("a very long prompt")], [], ModelSettings())
    error = info.value
    assert isinstance(error, ModelBadRequestError)  # code catching bad requests keeps working
    assert (error.provider, error.status_code, error.provider_message) == ("openai", 400, message)
    assert error.model_name == "gpt-4o-mini"
    assert len(fake_server.requests) == 1
    assert sleeps.delays == []


async def test_openai_code_alone_is_enough(fake_server: FakeServer, openai_model: OpenAIModel) -> None:
    """The code decides even when the message words it differently."""
    fake_server.reply(openai_error("Too many tokens in the request.", "context_length_exceeded"), status=400)
    with pytest.raises(ModelContextLengthError):
        await openai_model.request([user("hi")], [], ModelSettings())


async def test_openai_other_bad_requests_stay_bad_requests(
    fake_server: FakeServer, openai_model: OpenAIModel
) -> None:
    message = "Invalid value for 'temperature': must be between 0 and 2."
    fake_server.reply(openai_error(message, "invalid_value", "temperature"), status=400)
    with pytest.raises(ModelBadRequestError) as info:
        await openai_model.request([user("hi")], [], ModelSettings())
    assert type(info.value) is ModelBadRequestError
    assert info.value.provider_message == message


@pytest.mark.parametrize("message", [ANTHROPIC_TOO_LONG, ANTHROPIC_LIMIT])
async def test_anthropic_prompt_too_long_is_typed_and_not_retried(
    fake_server: FakeServer, anthropic_model: AnthropicModel, sleeps: Sleeps, message: str
) -> None:
    fake_server.reply(anthropic_error("invalid_request_error", message), status=400)
    with pytest.raises(ModelContextLengthError) as info:
        await anthropic_model.request([user("a very long prompt")], [], ModelSettings())
    error = info.value
    assert (error.provider, error.status_code, error.provider_message) == ("anthropic", 400, message)
    assert len(fake_server.requests) == 1
    assert sleeps.delays == []


async def test_anthropic_request_too_large_413_is_a_context_length_error(
    fake_server: FakeServer, anthropic_model: AnthropicModel
) -> None:
    fake_server.reply(anthropic_error("request_too_large", ANTHROPIC_TOO_LARGE), status=413)
    with pytest.raises(ModelContextLengthError) as info:
        await anthropic_model.request([user("huge")], [], ModelSettings())
    assert info.value.status_code == 413
    assert info.value.provider_message == ANTHROPIC_TOO_LARGE
    assert len(fake_server.requests) == 1


async def test_anthropic_other_bad_requests_stay_bad_requests(
    fake_server: FakeServer, anthropic_model: AnthropicModel
) -> None:
    message = (
        "max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for "
        "claude-sonnet-4-6"
    )
    fake_server.reply(anthropic_error("invalid_request_error", message), status=400)
    with pytest.raises(ModelBadRequestError) as info:
        await anthropic_model.request([user("hi")], [], ModelSettings())
    assert type(info.value) is ModelBadRequestError


async def test_a_context_window_message_on_another_status_is_not_a_context_length_error(
    fake_server: FakeServer, anthropic_model: AnthropicModel
) -> None:
    """Only a 400 (or 413) says the request is too long; a 404 naming the window is not one."""
    fake_server.reply(
        anthropic_error("not_found_error", "model with a 1M context window: not found"), status=404
    )
    with pytest.raises(ModelBadRequestError) as info:
        await anthropic_model.request([user("hi")], [], ModelSettings())
    assert type(info.value) is ModelBadRequestError


async def test_streamed_requests_map_the_refusal_too(
    fake_server: FakeServer, openai_model: OpenAIModel, anthropic_model: AnthropicModel
) -> None:
    """The refusal comes as an HTTP error before any event, so a stream raises it the same way."""
    fake_server.reply(openai_error(OPENAI_TOO_LONG, "context_length_exceeded"), status=400)
    with pytest.raises(ModelContextLengthError):
        await collect_stream(openai_model, [user("long")], [], ModelSettings(), None)
    fake_server.reply(anthropic_error("invalid_request_error", ANTHROPIC_TOO_LONG), status=400)
    with pytest.raises(ModelContextLengthError):
        await collect_stream(anthropic_model, [user("long")], [], ModelSettings(), None)
    assert len(fake_server.requests) == 2


async def test_a_run_ends_with_the_typed_error_after_saving(
    fake_server: FakeServer, anthropic_model: AnthropicModel
) -> None:
    fake_server.reply(anthropic_error("invalid_request_error", ANTHROPIC_TOO_LONG), status=400)
    session = Session()
    with pytest.raises(ModelContextLengthError) as info:
        await Agent(anthropic_model).run("hello", session=session)
    assert isinstance(info.value, ModelError)
    assert [m.kind for m in session.messages] == ["request"]  # the prompt was kept
