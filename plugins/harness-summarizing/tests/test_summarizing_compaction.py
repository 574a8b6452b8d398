"""SummarizingCompaction's layout, incremental behaviour and model summarizer."""

from __future__ import annotations

from harness_summarizing import (
    DEFAULT_INSTRUCTIONS,
    StructuralDigest,
    SummarizingCompaction,
    Summary,
    SummaryRequest,
    find_summary_parts,
    summary_text,
)

from harness.capabilities import RequestContext
from harness.core import (
    CanonicalMessage,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    Usage,
    UserPromptPart,
    harness_mark,
)
from harness.history import check_invariants
from harness.models.function import FunctionInfo, FunctionModel
from harness.tokens import TokenCounter

TASK = "Refactor module {core} and keep {{braces}} intact"


def step(i: int) -> list[CanonicalMessage]:
    return [
        CanonicalMessage.response(
            TextPart(f"reading {i}"),
            ToolCallPart(tool_call_id=f"c{i}", tool_name="read_file", args={"path": f"f{i}.py"}),
        ),
        CanonicalMessage.request(
            ToolReturnPart(
                tool_call_id=f"c{i}", tool_name="read_file", content=f"content {{of}} file {i} " + "x" * 50
            )
        ),
    ]


def history(steps: int, *, system: bool = True) -> list[CanonicalMessage]:
    first = [SystemPromptPart("You are a careful agent.")] if system else []
    messages = [CanonicalMessage.request(*first, UserPromptPart(TASK))]
    for i in range(steps):
        messages += step(i)
    return messages


def ctx_for(messages: list[CanonicalMessage], model: object = None) -> RequestContext:
    return RequestContext(messages=messages, token_counter=TokenCounter(), model=model)  # pyright: ignore[reportArgumentType]


def user_texts(messages: list[CanonicalMessage]) -> list[str]:
    return [
        p.text for m in messages for p in m.parts if isinstance(p, UserPromptPart) and harness_mark(p) is None
    ]


def system_count(messages: list[CanonicalMessage]) -> int:
    return sum(isinstance(p, SystemPromptPart) for m in messages for p in m.parts)


async def test_layout_after_first_compaction() -> None:
    messages = history(10)
    last = messages[-1]
    ctx = ctx_for(messages)
    await SummarizingCompaction(keep_messages=4).compact(ctx)
    out = ctx.messages
    # [request: system, task, summary] + response + request + response + request(last)
    assert [m.kind for m in out] == ["request", "response", "request", "response", "request"]
    head = out[0].parts
    assert isinstance(head[0], SystemPromptPart)
    assert isinstance(head[1], UserPromptPart)
    assert head[1].text == TASK
    assert find_summary_parts(out) == [(0, 2)]
    assert out[-1] is last
    assert check_invariants(out) == []
    event = ctx.events[0]
    assert event.strategy == "summarizing"
    assert event.details["summarizer"] == "digest"
    assert event.details["summarized_messages"] == 17
    assert event.details["kept_messages"] == 4
    assert event.details["fallback_used"] is None
    assert event.details["error"] is None
    assert event.removed_tool_call_ids == tuple(f"c{i}" for i in range(8))
    mark = harness_mark(head[2])
    assert mark is not None
    assert mark["kind"] == "summary"
    assert mark["summarized_messages"] == 17
    assert mark["compactions"] == 1
    assert mark["summarizer"] == "digest"
    assert isinstance(mark["digest"], dict)
    assert summary_text(head[2]).startswith("Structural digest of 17 earlier messages")  # pyright: ignore[reportArgumentType]


async def test_repeated_compaction_keeps_one_summary_one_system_prompt_one_task() -> None:
    messages = history(6)
    ctx = ctx_for(messages)
    cap = SummarizingCompaction(keep_messages=3)
    for round_ in range(8):
        for i in range(5):
            ctx.messages.extend(step(100 * (round_ + 1) + i))
        await cap.compact(ctx)
        assert len(find_summary_parts(ctx.messages)) == 1
        assert system_count(ctx.messages) == 1
        assert user_texts(ctx.messages).count(TASK) == 1
        assert check_invariants(ctx.messages) == []
    mark = harness_mark(ctx.messages[0].parts[2])
    assert mark is not None
    assert mark["compactions"] == 8
    # every summarized message is counted exactly once over all compactions
    assert mark["summarized_messages"] == len(history(6)) + 8 * 10 - 3 - 1


async def test_compaction_is_idempotent() -> None:
    ctx = ctx_for(history(10))
    cap = SummarizingCompaction(keep_messages=4)
    await cap.compact(ctx)
    snapshot = list(ctx.messages)
    await cap.compact(ctx)
    assert ctx.messages == snapshot
    assert len(ctx.events) == 1


