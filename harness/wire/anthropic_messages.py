"""Reading Anthropic Messages API messages (and Claude Code's) as canonical messages.

The mapping (see :mod:`harness.wire.foreign` for how unmodelled keys are kept):

* the request's ``system`` (a string or text blocks), and any ``system``-role message:
  one :class:`~harness.core.messages.SystemPromptPart` per text;
* ``user`` content: ``tool_result`` blocks become
  :class:`~harness.core.messages.ToolReturnPart` (``tool_name`` from the ``tool_use`` it
  answers; ``content``, a string or a block list, kept as given; ``is_error`` and
  ``cache_control`` kept in ``extra``); the blocks between them become one
  :class:`~harness.core.messages.UserPromptPart` whose items are in pydantic-ai's shapes
  (text as strings; base64 and URL images and documents as ``binary``, ``image-url`` and
  ``document-url``; an ephemeral ``cache_control`` as a ``cache-point`` item after the
  block); other blocks are kept verbatim;
* ``assistant`` content: ``text`` as :class:`~harness.core.messages.TextPart`
  (``citations`` kept), ``thinking`` as :class:`~harness.core.messages.ThoughtPart` with
  its ``signature`` and ``provider_name="anthropic"``, ``redacted_thinking`` as a thought
  part whose ``signature`` holds the data and whose ``extra["id"]`` is
  ``"redacted_thinking"`` (as pydantic-ai and :mod:`harness.models.anthropic` do),
  ``tool_use`` as :class:`~harness.core.messages.ToolCallPart`; other blocks (server tool
  use, web search results...) as :class:`~harness.core.messages.UnknownPart` of kind
  ``"anthropic-<type>"`` holding the block;
* a response message's ``id``, ``model``, ``stop_reason`` (normalised, the original in
  ``extra["provider_details"]``) and ``usage`` fill the canonical message's fields.

Part of :mod:`harness.wire`; import the public API from there.
"""

from __future__ import annotations

__all__ = ["ANTHROPIC_ROLES", "add_anthropic_message", "messages_from_anthropic", "system_parts"]

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, cast

from harness.core.messages import (
    CanonicalMessage,
    Part,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    Usage,
    UserPromptPart,
)
from harness.errors import WireFormatError
from harness.wire.foreign import (
    Slot,
    TurnBuilder,
    block_extra,
    content_item,
    is_mapping,
    leftovers,
    located,
    unknown_part,
)
from harness.wire.values import check_args, preview, type_name

ANTHROPIC_ROLES: Final = ("user", "assistant")
"""The roles of Messages API messages (a ``system`` role is read too, as a system prompt)."""

PROVIDER: Final = "anthropic"

REDACTED_ID: Final = "redacted_thinking"

_FINISH_REASONS: Final = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_call",
    "refusal": "content_filter",
}

_USAGE_TOKENS: Final = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)

_EMPTY: Final[Mapping[str, Any]] = {}


def _object(value: Any, what: str, field: str | None = None) -> Mapping[str, Any]:
    if not is_mapping(value):
        raise WireFormatError(f"{what} must be a JSON object, got {type_name(value)}", field=field)
    return cast("Mapping[str, Any]", value)


def _blocks(content: object) -> list[Any]:
    if not isinstance(content, list):
        raise WireFormatError(
            f"must be a string, an array or null, got {type_name(content)}", field="content"
        )
    return cast("list[Any]", content)


def _string(data: Mapping[str, Any], key: str, field: str, *, empty: bool = True) -> str:
    value: object = data.get(key)
    if not isinstance(value, str) or (not empty and not value):
        if value is None:
            raise WireFormatError("missing required field", field=field)
        raise WireFormatError(
            f"must be a {'' if empty else 'non-empty '}string, got {preview(value)}", field=field
        )
    return value


# ---------------------------------------------------------------------------------------
# Blocks
# ---------------------------------------------------------------------------------------


def _source_item(block: Mapping[str, Any], url_kind: str) -> dict[str, Any] | None:
    source: object = block.get("source")
    if not is_mapping(source):
        return None
    fields = cast("Mapping[str, Any]", source)
    kind: object = fields.get("type")
    if kind == "base64" and set(fields) == {"type", "media_type", "data"}:
        return {"kind": "binary", "media_type": fields["media_type"], "data": fields["data"]}
    if kind == "url" and set(fields) == {"type", "url"}:
        return {"kind": url_kind, "url": fields["url"]}
    return None


