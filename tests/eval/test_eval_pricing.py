"""Cache pricing: hand-computed costs for both providers, the override file, bad files; token prefixes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core import (
    CanonicalMessage,
    SystemPromptPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownPart,
    replace,
)
from harness.errors import PricesFileError
from harness.eval.pricing import load_prices, price_requests
from harness.eval.serialize import RequestTokens
from harness.tokens import TokenCounter

# (tokens, common prefix with the previous request)
REQUESTS = [(1000, 0), (2000, 1000), (3000, 2000), (2500, 1500)]


def test_packaged_rules() -> None:
    prices = load_prices()
    anthropic, openai = prices.providers["anthropic"], prices.providers["openai"]
    assert (anthropic.cache_read, anthropic.cache_write, anthropic.increment) == (0.1, 1.25, 1)
    assert anthropic.minimum_prefix == 1024  # claude-sonnet-4-5
    assert (openai.cache_read, openai.cache_write, openai.increment, openai.minimum_prefix) == (
        0.25,
        1.0,
        128,
        1024,
    )
    assert prices.source is None


def test_hand_computed_costs() -> None:
    priced = price_requests(load_prices(), REQUESTS)
    # Anthropic: 1000 (under the minimum, not cached) + 1.25 x 2000 (prefix under the minimum: all written)
    #   + (0.1 x 2000 + 1.25 x 1000) + (0.1 x 1500 + 1.25 x 1000)
    assert priced.costs["anthropic"] == pytest.approx(1000 + 2500 + 1450 + 1400)
    assert priced.cached_tokens["anthropic"] == 2000 + 1500
    # OpenAI: 1000 + 2000 + (0.25 x 1920 + 1080) + (0.25 x 1408 + 1092); 1920 = 1024 + 7 x 128
    assert priced.costs["openai"] == pytest.approx(1000 + 2000 + 1560 + 1444)
    assert priced.cached_tokens["openai"] == 1920 + 1408
    assert priced.cache_busts == 1  # only the last request does not extend the whole previous one


def test_first_request_never_reads_the_cache() -> None:
    priced = price_requests(load_prices(), [(5000, 5000)])
    assert priced.costs["anthropic"] == pytest.approx(1.25 * 5000)
    assert priced.costs["openai"] == pytest.approx(5000)
    assert priced.cache_busts == 0


def test_override_file_merges_over_the_packaged_prices(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(
        '[providers.anthropic]\nmodel = "claude-opus-4-5"\n\n'
        '[providers.local]\nmodel = "m"\ncache_read = 0.5\ncache_write = 2.0\nincrement = 1000\n'
        "minimum_prefix = 1000\n"
    )
    prices = load_prices(path)
    assert prices.source == path
    assert prices.providers["anthropic"].minimum_prefix == 4096  # the Opus 4.5 entry of the table
    assert prices.providers["anthropic"].cache_read == 0.1  # kept from the packaged file
    priced = price_requests(prices, REQUESTS)
    assert priced.costs["anthropic"] == pytest.approx(8500)  # every request under 4,096 tokens
    # local (steps of 1,000 from 1,000): nothing cached, then 1000 of 2000, 2000 of 3000, 1000 of 2500
    assert priced.costs["local"] == pytest.approx(
        2 * 1000 + (500 + 2 * 1000) + (1000 + 2 * 1000) + (500 + 2 * 1500)
    )


@pytest.mark.parametrize(
    ("text", "key", "reason"),
    [
        ("[providers.openai]\ncache_read = 'cheap'\n", "providers.openai.cache_read", "must be a number"),
        ("[providers.openai]\nincrement = 0\n", "providers.openai.increment", "at least 1"),
        ("[providers.openai]\ncache_write = -1\n", "providers.openai.cache_write", "non-negative"),
        ("[providers.openai]\nspeed = 3\n", "providers.openai.speed", "unknown key"),
        ("[providers.new]\nmodel = 'x'\n", "providers.new.cache_read", "missing"),
        (
            "[providers.anthropic.minimum_prefix]\nclaude = 'big'\n",
            "providers.anthropic.minimum_prefix.claude",
            "",
        ),
        ("currency = 'EUR'\n", "currency", "unknown key"),
        ("[providers.openai\n", None, "not valid TOML"),
    ],
)
def test_malformed_prices_file_names_the_file_and_the_key(
    tmp_path: Path, text: str, key: str | None, reason: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(PricesFileError) as caught:
        load_prices(path)
    assert caught.value.path == path
    assert caught.value.key == key
    assert reason in caught.value.reason
    assert str(path) in str(caught.value)
    if key is not None:
        assert key in str(caught.value)


def test_unreadable_prices_file(tmp_path: Path) -> None:
    with pytest.raises(PricesFileError, match="cannot read the file"):
        load_prices(tmp_path / "missing.toml")


# ---------------------------------------------------------------------------- token prefixes


def _with_system(history: list[CanonicalMessage]) -> list[CanonicalMessage]:
    first = history[0]
    return [first.replace(parts=(SystemPromptPart("Be brief."), *first.parts)), *history[1:]]


def test_serialized_length_is_the_reported_token_count(bug_fix: list[CanonicalMessage]) -> None:
    counter = TokenCounter("claude-sonnet-4-5")
    tokens = RequestTokens(counter)
    sent = _with_system(bug_fix)
    assert tokens.length(sent) == counter.count_messages(sent)
    assert len(tokens.tokens(sent)) == counter.count_messages(sent)


def test_appending_keeps_the_prefix_and_editing_an_old_message_breaks_it(
    bug_fix: list[CanonicalMessage],
) -> None:
    tokens = RequestTokens(TokenCounter("claude-sonnet-4-5"))
    earlier, later = bug_fix[:3], bug_fix[:5]
    assert tokens.common_prefix(earlier, later) == tokens.length(earlier)
    result = bug_fix[2].parts[0]
    assert isinstance(result, ToolReturnPart)
    cleared = [*bug_fix[:2], bug_fix[2].replace(parts=(replace(result, content="[cleared]"),)), *bug_fix[3:5]]
    shared = tokens.common_prefix(later, cleared)
    assert tokens.length(bug_fix[:2]) + 3 < shared < tokens.length(bug_fix[:3])  # inside the edited result
    copies = [m.replace(parts=tuple(m.parts)) for m in later]  # equal, but other objects
    assert tokens.common_prefix(later, copies) == tokens.length(later)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.integers(min_value=0, max_value=7), max_size=8),
    st.lists(st.integers(min_value=0, max_value=7), max_size=8),
    st.sets(st.integers(min_value=0, max_value=7), max_size=2),
)
def test_common_prefix_is_the_longest_common_prefix_of_the_token_lists(
    bug_fix: list[CanonicalMessage], a: list[int], b: list[int], edited: set[int]
) -> None:
    tokens = RequestTokens(TokenCounter("claude-sonnet-4-5"))

    def pick(indices: list[int], edit: bool) -> list[CanonicalMessage]:
        out: list[CanonicalMessage] = []
        for i in indices:
            message = bug_fix[i]
            if edit and i in edited:
                first = message.parts[0]
                assert not isinstance(first, UnknownPart)
                changed = (
                    replace(first, args={"edited": True})
                    if isinstance(first, ToolCallPart)
                    else replace(first, content="[edited]")
                )
                message = message.replace(parts=(changed, *message.parts[1:]))
            out.append(message)
        return out

    first, second = pick(a, False), pick(b, True)
    x, y = tokens.tokens(first), tokens.tokens(second)
    expected = 0
    while expected < min(len(x), len(y)) and x[expected] == y[expected]:
        expected += 1
    assert tokens.common_prefix(first, second) == expected