async def test_tail_request_is_merged_not_duplicated() -> None:
    messages = history(5)
    messages.append(CanonicalMessage.response(TextPart("done")))
    messages.append(CanonicalMessage.user("next question"))
    sent = messages[-1]
    ctx = ctx_for(messages)
    await SummarizingCompaction(keep_messages=1).compact(ctx)
    out = ctx.messages
    assert len(out) == 1
    assert out[0].kind == "request"
    assert [p.part_kind for p in out[0].parts] == [
        "system-prompt",
        "user-prompt",
        "user-prompt",
        "user-prompt",
    ]
    assert out[0].parts[-1] is sent.parts[0]  # the request being sent, intact and last
    assert find_summary_parts(out) == [(0, 2)]
    # nothing new to summarize: a second call is a no-op
    await SummarizingCompaction(keep_messages=1).compact(ctx)
    assert len(ctx.events) == 1


async def test_merged_tail_parts_are_summarized_later() -> None:
    messages = history(5)
    messages.append(CanonicalMessage.response(TextPart("done")))
    messages.append(CanonicalMessage.user("second question"))
    ctx = ctx_for(messages)
    cap = SummarizingCompaction(keep_messages=1)
    await cap.compact(ctx)
    ctx.messages.append(CanonicalMessage.response(TextPart("answer two")))
    ctx.messages.append(CanonicalMessage.user("third question"))
    await cap.compact(ctx)
    texts = user_texts(ctx.messages)
    assert texts == [TASK, "third question"]
    summary = ctx.messages[0].parts[2]
    assert isinstance(summary, UserPromptPart)
    assert "second question" in summary.text
    assert len(find_summary_parts(ctx.messages)) == 1


async def test_leading_system_only_request_is_kept_once() -> None:
    messages = [CanonicalMessage.request(SystemPromptPart("sys"))]
    messages += [CanonicalMessage.response(TextPart("hello"))]
    messages += [CanonicalMessage.user(TASK)]
    for i in range(6):
        messages += step(i)
    ctx = ctx_for(messages)
    cap = SummarizingCompaction(keep_messages=3)
    await cap.compact(ctx)
    assert system_count(ctx.messages) == 1
    assert isinstance(ctx.messages[0].parts[0], SystemPromptPart)
    for i in range(10, 14):
        ctx.messages.extend(step(i))
    await cap.compact(ctx)
    assert system_count(ctx.messages) == 1
    assert user_texts(ctx.messages).count(TASK) == 1


async def test_without_preserving_first_user_message() -> None:
    ctx = ctx_for(history(8, system=False))
    await SummarizingCompaction(keep_messages=3, preserve_first_user_message=False).compact(ctx)
    assert user_texts(ctx.messages) == []
    summary = ctx.messages[0].parts[0]
    assert isinstance(summary, UserPromptPart)
    assert TASK in summary.text  # the digest quotes it verbatim instead


async def test_keep_user_messages_keeps_every_prompt_in_order() -> None:
    messages = history(2)
    for i in range(4):
        messages.append(CanonicalMessage.response(TextPart(f"answer {i}")))
        messages.append(CanonicalMessage.user(f"follow-up {i}"))
    ctx = ctx_for(messages)
    cap = SummarizingCompaction(keep_messages=2, keep_user_messages=True)
    await cap.compact(ctx)
    assert user_texts(ctx.messages) == [TASK, "follow-up 0", "follow-up 1", "follow-up 2", "follow-up 3"]
    kinds = [p.part_kind for p in ctx.messages[0].parts]
    assert kinds == ["system-prompt"] + ["user-prompt"] * 5  # task, follow-ups 0-2, summary
    assert find_summary_parts(ctx.messages) == [(0, 5)]
    assert ctx.messages[-1].parts[0] == UserPromptPart("follow-up 3")
    ctx.messages.append(CanonicalMessage.response(TextPart("answer 4")))
    ctx.messages.append(CanonicalMessage.user("follow-up 4"))
    ctx.messages.append(CanonicalMessage.response(TextPart("answer 5")))
    ctx.messages.append(CanonicalMessage.user("follow-up 5"))
    await cap.compact(ctx)
    assert user_texts(ctx.messages) == [TASK] + [f"follow-up {i}" for i in range(6)]
    assert len(find_summary_parts(ctx.messages)) == 1