def _user_item(block: Mapping[str, Any]) -> list[Any]:
    kind: object = block.get("type")
    mapped: Any = None
    if kind == "text" and isinstance(block.get("text"), str):
        mapped, consumed = block["text"], ("type", "text")
    elif kind in ("image", "document"):
        mapped, consumed = (
            _source_item(block, "image-url" if kind == "image" else "document-url"),
            ("type", "source"),
        )
    else:
        consumed = ()
    if mapped is None:
        return [dict(block)]
    return content_item(mapped, leftovers(block, consumed))


def _tool_result(builder: TurnBuilder, block: Mapping[str, Any], index: int) -> ToolReturnPart:
    call_id = _string(block, "tool_use_id", f"content[{index}].tool_use_id", empty=False)
    extra = block_extra(ToolReturnPart, leftovers(block, ("type", "tool_use_id", "content")))
    return ToolReturnPart(
        tool_call_id=call_id,
        tool_name=builder.call_names.get(call_id),
        content=block.get("content"),
        extra=extra,
    )


def _user_parts(builder: TurnBuilder, blocks: list[Any]) -> list[Part]:
    parts: list[Part] = []
    items: list[Any] = []
    for index, value in enumerate(blocks):
        if isinstance(value, str):
            items.append(value)
            continue
        block = _object(value, "a content block", f"content[{index}]")
        if block.get("type") == "tool_result":
            if items:
                parts.append(UserPromptPart(tuple(items)))
                items = []
            parts.append(_tool_result(builder, block, index))
        else:
            items.extend(_user_item(block))
    if items:
        parts.append(UserPromptPart(tuple(items)))
    return parts


def _assistant_part(builder: TurnBuilder, value: Any, index: int) -> Part:
    if isinstance(value, str):
        return TextPart(value)
    field = f"content[{index}]"
    block = _object(value, "a content block", field)
    kind: object = block.get("type")
    if kind == "text":
        text = _string(block, "text", f"{field}.text")
        return TextPart(text, extra=block_extra(TextPart, leftovers(block, ("type", "text"))))
    if kind == "thinking":
        thinking = _string(block, "thinking", f"{field}.thinking")
        signature: object = block.get("signature")
        consumed = ("type", "thinking", "signature") if isinstance(signature, str) else ("type", "thinking")
        return ThoughtPart(
            thinking,
            signature=signature if isinstance(signature, str) else None,
            provider_name=PROVIDER,
            extra=block_extra(ThoughtPart, leftovers(block, consumed)),
        )
    if kind == "redacted_thinking":
        data = _string(block, "data", f"{field}.data")
        extra = block_extra(ThoughtPart, leftovers(block, ("type", "data")))
        return ThoughtPart("", signature=data, provider_name=PROVIDER, extra={**extra, "id": REDACTED_ID})
    if kind == "tool_use":
        call_id = _string(block, "id", f"{field}.id", empty=False)
        name = _string(block, "name", f"{field}.name")
        raw: object = block.get("input")
        args = None if raw is None else check_args(raw, f"{field}.input")
        builder.call_names[call_id] = name
        return ToolCallPart(
            tool_call_id=call_id,
            tool_name=name,
            args=args,
            extra=block_extra(ToolCallPart, leftovers(block, ("type", "id", "name", "input"))),
        )
    return unknown_part(f"anthropic-{kind}", block)


def system_parts(system: object, field: str = "system") -> list[Part]:
    """The system prompt parts of a ``system`` value: a string, or a list of text blocks.

    Raises:
        WireFormatError: ``system`` is neither (names ``field``).
    """
    if system is None:
        return []
    if isinstance(system, str):
        return [SystemPromptPart(system)]
    if not isinstance(system, list):
        raise WireFormatError(
            f"must be a string or an array of text blocks, got {type_name(system)}", field=field
        )
    parts: list[Part] = []
    for index, value in enumerate(cast("list[Any]", system)):
        if isinstance(value, str):
            parts.append(SystemPromptPart(value))
            continue
        block = _object(value, "a system block", f"{field}[{index}]")
        if block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise WireFormatError(
                f"a system prompt holds text blocks only, got {preview(block.get('type'))}",
                field=f"{field}[{index}]",
            )
        extra = block_extra(SystemPromptPart, leftovers(block, ("type", "text")))
        parts.append(SystemPromptPart(block["text"], extra=extra))
    return parts


# ---------------------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------------------


