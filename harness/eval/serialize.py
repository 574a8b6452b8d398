"""A sent request as a list of token ids, and the common prefix of two requests.

Prompt caches match a request's *token prefix*, so cache pricing needs the real token
ids of what was sent, in the order a provider receives them. A request (the message list
the model received, system prompt and request-scoped parts included) is serialized as:

* for each message, in order: 3 framing tokens naming its kind (request or response);
* then, for each of its parts, in order: 1 framing token naming the part kind, the
  cl100k (or the model's) token ids of the text harness's counter counts for it
  (:func:`harness.tokens.counting.part_text`: the content; a tool call's name and
  arguments as compact JSON; a tool result's name and content), and one token per
  non-text content item's flat cost.

The framing tokens are negative numbers (they are not text and cannot collide with a
token id); their count is the counter's :data:`~harness.tokens.MESSAGE_OVERHEAD` and
:data:`~harness.tokens.PART_OVERHEAD`, so a request's serialized length is exactly its
reported token count. Changing any part changes the tokens from that part on: editing
an old message breaks the prefix there, appending keeps it.

Token ids are cached per part (by identity, and by text for equal parts that are
different objects), so a request costs tokenizing only its new parts, and
:meth:`RequestTokens.common_prefix` walks messages by identity, comparing token lists
only inside the first message that differs.
"""

from __future__ import annotations

__all__ = ["RequestTokens"]

from collections.abc import Callable, Sequence
from typing import Final

from harness.core.messages import CanonicalMessage, Part, UnknownPart
from harness.tokens import MESSAGE_OVERHEAD, PART_OVERHEAD, TokenCounter
from harness.tokens.counting import estimate_tokens, part_text

_KINDS: Final = (
    "system-prompt",
    "user-prompt",
    "tool-return",
    "retry-prompt",
    "text",
    "thinking",
    "tool-call",
)
_PART_MARK: Final = {kind: -(10 + index) for index, kind in enumerate(_KINDS)}
_UNKNOWN_MARK: Final = -99
_NON_TEXT_MARK: Final = -100
_MESSAGE_MARK: Final = {"request": -1, "response": -2}
_MAX_TEXTS: Final = 50_000


def _encoder(counter: TokenCounter) -> Callable[[str], list[int]]:
    """The token-id function of ``counter``'s encoding (bytes/4 pseudo ids without one)."""
    import harness.tokens._encodings as encodings

    name = counter.encoding_name
    loaded = encodings.load_encoding(name) if name not in ("estimate", "custom") else None
    if loaded is not None:
        return loaded.encoding.encode_ordinary

    def pseudo(text: str) -> list[int]:  # no encoding on this machine: stable stand-in ids
        return [hash(text[i : i + 4]) & 0xFFFFFF for i in range(0, 4 * estimate_tokens(text), 4)]

    return pseudo


class RequestTokens:
    """Token ids of sent requests, cached per part; lengths and common prefixes.

    Args:
        counter: The counter of the model (its encoding is used).
    """

    def __init__(self, counter: TokenCounter) -> None:
        self._encode = _encoder(counter)
        self._by_id: dict[int, tuple[Part, list[int]]] = {}
        self._by_text: dict[str, list[int]] = {}
        self._lengths: dict[int, tuple[CanonicalMessage, int]] = {}

    def part(self, part: Part) -> list[int]:
        """The serialized tokens of one part (framing token first)."""
        cached = self._by_id.get(id(part))
        if cached is not None and cached[0] is part:
            return cached[1]
        text, flat = part_text(part)
        body = self._by_text.get(text)
        if body is None:
            body = self._encode(text)
            if len(self._by_text) >= _MAX_TEXTS:
                self._by_text.clear()
            self._by_text[text] = body
        mark = (
            _UNKNOWN_MARK if isinstance(part, UnknownPart) else _PART_MARK.get(part.part_kind, _UNKNOWN_MARK)
        )
        tokens = [mark] * PART_OVERHEAD + body + [_NON_TEXT_MARK] * flat
        self._by_id[id(part)] = (part, tokens)
        return tokens

    def message_length(self, message: CanonicalMessage) -> int:
        """The serialized length of one message."""
        cached = self._lengths.get(id(message))
        if cached is not None and cached[0] is message:
            return cached[1]
        length = MESSAGE_OVERHEAD + sum(len(self.part(p)) for p in message.parts)
        self._lengths[id(message)] = (message, length)
        return length

    def length(self, messages: Sequence[CanonicalMessage]) -> int:
        """The serialized length of a request."""
        return sum(self.message_length(m) for m in messages)

    def tokens(self, messages: Sequence[CanonicalMessage]) -> list[int]:
        """The whole serialized request (for tests and inspection; scoring never builds it)."""
        out: list[int] = []
        for message in messages:
            out.extend([_MESSAGE_MARK[message.kind]] * MESSAGE_OVERHEAD)
            for part in message.parts:
                out.extend(self.part(part))
        return out

    def common_prefix(self, previous: Sequence[CanonicalMessage], current: Sequence[CanonicalMessage]) -> int:
        """Tokens the serialized ``current`` shares at its start with ``previous``."""
        shared = 0
        for old, new in zip(previous, current, strict=False):
            if old is new:
                shared += self.message_length(new)
                continue
            if old.kind != new.kind:
                return shared
            shared += MESSAGE_OVERHEAD
            for old_part, new_part in zip(old.parts, new.parts, strict=False):
                a = self.part(old_part)
                b = self.part(new_part)
                if old_part is new_part or a == b:
                    shared += len(b)
                    continue
                for x, y in zip(a, b, strict=False):
                    if x != y:
                        break
                    shared += 1
                return shared
            if len(old.parts) != len(new.parts):
                return shared
        return shared

    def forget_except(self, messages: Sequence[CanonicalMessage]) -> None:
        """Drop cached entries of parts and messages not in ``messages`` (bounds memory)."""
        if len(self._by_id) < 4 * (sum(len(m.parts) for m in messages) + 64):
            return
        keep_parts = {id(p) for m in messages for p in m.parts}
        keep_messages = {id(m) for m in messages}
        self._by_id = {k: v for k, v in self._by_id.items() if k in keep_parts}
        self._lengths = {k: v for k, v in self._lengths.items() if k in keep_messages}
