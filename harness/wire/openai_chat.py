"""Reading OpenAI Chat Completions messages (the ``messages`` of a request) as canonical messages.

The mapping (see :mod:`harness.wire.foreign` for how unmodelled keys are kept):

* ``system`` and ``developer`` messages: one :class:`~harness.core.messages.SystemPromptPart`
  per text (a developer message keeps ``role`` in ``extra["message"]``);
* ``user``: one :class:`~harness.core.messages.UserPromptPart`; a content array becomes
  a tuple of items in pydantic-ai's shapes (text as strings, ``image_url`` as
  ``image-url``, or ``binary`` for a base64 ``data:`` URL, ``detail`` in
  ``vendor_metadata``; ``input_audio`` as ``binary`` audio); other items are kept verbatim;
* ``assistant``: ``reasoning_content`` (or ``reasoning``) as a
  :class:`~harness.core.messages.ThoughtPart`, the text (string or array items) as
  :class:`~harness.core.messages.TextPart`, a ``refusal`` as a text part marked
  ``extra["refusal"] = True``, then one :class:`~harness.core.messages.ToolCallPart` per
  ``tool_calls`` entry with its ``arguments`` string kept exactly as given; ``content:
  null`` is no text;
* ``tool``: a :class:`~harness.core.messages.ToolReturnPart` whose ``tool_name`` is the
  called tool's (or the message's ``name``); its content is kept as given;
* the deprecated ``function_call`` / ``function`` pair: a tool call and its return with an
  id made up as ``function_call_<n>`` (marked ``extra["synthesized_id"] = True``).

Part of :mod:`harness.wire`; import the public API from there.
"""

from __future__ import annotations

__all__ = ["OPENAI_ROLES", "add_openai_message", "messages_from_openai"]

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
    UserPromptPart,
)
from harness.errors import WireFormatError
from harness.wire.foreign import (
    Slot,
    TurnBuilder,
    block_extra,
    content_item,
    data_url_item,
    is_mapping,
    leftovers,
    located,
    unknown_part,
)
from harness.wire.values import check_args, preview, type_name

OPENAI_ROLES: Final = ("system", "developer", "user", "assistant", "tool", "function")
"""The roles of Chat Completions messages."""

_AUDIO_TYPES: Final = {"wav": "audio/wav", "mp3": "audio/mpeg"}

_EMPTY: Final[Mapping[str, Any]] = {}


def _object(value: Any, what: str, field: str | None = None) -> Mapping[str, Any]:
    if not is_mapping(value):
        raise WireFormatError(f"{what} must be a JSON object, got {type_name(value)}", field=field)
    return cast("Mapping[str, Any]", value)


def _string(data: Mapping[str, Any], key: str, field: str) -> str:
    value: object = data.get(key)
    if not isinstance(value, str):
        reason = "missing required field" if value is None else f"must be a string, got {type_name(value)}"
        raise WireFormatError(reason, field=field)
    return value


def _items(content: object, field: str = "content") -> list[Any]:
    if not isinstance(content, list):
        raise WireFormatError(f"must be a string, an array or null, got {type_name(content)}", field=field)
    return cast("list[Any]", content)


# ---------------------------------------------------------------------------------------
# Content items
# ---------------------------------------------------------------------------------------


def _image(item: Mapping[str, Any]) -> dict[str, Any] | None:
    image: object = item.get("image_url")
    if isinstance(image, str):  # some clients write the URL directly
        return data_url_item(image)
    if not is_mapping(image):
        return None
    fields = cast("Mapping[str, Any]", image)
    url: object = fields.get("url")
    if not isinstance(url, str) or not set(fields) <= {"url", "detail"}:
        return None
    out = data_url_item(url)
    if fields.get("detail") is not None:
        out["vendor_metadata"] = {"detail": fields["detail"]}
    return out


def _audio(item: Mapping[str, Any]) -> dict[str, Any] | None:
    audio: object = item.get("input_audio")
    if not is_mapping(audio):
        return None
    fields = cast("Mapping[str, Any]", audio)
    data: object = fields.get("data")
    media_type = _AUDIO_TYPES.get(str(fields.get("format")))
    if not isinstance(data, str) or media_type is None or set(fields) != {"data", "format"}:
        return None
    return {"kind": "binary", "media_type": media_type, "data": data}