def _usage(value: object) -> Usage | None:
    if not is_mapping(value):
        return None
    data = cast("Mapping[str, Any]", value)
    counts: dict[str, int] = {}
    for key in _USAGE_TOKENS:
        count: object = data.get(key)
        if count is None:
            continue
        if not isinstance(count, int) or isinstance(count, bool):
            return None  # kept verbatim with the message's other keys
        counts[key] = count
    read = counts.get("cache_read_input_tokens", 0)
    write = counts.get("cache_creation_input_tokens", 0)
    return Usage(
        request_tokens=counts.get("input_tokens", 0) + read + write,
        response_tokens=counts.get("output_tokens", 0),
        cached_tokens=read,
        cache_write_tokens=write,
        extra=leftovers(data, _USAGE_TOKENS),
    )


def _message_slots(message: Mapping[str, Any]) -> list[Slot]:
    slots: list[Slot] = []
    for key, field in (("id", "provider_response_id"), ("model", "model_name")):
        value: object = message.get(key)
        if isinstance(value, str):
            slots.append(Slot(field, value, key, value))
            slots.append(Slot("provider_name", PROVIDER, key, value))
    stop: object = message.get("stop_reason")
    if isinstance(stop, str):
        slots.append(Slot("finish_reason", _FINISH_REASONS.get(stop, stop), "stop_reason", stop))
        slots.append(Slot("provider_details", stop, "stop_reason", stop))
    usage = _usage(message.get("usage"))
    if usage is not None:
        slots.append(Slot("usage", usage, "usage", message["usage"]))
    return slots


def add_anthropic_message(
    builder: TurnBuilder,
    data: Any,
    *,
    slots: Sequence[Slot] = (),
    record_rest: Mapping[str, Any] = _EMPTY,
) -> None:
    """Add one Messages API message to ``builder``.

    Args:
        builder: Collects the canonical messages.
        data: The message.
        slots: Values of the record around the message that have a slot.
        record_rest: The keys of the record around the message without a slot.

    Raises:
        WireFormatError: The message is not a Messages API message (no location yet).
    """
    message = _object(data, "a message")
    role: object = message.get("role")
    content: object = message.get("content")
    placeholder: Part | None = None
    own = _message_slots(message)
    consumed = {"role", "content", *(slot.key for slot in own)}
    if role == "user":
        if isinstance(content, str):
            parts: list[Part] = [UserPromptPart(content)]
        else:
            parts = [] if content is None else _user_parts(builder, _blocks(content))
            placeholder = UserPromptPart(())
        side = "request"
    elif role == "assistant":
        if isinstance(content, str):
            parts = [TextPart(content)]
        else:
            blocks = [] if content is None else _blocks(content)
            parts = [_assistant_part(builder, block, index) for index, block in enumerate(blocks)]
        side = "response"
    elif role == "system":
        parts = system_parts(content, "content")
        placeholder = SystemPromptPart("")
        side = "request"
    elif role is None:
        hint = " (it looks like harness's wire format: try format 'pydantic-ai')" if "kind" in message else ""
        raise WireFormatError(f"missing required field{hint}", field="role")
    else:
        hint = (
            " (an OpenAI chat message? try format 'openai')"
            if role in ("tool", "developer", "function")
            else ""
        )
        raise WireFormatError(
            f"{preview(role)} is not an Anthropic role (user, assistant, or system){hint}", field="role"
        )
    builder.add(
        side,
        parts,
        slots=[*own, *slots],
        message_rest=leftovers(message, consumed),
        record_rest=record_rest,
        placeholder=placeholder,
    )


def messages_from_anthropic(
    messages: Iterable[Mapping[str, Any]],
    *,
    system: str | Sequence[Mapping[str, Any]] | None = None,
) -> list[CanonicalMessage]:
    """Convert Anthropic Messages API messages to a canonical history.

    Consecutive messages of one role become one canonical message (Claude Code writes
    each block of a response as its own line), so requests and responses alternate. Every
    key without a canonical slot is kept (see :mod:`harness.wire.foreign`).

    Args:
        messages: The messages, e.g. the ``messages`` of a request body.
        system: The request's ``system`` field (a string or text blocks), read as system
            prompt parts of the first request.

    Returns:
        The canonical history.

    Raises:
        WireFormatError: A message is not a Messages API message; the error names its index
            (``message_index``), the block and key in ``field`` (such as ``content[2].id``)
            and ``format="anthropic"``.
    """
    builder = TurnBuilder()
    try:
        prompt = system_parts(system)
    except WireFormatError as exc:
        raise located(exc, format="anthropic") from exc
    if prompt:
        builder.add("request", prompt)
    for index, message in enumerate(messages):
        try:
            add_anthropic_message(builder, message)
        except WireFormatError as exc:
            raise located(exc, format="anthropic", message_index=index) from exc
    return builder.build()
