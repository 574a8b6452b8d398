"""The canonical message model.

A history is a list of :class:`CanonicalMessage`. Each message is a request (what is sent
to the model: system prompts, user prompts, tool returns, retry prompts) or a response
(what the model said: text, thinking, tool calls). ``parts`` is the single source of
truth and keeps its order. All classes are frozen and slotted; "editing" a history means
building new messages, so unchanged messages keep their identity (which the token
counter's caches rely on).

Every class has an ``extra`` mapping that keeps keys the model does not name (for
example ``provider_details`` or ``id`` from a pydantic-ai dump) so a load/dump round trip
loses nothing.

Frozen all the way down: ``extra``, :attr:`UnknownPart.data`, :attr:`Usage.extra` and a
mapping- or list-valued ``metadata`` are deeply read-only copies
(:class:`~harness.core.frozen.FrozenDict`, :class:`~harness.core.frozen.FrozenList`) of
what the constructor was given, so no caller can change a part in place and no two parts
share a mutable default. They are real ``dict`` and ``list`` subclasses: they compare
equal to plain ones and JSON writes them as objects and arrays. Tool-call ``args``,
tool-return ``content`` and prompt content items are kept as given (arbitrary JSON
payloads, not copied): treat them as read-only too.

Messages, parts and :class:`Usage` compare by value but are not hashable: ``hash()``
raises ``TypeError``, because they hold arbitrary JSON (tool arguments, results,
metadata) and a hash would have to walk it. Key a cache by identity, ``id(message)``,
with a ``weakref`` that drops the entry when the message goes, as the token counter does.
"""

from __future__ import annotations

__all__ = [
    "HARNESS_KEY",
    "REQUEST_PART_KINDS",
    "RESPONSE_PART_KINDS",
    "CanonicalMessage",
    "JsonValue",
    "MessageKind",
    "Part",
    "RetryPromptPart",
    "SystemPromptPart",
    "TextPart",
    "ThoughtPart",
    "TOOL_KIND_KEY",
    "ToolCallPart",
    "ToolReturnPart",
    "UnknownPart",
    "Usage",
    "UserPromptPart",
    "declared_tool_kind",
    "harness_mark",
    "history_repr",
    "marked_metadata",
    "latest_assistant_text",
    "message_text",
    "replace",
    "tool_answer_ids",
    "tool_call_ids",
    "tool_return_ids",
    "with_harness_mark",
]

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar, Literal, TypeAlias, TypeVar, cast

import attrs

from harness.core._evolve import MAKERS, evolve
from harness.core._init import install as install_init
from harness.core.fields import PART_FIELDS
from harness.core.frozen import (
    EMPTY,
    FrozenDict,
    freeze,
    freeze_mapping,
    frozen_update_at,
    refuse_hash,
)
from harness.core.usage import Usage
from harness.errors import MessageError

JsonValue: TypeAlias = Any
"""Any value that JSON can represent (``dict``, ``list``, ``str``, numbers, ``bool``, ``None``)."""

MessageKind: TypeAlias = Literal["request", "response"]

HARNESS_KEY = "harness"
"""Key under which harness stores its own marks inside a part's or message's ``metadata``."""


def _content_items(value: Any) -> Any:
    """Prompt content as the wire loader gives it back: a list of items becomes a tuple."""
    return tuple(cast("list[Any]", value)) if type(value) is list else value


@attrs.frozen
class SystemPromptPart:
    """Instructions for the model (request only; never persisted by the loop)."""

    content: str
    timestamp: datetime | None = attrs.field(default=None, kw_only=True)
    dynamic_ref: str | None = attrs.field(default=None, kw_only=True)
    metadata: JsonValue = attrs.field(default=None, converter=freeze, kw_only=True)  # pyright: ignore[reportUnknownVariableType]
    extra: Mapping[str, Any] = attrs.field(default=EMPTY, converter=freeze_mapping, repr=False, kw_only=True)
    __hash__ = refuse_hash
    part_kind: ClassVar[str] = "system-prompt"