def _user_items(content: list[Any]) -> tuple[Any, ...]:
    out: list[Any] = []
    for index, item in enumerate(content):
        if isinstance(item, str):
            out.append(item)
            continue
        fields = _object(item, "a content item", f"content[{index}]")
        kind: object = fields.get("type")
        mapped: Any = None
        if kind == "text" and isinstance(fields.get("text"), str):
            mapped, consumed = fields["text"], ("type", "text")
        elif kind == "image_url":
            mapped, consumed = _image(fields), ("type", "image_url")
        elif kind == "input_audio":
            mapped, consumed = _audio(fields), ("type", "input_audio")
        else:
            consumed = ()
        if mapped is None:
            out.append(dict(fields))  # a file, or a shape pydantic-ai has no item for: verbatim
        else:
            out.extend(content_item(mapped, leftovers(fields, consumed)))
    return tuple(out)


def _text_parts(content: list[Any], *, system: bool) -> list[Part]:
    parts: list[Part] = []
    for index, item in enumerate(content):
        if isinstance(item, str):
            parts.append(SystemPromptPart(item) if system else TextPart(item))
            continue
        fields = _object(item, "a content item", f"content[{index}]")
        kind: object = fields.get("type")
        if kind == "text" and isinstance(fields.get("text"), str):
            cls = SystemPromptPart if system else TextPart
            extra = block_extra(cls, leftovers(fields, ("type", "text")))
            parts.append(cls(fields["text"], extra=extra))
        elif kind == "refusal" and not system and isinstance(fields.get("refusal"), str):
            extra = block_extra(TextPart, leftovers(fields, ("type", "refusal")))
            parts.append(TextPart(fields["refusal"], extra={**extra, "refusal": True}))
        elif system:
            raise WireFormatError(
                f"a system message holds text only, got a {preview(kind)} item", field=f"content[{index}]"
            )
        else:
            parts.append(unknown_part(f"openai-{kind}", fields))
    return parts


# ---------------------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------------------


def _tool_call(builder: TurnBuilder, value: Any, index: int) -> Part:
    field = f"tool_calls[{index}]"
    call = _object(value, "a tool call", field)
    call_id: object = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise WireFormatError("must be a non-empty string", field=f"{field}.id")
    kind: object = call.get("type") or "function"
    if kind not in ("function", "custom"):
        return unknown_part(f"openai-{kind}", call)
    assert isinstance(kind, str)
    body = _object(call.get(kind), f"the {kind!r} of a tool call", f"{field}.{kind}")
    name = _string(body, "name", f"{field}.{kind}.name")
    raw: object = body.get("arguments" if kind == "function" else "input")
    args = None if raw is None else check_args(raw, f"{field}.{kind}.arguments")
    extra = block_extra(ToolCallPart, leftovers(call, ("id", "type", kind)))
    rest = leftovers(body, ("name", "arguments" if kind == "function" else "input"))
    if kind == "custom":
        extra["type"] = "custom"
    if rest:
        extra[kind] = rest
    builder.call_names[call_id] = name
    return ToolCallPart(tool_call_id=call_id, tool_name=name, args=args, extra=extra)


def _function_call(builder: TurnBuilder, value: Any, pending: dict[str, str]) -> ToolCallPart:
    call = _object(value, "a function call", "function_call")
    name = _string(call, "name", "function_call.name")
    raw: object = call.get("arguments")
    args = None if raw is None else check_args(raw, "function_call.arguments")
    call_id = f"function_call_{len(builder.call_names)}"
    while call_id in builder.call_names:
        call_id += "_"
    builder.call_names[call_id] = name
    pending[name] = call_id
    extra = block_extra(ToolCallPart, leftovers(call, ("name", "arguments")))
    return ToolCallPart(
        tool_call_id=call_id, tool_name=name, args=args, extra={**extra, "synthesized_id": True}
    )


def _assistant_parts(
    builder: TurnBuilder, data: Mapping[str, Any], pending: dict[str, str]
) -> tuple[list[Part], list[str]]:
    parts: list[Part] = []
    consumed = ["role", "content", "refusal", "tool_calls", "function_call"]
    for key in ("reasoning_content", "reasoning"):
        reasoning: object = data.get(key)
        if isinstance(reasoning, str) and not any(isinstance(p, ThoughtPart) for p in parts):
            parts.append(ThoughtPart(reasoning, extra={"field": key}))
            consumed.append(key)
    content: object = data.get("content")
    if isinstance(content, str):
        if content:
            parts.append(TextPart(content))
    elif content is not None:
        parts.extend(_text_parts(_items(content), system=False))
    refusal: object = data.get("refusal")
    if isinstance(refusal, str):
        parts.append(TextPart(refusal, extra={"refusal": True}))
    elif refusal is not None:
        consumed.remove("refusal")
    calls: object = data.get("tool_calls")
    if calls is not None:
        parts.extend(
            _tool_call(builder, call, index) for index, call in enumerate(_items(calls, "tool_calls"))
        )
    if data.get("function_call") is not None:
        parts.append(_function_call(builder, data["function_call"], pending))
    return parts, consumed


