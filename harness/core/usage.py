"""Token usage, normalised across providers, and how two usages add up.

Part of :mod:`harness.core.messages`, which re-exports :class:`Usage`.
"""

from __future__ import annotations

__all__ = ["USAGE_TOKEN_KEYS", "Usage"]

from collections.abc import Mapping
from typing import Any, Final, cast

import attrs

from harness.core._init import install as install_init
from harness.core.frozen import EMPTY, freeze_mapping, refuse_hash

USAGE_TOKEN_KEYS: Final = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "request_tokens",
    "response_tokens",
)
"""The token counts of a ``usage`` object (integers when present)."""


@attrs.frozen
class Usage:
    """Token usage of one model response, normalised across providers.

    ``request_tokens`` counts every input token, cached ones included; ``cached_tokens``
    is the part of it read from the provider's prompt cache. ``extra`` keeps what the
    provider or an older file reported besides (a ``cost``, pydantic-ai's ``details``).

    ``a + b`` adds the token counts and merges ``extra`` key by key: a key on one side only
    is kept; numbers (``int`` and ``float``, but not ``bool``) are summed; two mappings are
    merged by the same rules; a ``None`` adds nothing; otherwise (strings, booleans, lists,
    a number against a non-number) the right-hand value wins, so a session's total plus a
    run's usage keeps the newest. ``sum(usages, Usage())`` and ``sum(usages)`` both work.
    """

    request_tokens: int = 0
    response_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    extra: Mapping[str, Any] = attrs.field(default=EMPTY, converter=freeze_mapping, repr=False)
    __hash__ = refuse_hash

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.request_tokens + self.response_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):  # pyright: ignore[reportUnnecessaryIsInstance]
            return NotImplemented
        return Usage(
            request_tokens=self.request_tokens + other.request_tokens,
            response_tokens=self.response_tokens + other.response_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            extra=_add_extra(self.extra, other.extra),
        )

    def __radd__(self, other: object) -> Usage:
        if other == 0:  # sum(usages) starts from 0
            return self
        return NotImplemented

    @classmethod
    def from_pydantic_ai(cls, data: Mapping[str, Any]) -> Usage:
        """Read pydantic-ai's ``RequestUsage`` dump (``input_tokens``, ``cache_read_tokens``...).

        The deprecated aliases ``request_tokens`` and ``response_tokens`` are read too.
        Keys that are not token totals are kept in ``extra``.
        """
        known = set(USAGE_TOKEN_KEYS)
        return cls(
            request_tokens=_int(data.get("input_tokens", data.get("request_tokens"))),
            response_tokens=_int(data.get("output_tokens", data.get("response_tokens"))),
            cached_tokens=_int(data.get("cache_read_tokens")),
            cache_write_tokens=_int(data.get("cache_write_tokens")),
            extra={k: v for k, v in data.items() if k not in known},
        )

    @classmethod
    def from_openai(cls, data: Mapping[str, Any]) -> Usage:
        """Read an OpenAI usage object (chat completions or responses API).

        ``prompt_tokens``/``input_tokens`` already include cached tokens, which are read
        from ``prompt_tokens_details.cached_tokens`` or ``input_tokens_details.cached_tokens``.
        """
        details: object = data.get("prompt_tokens_details") or data.get("input_tokens_details")
        cached: object = None
        if isinstance(details, Mapping):
            cached = cast("Mapping[str, object]", details).get("cached_tokens")
        return cls(
            request_tokens=_int(data.get("prompt_tokens", data.get("input_tokens"))),
            response_tokens=_int(data.get("completion_tokens", data.get("output_tokens"))),
            cached_tokens=_int(cached),
        )

    @classmethod
    def from_anthropic(cls, data: Mapping[str, Any]) -> Usage:
        """Read an Anthropic usage object.

        Anthropic's ``input_tokens`` excludes cache reads and cache writes, so the total
        input is ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens``.
        """
        cache_read = _int(data.get("cache_read_input_tokens"))
        cache_write = _int(data.get("cache_creation_input_tokens"))
        return cls(
            request_tokens=_int(data.get("input_tokens")) + cache_read + cache_write,
            response_tokens=_int(data.get("output_tokens")),
            cached_tokens=cache_read,
            cache_write_tokens=cache_write,
        )

    @classmethod
    def from_any(cls, data: Mapping[str, Any]) -> Usage:
        """Recognise the provider shape of ``data`` and normalise it."""
        if "prompt_tokens" in data or "prompt_tokens_details" in data or "input_tokens_details" in data:
            return cls.from_openai(data)
        if "cache_read_input_tokens" in data or "cache_creation_input_tokens" in data:
            return cls.from_anthropic(data)
        return cls.from_pydantic_ai(data)


install_init(Usage)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _add_extra(left: Mapping[str, Any], right: Mapping[str, Any]) -> Mapping[str, Any]:
    """Merge two ``Usage.extra`` mappings (see :class:`Usage` for the rules)."""
    if not right:
        return left
    if not left:
        return right
    merged = dict(left)
    for key, value in right.items():
        merged[key] = _add_value(merged[key], value) if key in merged else value
    return merged


def _add_value(left: Any, right: Any) -> Any:
    if _is_number(left) and _is_number(right):
        return left + right
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        merged: Mapping[str, Any] = _add_extra(
            cast("Mapping[str, Any]", left), cast("Mapping[str, Any]", right)
        )
        return merged
    return cast("Any", left) if right is None else right


def _int(value: object) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    return 0