async def test_keep_tokens_cut_and_idempotence() -> None:
    ctx = ctx_for(history(20))
    cap = SummarizingCompaction(keep_tokens=200)
    await cap.compact(ctx)
    counter = TokenCounter()
    tail_tokens = counter.count_messages(ctx.messages[1:])
    assert tail_tokens <= 200
    assert len(ctx.messages) > 2
    before = list(ctx.messages)
    await cap.compact(ctx)
    assert ctx.messages == before


async def test_pairs_at_any_distance_are_not_split() -> None:
    messages = [CanonicalMessage.user(TASK)]
    messages.append(
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="far", tool_name="bash", args={"command": "sleep 1"})
        )
    )
    for i in range(6):
        messages.append(CanonicalMessage.request(UserPromptPart(f"wait {i}")))
        messages.append(CanonicalMessage.response(TextPart(f"waiting {i}")))
    messages.append(
        CanonicalMessage.request(ToolReturnPart(tool_call_id="far", tool_name="bash", content="done"))
    )
    ctx = ctx_for(messages)
    await SummarizingCompaction(keep_messages=3).compact(ctx)
    assert check_invariants(ctx.messages) == []
    calls = [p for m in ctx.messages for p in m.parts if isinstance(p, ToolCallPart)]
    assert [c.tool_call_id for c in calls] == ["far"]


async def test_short_histories_are_untouched() -> None:
    for messages in ([], [CanonicalMessage.user("x")], history(1)):
        ctx = ctx_for(list(messages))
        await SummarizingCompaction(keep_messages=20).compact(ctx)
        assert ctx.messages == messages
        assert ctx.events == []


