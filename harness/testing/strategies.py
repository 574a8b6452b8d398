"""Hypothesis strategies for property tests of history transformations.

This module imports :mod:`hypothesis`, so it needs the ``testing`` extra
(``pip install "harness-loop[testing]"``). Plugins use it like this::

    from hypothesis import given
    from harness.history import check_invariants
    from harness.testing.strategies import histories

    @given(histories(min_messages=1))
    def test_my_capability_keeps_history_valid(messages):
        ...

:func:`histories` generates *valid* histories (``check_invariants(messages) == []``):
requests and responses alternate starting with a request; tool call ids are unique;
every tool call is answered after it by a tool return, a retry prompt naming it, or a
retry prompt followed later by a return; parallel calls of one response are answered
together or (``distant_returns``) some of them several requests later.

:func:`messy_histories` generates arbitrary sequences that break those rules in every
way :func:`harness.history.check_invariants` reports (dangling calls, orphan returns,
duplicate ids, returns before calls, consecutive requests/responses, empty responses).
"""

from __future__ import annotations

__all__ = [
    "TOOL_NAMES",
    "histories",
    "messy_histories",
    "texts",
    "tool_names",
]

from typing import Any

from hypothesis import strategies as st

from harness.core.messages import (
    CanonicalMessage,
    JsonValue,
    Part,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

TOOL_NAMES: tuple[str, ...] = ("read_file", "bash", "grep", "write_file", "web_fetch")
"""Tool names used by :func:`tool_names`."""

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_ALPHABET = _LETTERS + " .,:;-_/\n\u00e9\u4e2d"


def tool_names() -> st.SearchStrategy[str]:
    """Tool names drawn from :data:`TOOL_NAMES`."""
    return st.sampled_from(TOOL_NAMES)


def texts(*, min_size: int = 1, max_size: int = 40) -> st.SearchStrategy[str]:
    """Short texts (letters, digits, punctuation, a little non-ASCII).

    With ``min_size >= 1`` the text always holds a non-whitespace character, so a
    response made of it is never empty.

    Args:
        min_size: Minimum length.
        max_size: Maximum length.
    """
    if min_size <= 0:
        return st.text(alphabet=_ALPHABET, max_size=max_size)
    rest = st.text(alphabet=_ALPHABET, min_size=min_size - 1, max_size=max(min_size - 1, max_size - 1))
    return st.builds(_join, st.sampled_from(_LETTERS), rest)


def _join(first: str, tail: str) -> str:
    return first + tail


def _repeat(text: str, times: int, limit: int) -> str:
    return (text * times)[:limit]


def _contents(max_chars: int = 60) -> st.SearchStrategy[JsonValue]:
    """Tool-return content: a string or a small dict; long strings are cheap repeats."""
    short = texts(max_size=min(max_chars, 60))
    choices: list[st.SearchStrategy[JsonValue]] = [
        short,
        st.fixed_dictionaries({"ok": st.booleans(), "output": texts(max_size=min(max_chars, 30))}),
    ]
    if max_chars > 60:
        choices.append(st.builds(_repeat, texts(max_size=30), st.integers(1, max_chars), st.just(max_chars)))
    return st.one_of(choices)


_INTS = tuple(st.integers(0, k) for k in range(8))
_BOOLS = st.booleans()
_TEXT_10 = texts(max_size=10)
_TEXT_30 = texts(max_size=30)
_TEXT_40 = texts(max_size=40)
_SIGNATURES = st.none() | st.just("sig")
_ANSWER_MODES = st.sampled_from(("return", "return", "retry", "retry_then_return"))
_TOOL_NAMES = tool_names()
_CONTENT_STRATEGIES: dict[int, st.SearchStrategy[JsonValue]] = {60: _contents()}


def _contents_up_to(max_chars: int) -> st.SearchStrategy[JsonValue]:
    if max_chars not in _CONTENT_STRATEGIES:
        _CONTENT_STRATEGIES[max_chars] = _contents(max_chars)
    return _CONTENT_STRATEGIES[max_chars]


def _final_request_index(length: int) -> int:
    """Index of the last request that may answer calls (requests sit at even indices)."""
    return length - 1 if length % 2 == 1 else length - 2


@st.composite
def _valid_history(
    draw: st.DrawFn,
    *,
    length: int,
    parallel_calls: bool,
    retries: bool,
    thinking: bool,
    distant_returns: bool,
    system_prompts: bool,
    max_output_chars: int,
) -> list[CanonicalMessage]:
    contents = _contents_up_to(max_output_chars)
    last_answer = _final_request_index(length)
    due: dict[int, list[Part]] = {}
    counter = 0
    messages: list[CanonicalMessage] = []
    for index in range(length):
        if index % 2 == 0:
            parts: list[Part] = []
            if index == 0 and system_prompts and draw(_BOOLS):
                parts.append(SystemPromptPart(draw(_TEXT_40)))
            parts.extend(due.pop(index, []))
            if index == 0 or not parts or draw(_INTS[3]) == 0:
                if retries and index and parts and draw(_INTS[5]) == 0:
                    parts.append(RetryPromptPart(draw(_TEXT_30)))  # a general retry
                else:
                    parts.append(UserPromptPart(draw(_TEXT_40)))
            messages.append(CanonicalMessage.request(*parts))
            continue
        parts = []
        if thinking and draw(_INTS[2]) == 0:
            parts.append(ThoughtPart(draw(_TEXT_40), signature=draw(_SIGNATURES)))
        max_calls = 0 if index + 1 > last_answer else (3 if parallel_calls else 1)
        n_calls = draw(_INTS[max_calls])
        if n_calls == 0 or draw(_BOOLS):
            parts.append(TextPart(draw(_TEXT_40)))
        slots = list(range(index + 1, last_answer + 1, 2))
        for _ in range(n_calls):
            counter += 1
            call_id = f"call_{counter}"
            name = draw(_TOOL_NAMES)
            parts.append(ToolCallPart(tool_call_id=call_id, tool_name=name, args={"arg": draw(_TEXT_10)}))
            first = draw(_INTS[min(len(slots) - 1, 3)]) if distant_returns else 0
            mode = draw(_ANSWER_MODES) if retries else "return"
            if mode == "retry_then_return" and first + 1 >= len(slots):
                mode = "return"
            if mode == "return":
                due.setdefault(slots[first], []).append(
                    ToolReturnPart(tool_call_id=call_id, tool_name=name, content=draw(contents))
                )
                continue
            retry = RetryPromptPart(draw(_TEXT_30), tool_name=name, tool_call_id=call_id)
            due.setdefault(slots[first], []).append(retry)
            if mode == "retry_then_return":
                later = first + 1 + draw(_INTS[min(len(slots) - 1, first + 3) - first - 1])
                due.setdefault(slots[later], []).append(
                    ToolReturnPart(tool_call_id=call_id, tool_name=name, content=draw(contents))
                )
        messages.append(CanonicalMessage.response(*parts, model_name="test-model"))
    return messages


def histories(
    min_messages: int = 0,
    max_messages: int = 40,
    *,
    parallel_calls: bool = True,
    retries: bool = True,
    thinking: bool = True,
    distant_returns: bool = True,
    system_prompts: bool = True,
    end_with_request: bool = True,
    max_output_chars: int = 60,
) -> st.SearchStrategy[list[CanonicalMessage]]:
    """Valid histories: ``check_invariants(messages) == []`` for every example.

    Requests sit at even indices, responses at odd ones. The first request holds a user
    prompt (and, with ``system_prompts``, sometimes a system prompt before it). Call ids
    are ``call_1``, ``call_2``... in order of appearance, so they are unique.

    Args:
        min_messages: Minimum length (0 allows the empty history).
        max_messages: Maximum length.
        parallel_calls: Allow up to three calls in one response.
        retries: Allow retry prompts: naming a call (alone, or followed later by its
            return) and general retries without a tool name.
        thinking: Allow thinking parts in responses.
        distant_returns: Allow answers several requests after their call.
        system_prompts: Allow a system prompt in the first request.
        end_with_request: Every non-empty history ends with a request (the request
            being sent). When false, histories may end with a response whose calls are
            all answered (a final response never holds calls).
        max_output_chars: Longest string tool-return content. Above 60, long outputs
            are built by repeating a short text (cheap to generate), which suits tests
            of pruning and clearing with real token counts.

    Raises:
        ValueError: No length in ``[min_messages, max_messages]`` fits ``end_with_request``,
            or ``max_output_chars < 1``.
    """
    if max_output_chars < 1:
        raise ValueError(f"histories(max_output_chars={max_output_chars}): must be at least 1")
    lengths = [
        n
        for n in range(max(min_messages, 0), max_messages + 1)
        if n == 0 or not end_with_request or n % 2 == 1
    ]
    if not lengths:
        raise ValueError(
            f"histories(min_messages={min_messages}, max_messages={max_messages}): "
            "no length fits end_with_request=True (needs 0 or an odd length)"
        )
    options: dict[str, Any] = {
        "parallel_calls": parallel_calls,
        "retries": retries,
        "thinking": thinking,
        "distant_returns": distant_returns,
        "system_prompts": system_prompts,
        "max_output_chars": max_output_chars,
    }
    return st.sampled_from(lengths).flatmap(lambda n: _valid_history(length=n, **options))


_MESSY_IDS = ("c1", "c2", "c3", "c4", "c5")


def _messy_request_part() -> st.SearchStrategy[Part]:
    ids = st.sampled_from(_MESSY_IDS)
    return st.one_of(
        st.builds(UserPromptPart, texts(max_size=20)),
        st.builds(SystemPromptPart, texts(max_size=20)),
        st.builds(ToolReturnPart, tool_call_id=ids, tool_name=st.none() | tool_names(), content=_contents()),
        st.builds(
            RetryPromptPart,
            texts(max_size=20),
            tool_name=st.none() | tool_names(),
            tool_call_id=st.none() | ids,
        ),
    )


def _messy_response_part() -> st.SearchStrategy[Part]:
    return st.one_of(
        st.builds(TextPart, st.sampled_from(("", " ", "\n")) | texts(max_size=20)),
        st.builds(ThoughtPart, texts(max_size=20)),
        st.builds(
            ToolCallPart,
            tool_call_id=st.sampled_from(_MESSY_IDS),
            tool_name=tool_names(),
            args=st.just({"x": 1}),
        ),
    )


def _messy_message() -> st.SearchStrategy[CanonicalMessage]:
    request = st.lists(_messy_request_part(), min_size=1, max_size=4).map(
        lambda parts: CanonicalMessage.request(*parts, run_id="run-1")
    )
    response = st.lists(_messy_response_part(), min_size=0, max_size=4).map(
        lambda parts: CanonicalMessage.response(*parts, run_id="run-1")
    )
    return st.one_of(request, response)


_MESSY_MESSAGE = _messy_message()
_DAMAGE = st.sampled_from(("drop", "duplicate", "truncate", "empty_response", "swap"))


@st.composite
def _damaged_history(draw: st.DrawFn, *, min_messages: int, max_messages: int) -> list[CanonicalMessage]:
    """A valid history damaged the way crashes, aborts and bad edits damage histories."""
    messages = draw(histories(0, max_messages, end_with_request=False))
    for _ in range(draw(_INTS[3])):
        if not messages:
            break
        at = draw(st.integers(0, len(messages) - 1))
        damage = draw(_DAMAGE)
        if damage == "drop":
            del messages[at]
        elif damage == "duplicate":
            messages.insert(at, messages[at])  # the same object twice
        elif damage == "truncate":  # e.g. an abort between a tool call and its return
            del messages[at + 1 :]
        elif damage == "empty_response":
            messages.insert(at, CanonicalMessage.response())
        elif at + 1 < len(messages):
            messages[at], messages[at + 1] = messages[at + 1], messages[at]
    while len(messages) < min_messages:
        messages.append(draw(_MESSY_MESSAGE))
    return messages[:max_messages]


def messy_histories(
    min_messages: int = 0, max_messages: int = 20
) -> st.SearchStrategy[list[CanonicalMessage]]:
    """Arbitrary, usually invalid histories.

    Half of the examples are random sequences: messages of either kind in any order;
    requests hold user prompts, system prompts,
    tool returns (with or without a tool name) and retry prompts (general, naming a
    tool, with or without an id); responses hold text (sometimes empty or blank),
    thinking and tool calls, or nothing at all. Call ids come from a pool of five, so
    dangling calls, orphan returns, duplicate ids and returns before calls are common.
    Every random message has ``run_id="run-1"``; random requests hold at least one part.

    The other half are valid :func:`histories` damaged by up to three edits: a message
    dropped, a message repeated (the *same object* twice), the history truncated (as an
    abort between a tool call and its return leaves it), an empty response inserted, or
    two neighbours swapped.

    Args:
        min_messages: Minimum length.
        max_messages: Maximum length.

    Raises:
        ValueError: ``min_messages`` is negative or above ``max_messages``.
    """
    if not 0 <= min_messages <= max_messages:
        raise ValueError(
            f"messy_histories(min_messages={min_messages}, max_messages={max_messages}): "
            "need 0 <= min_messages <= max_messages"
        )
    return st.one_of(
        st.lists(_MESSY_MESSAGE, min_size=min_messages, max_size=max_messages),
        _damaged_history(min_messages=min_messages, max_messages=max_messages),
    )