@attrs.frozen
class UserPromptPart:
    """What the user asked. ``content`` is a string or a sequence of content items."""

    content: str | tuple[JsonValue, ...] = attrs.field(converter=_content_items)
    timestamp: datetime | None = attrs.field(default=None, kw_only=True)
    metadata: JsonValue = attrs.field(default=None, converter=freeze, kw_only=True)  # pyright: ignore[reportUnknownVariableType]
    extra: Mapping[str, Any] = attrs.field(default=EMPTY, converter=freeze_mapping, repr=False, kw_only=True)
    __hash__ = refuse_hash
    part_kind: ClassVar[str] = "user-prompt"

    @property
    def text(self) -> str:
        """The textual content; string items of a content list joined by newlines."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(item for item in self.content if isinstance(item, str))


@attrs.frozen
class TextPart:
    """Plain text the model answered with (response only)."""

    content: str
    metadata: JsonValue = attrs.field(default=None, converter=freeze, kw_only=True)  # pyright: ignore[reportUnknownVariableType]
    extra: Mapping[str, Any] = attrs.field(default=EMPTY, converter=freeze_mapping, repr=False, kw_only=True)
    __hash__ = refuse_hash
    part_kind: ClassVar[str] = "text"


@attrs.frozen
class ThoughtPart:
    """Model thinking (response only). Wire ``part_kind`` is ``"thinking"``."""

    content: str
    signature: str | None = attrs.field(default=None, kw_only=True)
    provider_name: str | None = attrs.field(default=None, kw_only=True)
    metadata: JsonValue = attrs.field(default=None, converter=freeze, kw_only=True)  # pyright: ignore[reportUnknownVariableType]
    extra: Mapping[str, Any] = attrs.field(default=EMPTY, converter=freeze_mapping, repr=False, kw_only=True)
    __hash__ = refuse_hash
    part_kind: ClassVar[str] = "thinking"


@attrs.frozen(kw_only=True)
class ToolCallPart:
    """A tool call the model asked for (response only).

    ``args`` is kept as given: a mapping, or a JSON string as OpenAI-compatible models
    write it. Use :meth:`args_as_dict` to read it either way.
    """

    tool_call_id: str
    tool_name: str
    args: Mapping[str, JsonValue] | str | None = None
    metadata: JsonValue = attrs.field(default=None, converter=freeze)  # pyright: ignore[reportUnknownVariableType]
    extra: Mapping[str, Any] = attrs.field(default=EMPTY, converter=freeze_mapping, repr=False)
    __hash__ = refuse_hash
    part_kind: ClassVar[str] = "tool-call"

    def args_as_dict(self) -> dict[str, JsonValue]:
        """Return the arguments as a dict (``{}`` when absent or not a JSON object).

        Raises:
            MessageError: ``args`` is a string that is not valid JSON.
        """
        if self.args is None:
            return {}
        if isinstance(self.args, str):
            if not self.args.strip():
                return {}
            try:
                parsed = json.loads(self.args)
            except json.JSONDecodeError as exc:
                raise MessageError(
                    f"tool call {self.tool_call_id!r}: args are not valid JSON: {exc}"
                ) from exc
            return dict(parsed) if isinstance(parsed, dict) else {}  # pyright: ignore[reportUnknownArgumentType]
        return dict(self.args)


@attrs.frozen(kw_only=True)
class ToolReturnPart:
    """The result of a tool call (request only). ``content`` is any JSON value."""

    tool_call_id: str
    tool_name: str | None
    content: JsonValue
    timestamp: datetime | None = None
    metadata: JsonValue = attrs.field(default=None, converter=freeze)  # pyright: ignore[reportUnknownVariableType]
    extra: Mapping[str, Any] = attrs.field(default=EMPTY, converter=freeze_mapping, repr=False)
    __hash__ = refuse_hash
    part_kind: ClassVar[str] = "tool-return"


@attrs.frozen
class RetryPromptPart:
    """Asks the model to try again (request only).

    With a ``tool_name`` it answers the tool call ``tool_call_id``; without one it is a
    general retry (for example after an unparsable response) and answers no call.
    """

    content: str | tuple[JsonValue, ...] = attrs.field(converter=_content_items)
    tool_name: str | None = attrs.field(default=None, kw_only=True)
    tool_call_id: str | None = attrs.field(default=None, kw_only=True)
    timestamp: datetime | None = attrs.field(default=None, kw_only=True)
    metadata: JsonValue = attrs.field(default=None, converter=freeze, kw_only=True)  # pyright: ignore[reportUnknownVariableType]
    extra: Mapping[str, Any] = attrs.field(default=EMPTY, converter=freeze_mapping, repr=False, kw_only=True)
    __hash__ = refuse_hash
    part_kind: ClassVar[str] = "retry-prompt"

    @property
    def answers_tool_call(self) -> bool:
        """True when this retry answers a specific tool call."""
        return self.tool_name is not None and bool(self.tool_call_id)


@attrs.frozen
class UnknownPart:
    """A part kind harness does not model, kept verbatim (``data`` holds every key)."""

    kind: str
    data: Mapping[str, Any] = attrs.field(converter=freeze_mapping, kw_only=True)
    __hash__ = refuse_hash

    @property
    def part_kind(self) -> str:
        """The wire ``part_kind`` of the kept part."""
        return self.kind


Part: TypeAlias = (
    SystemPromptPart
    | UserPromptPart
    | TextPart
    | ThoughtPart
    | ToolCallPart
    | ToolReturnPart
    | RetryPromptPart
    | UnknownPart
)

REQUEST_PART_KINDS = frozenset({"system-prompt", "user-prompt", "tool-return", "retry-prompt"})
RESPONSE_PART_KINDS = frozenset({"text", "thinking", "tool-call"})
_REQUEST_TYPES = (SystemPromptPart, UserPromptPart, ToolReturnPart, RetryPromptPart)
_RESPONSE_TYPES = (TextPart, ThoughtPart, ToolCallPart)
_REQUEST_OK = (UnknownPart, *_REQUEST_TYPES)
_RESPONSE_OK = (UnknownPart, *_RESPONSE_TYPES)


def _check_parts(instance: CanonicalMessage, _attribute: object, parts: tuple[object, ...]) -> None:
    allowed = _REQUEST_OK if instance.kind == "request" else _RESPONSE_OK
    for index, part in enumerate(parts):
        if not isinstance(part, allowed):
            kind = getattr(part, "part_kind", type(part).__name__)
            raise MessageError(f"part {index}: a {instance.kind} cannot hold a {kind!r} part")


def _kind(_instance: object, _attribute: object, value: str) -> None:
    if value not in ("request", "response"):
        raise MessageError(f"kind must be 'request' or 'response', got {value!r}")


@attrs.frozen
class CanonicalMessage:
    """One message of a history: a request sent to the model or a response from it."""

    kind: MessageKind = attrs.field(validator=_kind)
    parts: tuple[Part, ...] = attrs.field(converter=tuple, validator=_check_parts)
    timestamp: datetime | None = None
    model_name: str | None = None
    usage: Usage | None = None
    run_id: str | None = None
    provider_name: str | None = None
    provider_response_id: str | None = None
    finish_reason: str | None = None
    metadata: JsonValue = attrs.field(default=None, converter=freeze)  # pyright: ignore[reportUnknownVariableType]
    instructions: str | None = None
    extra: Mapping[str, Any] = attrs.field(default=EMPTY, converter=freeze_mapping, repr=False)
    __hash__ = refuse_hash

    @classmethod
    def request(cls, *parts: Part, **fields: Any) -> CanonicalMessage:
        """Build a request from parts, e.g. ``CanonicalMessage.request(UserPromptPart("hi"))``."""
        return cls("request", parts, **fields)

    @classmethod
    def response(cls, *parts: Part, **fields: Any) -> CanonicalMessage:
        """Build a response from parts, e.g. ``CanonicalMessage.response(TextPart("hello"))``."""
        return cls("response", parts, **fields)

    @classmethod
    def user(cls, text: str) -> CanonicalMessage:
        """Build a request holding one user prompt."""
        return cls("request", (UserPromptPart(text),))

    @property
    def is_request(self) -> bool:
        """True for requests."""
        return self.kind == "request"

    @property
    def is_response(self) -> bool:
        """True for responses."""
        return self.kind == "response"

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        """The tool-call parts of this message, in order."""
        return tuple(p for p in self.parts if isinstance(p, ToolCallPart))

    def replace(self, **changes: Any) -> CanonicalMessage:
        """Return a copy with ``changes`` applied (the original is unchanged)."""
        maker = MAKERS.get((type(self), *changes))
        if maker is None:
            return evolve(self, **changes)
        return maker(self, *changes.values())


for _cls in (*_REQUEST_TYPES, *_RESPONSE_TYPES):
    install_init(_cls, PART_FIELDS[_cls.part_kind])
for _cls in (UnknownPart, CanonicalMessage):
    install_init(_cls)


def history_repr(messages: Sequence[CanonicalMessage]) -> str:
    """A short stand-in for a history in ``repr``: ``<N messages>``.

    Results and sessions hold whole histories; printing them, or CPython computing their
    ``repr`` behind the scenes (``asyncio.run`` formats its finished task on 3.11), must
    not cost time proportional to the history.
    """
    return f"<{len(messages)} messages>"


def message_text(message: CanonicalMessage) -> str:
    """All text of a message: text, thinking, prompts, returns and retries, joined by newlines.

    Tool calls contribute nothing; non-string tool-return content is JSON-encoded.
    """
    chunks: list[str] = []
    for part in message.parts:
        if isinstance(part, UserPromptPart):
            chunks.append(part.text)
        elif isinstance(part, (TextPart, ThoughtPart, SystemPromptPart)):
            chunks.append(part.content)
        elif isinstance(part, ToolReturnPart):
            content = part.content
            chunks.append(content if isinstance(content, str) else json.dumps(content, default=str))
        elif isinstance(part, RetryPromptPart):
            content = part.content
            chunks.append(content if isinstance(content, str) else json.dumps(content, default=str))
    return "\n".join(chunk for chunk in chunks if chunk)


def latest_assistant_text(messages: Sequence[CanonicalMessage]) -> str | None:
    """Return the text of the newest response that has any ``TextPart``, or ``None``.

    This is what a UI shows as "the assistant's answer"; thinking is not included.
    """
    for message in reversed(messages):
        if message.kind != "response":
            continue
        texts = [p.content for p in message.parts if isinstance(p, TextPart)]
        if texts:
            return "".join(texts)
    return None


TOOL_KIND_KEY = "tool_kind"
"""Key of a tool call's or return's ``extra`` naming its kind of tool (pydantic-ai's ``tool_kind``)."""


def declared_tool_kind(part: Part) -> str | None:
    """The tool kind a tool call or return declares, or ``None`` (any other part: ``None``).

    pydantic-ai gives a framework tool's parts (``"tool-search"``: ``ToolSearchCallPart``,
    ``ToolSearchReturnPart``) a ``tool_kind``, which harness keeps in ``extra``. Such a
    part's arguments and content have a declared structure that pydantic-ai validates and
    reads (the tools a search discovered): a capability that rewrites tool content
    (clearing, clamping) leaves these parts alone.
    """
    if isinstance(part, ToolCallPart | ToolReturnPart) and part.extra:
        kind = part.extra.get(TOOL_KIND_KEY)
        if isinstance(kind, str) and kind:
            return kind
    return None


def tool_call_ids(message: CanonicalMessage) -> list[str]:
    """Ids of the tool calls in ``message``, in part order."""
    return [p.tool_call_id for p in message.parts if isinstance(p, ToolCallPart)]


def tool_return_ids(message: CanonicalMessage) -> list[str]:
    """Ids of the tool returns in ``message``, in part order (retry prompts excluded)."""
    return [p.tool_call_id for p in message.parts if isinstance(p, ToolReturnPart)]


def tool_answer_ids(message: CanonicalMessage) -> list[str]:
    """Ids answered in ``message``: tool returns plus retry prompts that name a tool."""
    ids: list[str] = []
    for part in message.parts:
        if isinstance(part, ToolReturnPart):
            ids.append(part.tool_call_id)
        elif isinstance(part, RetryPromptPart) and part.answers_tool_call and part.tool_call_id:
            ids.append(part.tool_call_id)
    return ids


_Markable = TypeVar(
    "_Markable",
    bound=SystemPromptPart
    | UserPromptPart
    | TextPart
    | ThoughtPart
    | ToolCallPart
    | ToolReturnPart
    | RetryPromptPart
    | CanonicalMessage,
)


def harness_mark(obj: Part | CanonicalMessage) -> Mapping[str, Any] | None:
    """Return the harness mark stored in ``obj.metadata[HARNESS_KEY]``, if any.

    Harness recognises its own artefacts (summaries, request-scoped warnings, cleared
    results) by this mark, never by text.
    """
    metadata = getattr(obj, "metadata", None)
    if isinstance(metadata, Mapping):
        mark = metadata.get(HARNESS_KEY)  # pyright: ignore[reportUnknownMemberType,reportUnknownVariableType]
        if isinstance(mark, Mapping):
            return mark  # pyright: ignore[reportUnknownVariableType]
    return None


def marked_metadata(metadata: JsonValue, **mark: JsonValue) -> FrozenDict:
    """Return ``metadata`` with its harness mark updated by ``mark`` (a new, read-only mapping).

    Use it with :func:`replace` to change a part's content and mark it in one copy::

        replace(part, content="[cleared]", metadata=marked_metadata(part.metadata, cleared="me"))

    Raises:
        MessageError: ``metadata`` is set and is not a mapping.
    """
    if metadata is not None and not isinstance(metadata, Mapping):
        raise MessageError("cannot mark a part whose metadata is not a mapping")
    return frozen_update_at(cast("Mapping[str, Any] | None", metadata), HARNESS_KEY, mark)


def with_harness_mark(obj: _Markable, **mark: JsonValue) -> _Markable:
    """Return a copy of ``obj`` whose harness mark is updated with ``mark``.

    Raises:
        MessageError: ``obj.metadata`` is set and is not a mapping.
    """
    return evolve(obj, metadata=marked_metadata(obj.metadata, **mark))


def replace(obj: _Markable, **changes: Any) -> _Markable:
    """Return a copy of a message or part with ``changes`` applied, validators included.

    Equivalent to ``attrs.evolve`` but several times faster, which matters to capabilities
    that rebuild thousands of parts at once.

    Raises:
        TypeError: A name in ``changes`` is not a field of ``type(obj)``.
    """
    maker = MAKERS.get((type(obj), *changes))  # evolve() inlined: this is the capabilities' hot path
    if maker is None:
        return evolve(obj, **changes)
    return maker(obj, *changes.values())