class _Recorder:
    def __init__(self, answer: str = "## Intent\nSummarized by the model, faithfully.") -> None:
        self.prompts: list[str] = []
        self.systems: list[str] = []
        self.answer = answer

    def __call__(self, messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        parts = messages[0].parts
        self.systems.append(next(p.content for p in parts if isinstance(p, SystemPromptPart)))
        self.prompts.append(next(p.text for p in parts if isinstance(p, UserPromptPart)))
        return CanonicalMessage.response(
            TextPart(f"{self.answer} #{len(self.prompts)}"),
            usage=Usage(request_tokens=100, response_tokens=7),
        )


async def test_model_summarizer_receives_rendered_prompt_and_previous_summary() -> None:
    recorder = _Recorder()
    model = FunctionModel(recorder, model_name="summarizer")
    messages = history(6)
    messages[3] = CanonicalMessage.response(
        TextPart("I see {braces} and {messages} and {previous_summary} here"),
        ToolCallPart(tool_call_id="c1", tool_name="read_file", args={"path": "f1.py"}),
    )
    ctx = ctx_for(messages)
    cap = SummarizingCompaction(keep_messages=3, model=model, tool_return_max_chars=20)
    await cap.compact(ctx)
    assert len(recorder.prompts) == 1
    prompt = recorder.prompts[0]
    assert recorder.systems[0] == DEFAULT_INSTRUCTIONS
    assert f"User: {TASK}" in prompt
    assert "Assistant: I see {braces} and {messages} and {previous_summary} here" in prompt
    assert "Tool result [read_file]: content {of} file 0 …[" in prompt
    assert "<previous_summary>\n(none)\n</previous_summary>" in prompt
    assert "System: You are a careful agent." not in prompt  # kept verbatim, not summarized
    summary = ctx.messages[0].parts[2]
    assert isinstance(summary, UserPromptPart)
    assert summary.text.endswith("Summarized by the model, faithfully. #1")
    assert ctx.usage == Usage(request_tokens=100, response_tokens=7)
    assert ctx.events[0].details["summarizer"] == "model:summarizer"
    assert ctx.events[0].details["summarizer_usage"] == {"request_tokens": 100, "response_tokens": 7}

    for i in range(20, 24):
        ctx.messages.extend(step(i))
    await cap.compact(ctx)
    second = recorder.prompts[1]
    assert (
        "<previous_summary>\n## Intent\nSummarized by the model, faithfully. #1\n</previous_summary>"
        in second
    )
    assert f"User: {TASK}" not in second  # carried verbatim, the summary already covers it
    assert "[Summary of the earlier conversation" not in second
    assert ctx.usage == Usage(request_tokens=200, response_tokens=14)
    assert len(find_summary_parts(ctx.messages)) == 1


async def test_non_incremental_summarizes_the_previous_summary_as_content() -> None:
    recorder = _Recorder()
    cap = SummarizingCompaction(keep_messages=3, model=FunctionModel(recorder), incremental=False)
    ctx = ctx_for(history(6))
    await cap.compact(ctx)
    for i in range(20, 24):
        ctx.messages.extend(step(i))
    await cap.compact(ctx)
    second = recorder.prompts[1]
    assert "(none)" in second
    assert "User: ## Intent\nSummarized by the model, faithfully. #1" in second
    assert len(find_summary_parts(ctx.messages)) == 1
    assert ctx.events[1].details["incremental"] is False


async def test_default_model_is_the_agents_model() -> None:
    recorder = _Recorder()
    ctx = ctx_for(history(6), model=FunctionModel(recorder, model_name="agent-model"))
    await SummarizingCompaction(keep_messages=3).compact(ctx)
    assert len(recorder.prompts) == 1
    assert ctx.events[0].details["summarizer"] == "model:agent-model"


async def test_model_usage_estimated_when_provider_reports_none() -> None:
    class NoUsage:
        model_name = "no-usage"
        context_window = None

        async def request(self, messages: object, tools: object, settings: object) -> CanonicalMessage:
            return CanonicalMessage.response(TextPart("a summary long enough to be useful"))

    ctx = ctx_for(history(6))
    await SummarizingCompaction(keep_messages=3, model=NoUsage()).compact(ctx)
    assert ctx.usage.request_tokens > 0
    assert ctx.usage.response_tokens > 0


async def test_custom_prompt_and_instructions() -> None:
    recorder = _Recorder()
    cap = SummarizingCompaction(
        keep_messages=3,
        model=FunctionModel(recorder),
        summary_prompt='Return JSON like {"a": 1} for {message_count} messages: {messages} {unknown}',
        instructions="Be terse.",
    )
    await cap.compact(ctx_for(history(6)))
    assert recorder.systems == ["Be terse."]
    assert recorder.prompts[0].startswith('Return JSON like {"a": 1} for 9 messages: User: ')
    assert recorder.prompts[0].endswith(" {unknown}")


async def test_custom_summarizer_sync_and_async_and_summary_objects() -> None:
    seen: list[SummaryRequest] = []

    def sync_summarizer(request: SummaryRequest) -> str:
        seen.append(request)
        return "a custom summary that is long enough"

    async def async_summarizer(request: SummaryRequest) -> Summary:
        seen.append(request)
        return Summary("an async summary, long enough too", digest={"k": 1}, usage=Usage(5, 6))

    ctx = ctx_for(history(6))
    await SummarizingCompaction(keep_messages=3, summarizer=sync_summarizer).compact(ctx)
    assert ctx.events[0].details["summarizer"].startswith("custom:")
    assert seen[0].previous_summary is None
    assert seen[0].context is ctx
    assert seen[0].messages[0].parts[-1] == UserPromptPart(TASK)
    for i in range(20, 24):
        ctx.messages.extend(step(i))
    await SummarizingCompaction(keep_messages=3, summarizer=async_summarizer).compact(ctx)
    assert seen[1].previous_summary == "a custom summary that is long enough"
    assert seen[1].previous_digest is None
    mark = harness_mark(ctx.messages[0].parts[2])
    assert mark is not None
    assert mark["digest"] == {"k": 1}
    assert ctx.usage == Usage(5, 6)


async def test_structural_digest_as_explicit_summarizer_merges_incrementally() -> None:
    ctx = ctx_for(history(6))
    cap = SummarizingCompaction(keep_messages=3, summarizer=StructuralDigest())
    await cap.compact(ctx)
    for i in range(20, 24):
        ctx.messages.extend(step(i))
    await cap.compact(ctx)
    mark = harness_mark(ctx.messages[0].parts[2])
    assert mark is not None
    assert mark["summarizer"] == "digest"
    digest = mark["digest"]
    # the task is kept verbatim beside the summary: the digest only refers to it
    assert digest["requests"] == [f"(kept verbatim above) {TASK}"]
    assert digest["files_read"][:3] == ["f0.py", "f1.py", "f2.py"]
    assert "f21.py" in digest["files_read"]


async def test_public_compact_api_with_force_and_trigger() -> None:
    from harness.run import compact

    messages = history(12)
    forced = await compact(messages, [SummarizingCompaction(keep_messages=4)], force=True)
    assert forced.changed
    assert len(find_summary_parts(forced.messages)) == 1
    assert forced.events[0].strategy == "summarizing"
    assert forced.tokens_after < forced.tokens_before
    assert messages == history(12)  # the input is not mutated
    idle = await compact(messages, [SummarizingCompaction(keep_messages=4)], force=False)
    assert not idle.changed  # no trigger configured: idle unless forced
    triggered = await compact(
        messages, [SummarizingCompaction(max_messages=10, keep_messages=4)], force=False
    )
    assert triggered.changed