def _tool_return(builder: TurnBuilder, data: Mapping[str, Any], pending: dict[str, str]) -> ToolReturnPart:
    name: object = data.get("name")
    if data.get("role") == "function":
        tool = _string(data, "name", "name")
        call_id = pending.pop(tool, None)
        extra: dict[str, Any] = {"synthesized_id": True}
        if call_id is None:
            call_id = f"function_call_{len(builder.call_names)}"
            extra["unanswered"] = True
        return ToolReturnPart(tool_call_id=call_id, tool_name=tool, content=data.get("content"), extra=extra)
    call_id: object = data.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise WireFormatError("must be a non-empty string", field="tool_call_id")
    tool_name = name if isinstance(name, str) else builder.call_names.get(call_id)
    return ToolReturnPart(tool_call_id=call_id, tool_name=tool_name, content=data.get("content"))


def add_openai_message(
    builder: TurnBuilder,
    data: Any,
    *,
    pending: dict[str, str],
    slots: Sequence[Slot] = (),
    record_rest: Mapping[str, Any] = _EMPTY,
) -> None:
    """Add one Chat Completions message to ``builder``.

    Args:
        builder: Collects the canonical messages.
        data: The message.
        pending: Function calls (deprecated ``function_call``) not answered yet, by name.
        slots: Values of the record around the message that have a slot.
        record_rest: The keys of the record around the message without a slot.

    Raises:
        WireFormatError: The message is not a Chat Completions message (no location yet).
    """
    message = _object(data, "a message")
    role: object = message.get("role")
    if role is None:
        hint = " (it looks like harness's wire format: try format 'pydantic-ai')" if "kind" in message else ""
        raise WireFormatError(f"missing required field{hint}", field="role")
    consumed: list[str] = ["role", "content"]
    parts: list[Part]
    content: object = message.get("content")
    if role in ("system", "developer"):
        if isinstance(content, str):
            parts = [SystemPromptPart(content)]
        else:
            parts = [] if content is None else _text_parts(_items(content), system=True)
        if role == "developer":
            consumed.remove("role")
        side = "request"
    elif role == "user":
        if isinstance(content, str):
            parts = [UserPromptPart(content)]
        else:
            parts = [UserPromptPart(() if content is None else _user_items(_items(content)))]
        side = "request"
    elif role == "assistant":
        parts, consumed = _assistant_parts(builder, message, pending)
        side = "response"
    elif role in ("tool", "function"):
        parts = [_tool_return(builder, message, pending)]
        consumed += ["tool_call_id"] if role == "tool" else ["name"]
        if role == "tool" and isinstance(message.get("name"), str):
            consumed.append("name")
        side = "request"
    else:
        raise WireFormatError(
            f"unknown role {preview(role)} (OpenAI roles are {', '.join(OPENAI_ROLES)})", field="role"
        )
    builder.add(
        side,
        parts,
        slots=slots,
        message_rest=leftovers(message, consumed),
        record_rest=record_rest,
        placeholder=SystemPromptPart("") if role in ("system", "developer") else None,
    )


def messages_from_openai(
    messages: Iterable[Mapping[str, Any]],
) -> list[CanonicalMessage]:
    """Convert OpenAI Chat Completions messages to a canonical history.

    Consecutive messages of one side (``system``, ``user`` and ``tool`` messages are
    requests, ``assistant`` messages responses) become one canonical message, so requests
    and responses alternate. Every key without a canonical slot is kept (see
    :mod:`harness.wire.foreign`).

    Args:
        messages: The messages, e.g. the ``messages`` of a request body.

    Returns:
        The canonical history.

    Raises:
        WireFormatError: A message is not a Chat Completions message; the error names its
            index (``message_index``), the field and ``format="openai"``.
    """
    builder = TurnBuilder()
    pending: dict[str, str] = {}
    for index, message in enumerate(messages):
        try:
            add_openai_message(builder, message, pending=pending)
        except WireFormatError as exc:
            raise located(exc, format="openai", message_index=index) from exc
    return builder.build()
