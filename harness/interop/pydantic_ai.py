"""Use harness histories and capabilities from pydantic-ai.

Needs the ``pydantic-ai`` extra (``pip install "harness-loop[pydantic-ai]"``); importing
this module without pydantic-ai installed raises :class:`InteropError`.

Conversion:

* :func:`messages_from_pydantic_ai` turns pydantic-ai ``ModelMessage`` objects into
  :class:`~harness.messages.CanonicalMessage` objects, :func:`messages_to_pydantic_ai`
  goes back. Both go through the JSON form both libraries share (see :mod:`harness.wire`),
  so every pydantic-ai part kind survives: kinds harness does not model become
  :class:`~harness.messages.UnknownPart` objects that keep every key.
* pydantic-ai -> harness -> pydantic-ai gives messages equal to pydantic-ai's own
  serialisation round trip (``validate_python(dump_python(m, mode="json"))``), which is
  ``m`` itself for messages pydantic-ai loaded or built (pydantic-ai's first round trip
  fills in inferred values, such as an ``ImageUrl``'s media type, and narrows
  ``BinaryContent`` to ``BinaryImage``).
* harness -> pydantic-ai -> harness gives equal messages. Where pydantic-ai has no place
  for a harness value (metadata on a user prompt, text, thinking or tool-call part, a
  missing timestamp or usage, a retry prompt, which pydantic-ai 2.x stores as a retried
  tool return or as retry feedback), the harness form is kept in the pydantic-ai message's
  ``metadata`` under the key :data:`STASH_KEY` (pydantic-ai never sends ``metadata`` to the
  model) and restored on the way back, as long as the pydantic-ai side left that part (or
  the message's own fields) unchanged.

Running a capability stack:

* :class:`HarnessCapabilities` is a pydantic-ai capability: its ``before_model_request``
  runs the stack (through :func:`harness.compaction.compact`, with the invariant guard)
  and writes the edited history back to the run's persistent history
  (``RunContext.messages``); request-scoped parts (a limit warning) go into the request
  being sent only.
* :func:`as_history_processor` returns the same stack as a pydantic-ai history processor,
  for ``pydantic_ai.capabilities.ProcessHistory``. pydantic-ai stores a history
  processor's output as the run's history, so request-scoped parts are stored too; the
  processor removes the ones it added on the next request (they carry a harness mark).

Both convert each pydantic-ai message once: conversions are cached by object identity in
both directions (pydantic-ai passes the same message objects on every request), and only
messages the stack changed are converted back, reusing the pydantic-ai part objects of
every part the stack left alone.
"""

from __future__ import annotations

__all__ = [
    "STASH_KEY",
    "HarnessCapabilities",
    "HarnessHistoryProcessor",
    "InteropError",
    "MessageConverter",
    "ProcessedHistory",
    "as_history_processor",
    "messages_from_pydantic_ai",
    "messages_to_pydantic_ai",
]

import dataclasses
import operator
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, cast

import attrs

from harness.compaction import CompactionResult, compact
from harness.context import CompactionEvent, RequestContext
from harness.errors import HarnessError, WireFormatError
from harness.messages import CanonicalMessage, Part
from harness.plugins import PluginManager
from harness.tokens import TokenCounter
from harness.wire import messages_from_jsonable, messages_to_jsonable


class InteropError(HarnessError):
    """A history cannot be converted to or from another framework's messages."""


try:
    import pydantic
    from pydantic_ai import messages as _pai
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.tools import RunContext
except ImportError as _exc:  # pragma: no cover - exercised in a subprocess test
    raise InteropError(
        "harness.interop.pydantic_ai needs pydantic-ai; install it with "
        '`pip install "harness-loop[pydantic-ai]"` (pydantic-ai-slim>=2.62)'
    ) from _exc

ModelMessage = _pai.ModelRequest | _pai.ModelResponse
"""A pydantic-ai message (``pydantic_ai.messages.ModelMessage`` without its annotation)."""

STASH_KEY: Final = "harness_interop"
"""Key of pydantic-ai ``metadata`` holding the harness values pydantic-ai has no field for."""

_ADAPTER: Final = _pai.ModelMessagesTypeAdapter
_MESSAGE_TYPES: Final = (_pai.ModelRequest, _pai.ModelResponse)

OnEvent = Callable[[CompactionEvent], object]
"""Called with every compaction event the stack reports."""


# ---------------------------------------------------------------------------------------
# Dict-level helpers
# ---------------------------------------------------------------------------------------


def _dump(messages: Sequence[ModelMessage]) -> list[dict[str, Any]]:
    """pydantic-ai messages as JSON-ready dicts (pydantic-ai's own serialisation)."""
    return cast("list[dict[str, Any]]", _ADAPTER.dump_python(list(messages), mode="json"))


def _validate(items: list[dict[str, Any]], indices: Sequence[int]) -> list[ModelMessage]:
    try:
        return list(_ADAPTER.validate_python(items))
    except pydantic.ValidationError as exc:
        error = exc.errors()[0]
        location = list(error["loc"])
        position = location[0] if location and isinstance(location[0], int) else 0
        where = f"message {indices[position] if position < len(indices) else position}"
        if "parts" in location:
            after = location[location.index("parts") + 1 :]
            if after and isinstance(after[0], int):
                where += f", part {after[0]}"
                fields = [str(item) for item in after[2:] if not isinstance(item, int)]
                if fields:
                    where += f", field {'.'.join(fields)!r}"
        raise InteropError(f"{where}: pydantic-ai refuses it: {error['msg']}") from exc


def _pop_stash(item: dict[str, Any]) -> dict[str, Any] | None:
    """Take the stash out of a dumped pydantic-ai message (restoring its ``metadata``)."""
    raw: object = item.get("metadata")
    if not isinstance(raw, dict):
        return None
    metadata = cast("dict[str, Any]", raw)
    found: object = metadata.get(STASH_KEY)
    if not isinstance(found, dict):
        return None
    stash = cast("dict[str, Any]", found)
    rest = {k: v for k, v in metadata.items() if k != STASH_KEY}
    item["metadata"] = None if (not rest and stash.get("metadata_none")) else rest
    return stash


def _fields(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != "parts"}


def _restore(item: dict[str, Any]) -> dict[str, Any]:
    """The harness form of a dumped pydantic-ai message, using its stash where still valid."""
    stash = _pop_stash(item)
    if stash is None:
        return item
    out = dict(item)
    message = stash.get("message")
    if isinstance(message, dict):
        message = cast("dict[str, Any]", message)
        if message.get("pydantic_ai") == _fields(item):
            out = {**cast("dict[str, Any]", message.get("harness", {})), "parts": item["parts"]}
    parts_stash = stash.get("parts")
    if isinstance(parts_stash, dict) and isinstance(item.get("parts"), list):
        parts = list(cast("list[Any]", item["parts"]))
        for key, entry in cast("dict[str, Any]", parts_stash).items():
            if not (isinstance(entry, dict) and key.isdigit()):
                continue
            index = int(key)
            entry = cast("dict[str, Any]", entry)
            if index < len(parts) and parts[index] == entry.get("pydantic_ai"):
                parts[index] = entry.get("harness")
        out["parts"] = parts
    return out


def _from_dumped(items: list[dict[str, Any]], indices: Sequence[int]) -> list[CanonicalMessage]:
    restored = [_restore(item) for item in items]
    try:
        return messages_from_jsonable(restored)
    except WireFormatError as exc:
        index = exc.message_index if exc.message_index is not None else 0
        raise WireFormatError(
            exc.reason,
            message_index=indices[index] if index < len(indices) else exc.message_index,
            part_index=exc.part_index,
            field=exc.field,
        ) from exc


def _check_pydantic_ai(messages: Iterable[object]) -> list[ModelMessage]:
    out: list[ModelMessage] = []
    for index, message in enumerate(messages):
        if not isinstance(message, _MESSAGE_TYPES):
            raise InteropError(
                f"message {index}: expected a pydantic-ai ModelRequest or ModelResponse, "
                f"got {type(message).__name__}"
            )
        out.append(message)
    return out


def _check_canonical(messages: Iterable[object]) -> list[CanonicalMessage]:
    out: list[CanonicalMessage] = []
    for index, message in enumerate(messages):
        if not isinstance(message, CanonicalMessage):
            raise InteropError(f"message {index}: expected a CanonicalMessage, got {type(message).__name__}")
        out.append(message)
    return out


# ---------------------------------------------------------------------------------------
# The converter
# ---------------------------------------------------------------------------------------


def _signature(message: ModelMessage) -> tuple[Any, ...]:
    """What a cached conversion of ``message`` depends on (pydantic-ai mutates the tail).

    The parts by identity (a copy of the list, which may be changed in place), every
    field value, and a copy of ``metadata`` (the one mutable field pydantic-ai updates).
    """
    metadata = message.metadata
    return (tuple(message.parts), tuple(vars(message).values()), None if metadata is None else dict(metadata))


_Entry = tuple[ModelMessage, tuple[Any, ...], CanonicalMessage]
"""A cached conversion: the pydantic-ai message, its signature, the harness message."""


class MessageConverter:
    """Converts histories both ways, caching each conversion by object identity.

    pydantic-ai hands a history processor (and a capability's ``before_model_request``) the
    same message objects on every request of a run, so with one converter per run only new
    or changed messages are converted. Converting harness messages back returns the very
    pydantic-ai object a harness message came from, and a message the stack changed reuses
    the pydantic-ai part objects of its unchanged parts.

    A cached pydantic-ai conversion is used only while the message still has the same
    parts (by identity) and field values, so pydantic-ai filling in a request's
    ``run_id``, ``timestamp`` or ``instructions`` after the fact is picked up.
    """

    def __init__(self) -> None:
        """Create a converter with empty caches."""
        self._forward: dict[int, _Entry] = {}
        self._backward: dict[int, tuple[CanonicalMessage, ModelMessage]] = {}
        self._parts: dict[int, tuple[Part, Any]] = {}

    def to_canonical(self, messages: Sequence[ModelMessage]) -> list[CanonicalMessage]:
        """Convert pydantic-ai messages to harness messages (cached per message object).

        Raises:
            InteropError: An element is not a pydantic-ai message.
            WireFormatError: A message cannot be read (names the message index).
        """
        forward = self._forward
        out: list[Any] = []
        misses: list[int] = []
        for index, message in enumerate(messages):
            entry = forward.get(id(message))
            if entry is not None and entry[0] is message and entry[1] == _signature(message):
                out.append(entry[2])
            else:
                out.append(None)
                misses.append(index)
        if misses:
            missed = _check_pydantic_ai(messages[i] for i in misses)
            converted = _from_dumped(_dump(missed), misses)
            for index, message, canonical in zip(misses, missed, converted, strict=True):
                out[index] = canonical
                self._remember(canonical, message)
        if len(forward) > 2 * len(out) + 64:
            self._prune(messages, out)
        return cast("list[CanonicalMessage]", out)

    def to_pydantic_ai(self, messages: Sequence[CanonicalMessage]) -> list[ModelMessage]:
        """Convert harness messages to pydantic-ai messages.

        A message this converter produced (or converted from pydantic-ai) comes back as the
        same pydantic-ai object; others are converted, reusing cached pydantic-ai parts.

        Raises:
            InteropError: An element is not a harness message, or pydantic-ai refuses a
                converted message (for example a tool return without a tool name).
        """
        checked = _check_canonical(messages)
        backward = self._backward
        out: list[ModelMessage | None] = []
        misses: list[int] = []
        for index, canonical in enumerate(checked):
            entry = backward.get(id(canonical))
            if entry is not None and entry[0] is canonical:
                out.append(entry[1])
            else:
                out.append(None)
                misses.append(index)
        if misses:
            converted = _convert_to_pydantic_ai([checked[i] for i in misses], misses, self._parts)
            for index, message in zip(misses, converted, strict=True):
                canonical = checked[index]
                out[index] = message
                self._remember(canonical, message)
        return cast("list[ModelMessage]", out)

    def _remember(self, canonical: CanonicalMessage, message: ModelMessage) -> None:
        """Cache the conversion both ways, and its parts for reuse."""
        self._forward[id(message)] = (message, _signature(message), canonical)
        self._backward[id(canonical)] = (canonical, message)
        if len(canonical.parts) != len(message.parts):  # pragma: no cover - wire keeps parts 1:1
            return
        parts = self._parts
        for ours, theirs in zip(canonical.parts, message.parts, strict=True):
            parts[id(ours)] = (ours, theirs)

    def _prune(self, messages: Sequence[ModelMessage], canonical: Sequence[CanonicalMessage]) -> None:
        """Forget conversions of messages no longer in the history (amortised O(1) per message)."""
        old = self._forward
        self._forward = {id(m): old[id(m)] for m in messages if id(m) in old}
        self._backward = {id(c): (c, m) for c, m in zip(canonical, messages, strict=True)}
        self._parts = {}
        for message, _, ours in self._forward.values():
            if len(ours.parts) == len(message.parts):
                for part, theirs in zip(ours.parts, message.parts, strict=True):
                    self._parts[id(part)] = (part, theirs)


def _convert_to_pydantic_ai(
    messages: list[CanonicalMessage],
    indices: Sequence[int],
    known_parts: dict[int, tuple[Part, Any]] | None = None,
) -> list[ModelMessage]:
    """Convert harness messages (no cache), stashing what pydantic-ai cannot hold."""
    try:
        items = messages_to_jsonable(messages)
    except WireFormatError as exc:
        index = exc.message_index if exc.message_index is not None else 0
        raise WireFormatError(
            exc.reason, message_index=indices[index], part_index=exc.part_index, field=exc.field
        ) from exc
    built = _validate(items, indices)
    if known_parts:
        for position, (canonical, message) in enumerate(zip(messages, built, strict=True)):
            reused = [
                known[1] if (known := known_parts.get(id(part))) is not None and known[0] is part else None
                for part in canonical.parts
            ]
            if any(part is not None for part in reused):
                parts = [
                    ours if ours is not None else theirs
                    for ours, theirs in zip(reused, message.parts, strict=True)
                ]
                built[position] = dataclasses.replace(message, parts=parts)
    dumped = _dump(built)
    back = messages_from_jsonable([_restore(dict(item)) for item in dumped])
    for position, (canonical, again) in enumerate(zip(messages, back, strict=True)):
        if again != canonical:
            built[position] = _with_stash(
                built[position], items[position], dumped[position], canonical, again
            )
    return built


def _with_stash(
    message: ModelMessage,
    ours: dict[str, Any],
    theirs: dict[str, Any],
    canonical: CanonicalMessage,
    again: CanonicalMessage,
) -> ModelMessage:
    """Record in ``message.metadata`` the harness values its round trip would lose."""
    stash: dict[str, Any] = {}
    if len(canonical.parts) == len(again.parts):
        parts = {
            str(index): {"harness": ours["parts"][index], "pydantic_ai": theirs["parts"][index]}
            for index, (a, b) in enumerate(zip(canonical.parts, again.parts, strict=True))
            if a != b
        }
        if parts:
            stash["parts"] = parts
    if again.replace(parts=canonical.parts) != canonical or len(canonical.parts) != len(again.parts):
        stash["message"] = {"harness": _fields(ours), "pydantic_ai": _fields(theirs)}
    metadata = message.metadata
    if metadata is None:
        stash["metadata_none"] = True
    return dataclasses.replace(message, metadata={**(metadata or {}), STASH_KEY: stash})


def messages_from_pydantic_ai(messages: Sequence[ModelMessage]) -> list[CanonicalMessage]:
    """Convert pydantic-ai messages to harness messages.

    Args:
        messages: ``ModelRequest`` and ``ModelResponse`` objects, e.g. ``result.all_messages()``.

    Returns:
        One :class:`~harness.messages.CanonicalMessage` per message, parts one to one.

    Raises:
        InteropError: An element is not a pydantic-ai message.
        WireFormatError: A message cannot be read as a harness message (names its index).
    """
    checked = _check_pydantic_ai(messages)
    return _from_dumped(_dump(checked), range(len(checked)))


def messages_to_pydantic_ai(messages: Sequence[CanonicalMessage]) -> list[ModelMessage]:
    """Convert harness messages to pydantic-ai messages.

    Args:
        messages: The history.

    Returns:
        One ``ModelRequest`` or ``ModelResponse`` per message, parts one to one (a harness
        retry prompt becomes pydantic-ai 2.x's retried ``ToolReturnPart`` or a
        ``RetryFeedbackPart``).

    Raises:
        InteropError: An element is not a harness message, or pydantic-ai refuses a
            message (names the message, part and field; e.g. a tool return without a
            tool name).
        WireFormatError: A value cannot be written as JSON.
    """
    checked = _check_canonical(messages)
    if not checked:
        return []
    return _convert_to_pydantic_ai(checked, range(len(checked)))


# ---------------------------------------------------------------------------------------
# Running a stack
# ---------------------------------------------------------------------------------------


@attrs.frozen
class ProcessedHistory:
    """What one pass of the capability stack produced.

    Attributes:
        persistent: The history to keep (the input objects wherever the stack changed
            nothing).
        sent: The history to send with this request: ``persistent`` with the
            request-scoped parts appended to its last request (``persistent`` itself when
            there are none).
        result: The stack's :class:`~harness.compaction.CompactionResult` (harness
            messages, events, request-scoped parts, token counts).
        changed: Whether ``persistent`` differs from the input.
        scoped: Whether ``sent`` carries request-scoped parts (differs from ``persistent``).
    """

    persistent: list[ModelMessage]
    sent: list[ModelMessage]
    result: CompactionResult
    changed: bool
    scoped: bool


_MAX_RUN_STATES: Final = 16


class HarnessHistoryProcessor:
    """A harness capability stack as a pydantic-ai history processor.

    Use it with ``pydantic_ai.capabilities.ProcessHistory(processor)`` (pydantic-ai 2.62
    takes history processors as capabilities), or call :meth:`process` directly. Build it
    with :func:`as_history_processor`.

    Per run (keyed by pydantic-ai's ``run_id``) the capabilities share one
    ``RequestContext.state``; conversions are cached across requests.
    """

    def __init__(
        self,
        capabilities: Sequence[object],
        *,
        context_window: int | None = None,
        model_name: str | None = None,
        token_counter: TokenCounter | None = None,
        on_event: OnEvent | None = None,
    ) -> None:
        """Create the processor; see :func:`as_history_processor` for the arguments."""
        self._manager = PluginManager()
        self._manager.add_capabilities(list(capabilities))
        self.context_window = context_window
        self.model_name = model_name
        self._token_counter = token_counter
        self.on_event = on_event
        self.converter = MessageConverter()
        self._states: OrderedDict[str | None, dict[str, Any]] = OrderedDict()
        self._scoped: tuple[ModelMessage, ModelMessage, tuple[Any, ...]] | None = None
        self.last: ProcessedHistory | None = None
        """The outcome of the latest pass (``None`` before the first)."""

    @property
    def plugin_manager(self) -> PluginManager:
        """The manager running the stack (register ``on_compaction`` observers here)."""
        return self._manager

    def _state(self, run_id: str | None) -> dict[str, Any]:
        state = self._states.get(run_id)
        if state is None:
            state = {}
            self._states[run_id] = state
            while len(self._states) > _MAX_RUN_STATES:
                self._states.popitem(last=False)
        else:
            self._states.move_to_end(run_id)
        return state

    def _without_scoped(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """Undo the request-scoped parts this processor added to a request pydantic-ai stored.

        pydantic-ai may have filled in fields of the sent request (``run_id``,
        ``instructions``...) after it was sent; those are kept, the added parts and their
        stash entries are dropped.
        """
        scoped, self._scoped = self._scoped, None
        if scoped is None:
            return messages
        sent, persistent, added = scoped
        count = len(added)
        for index, message in enumerate(messages):
            if message is not sent:
                continue
            tail = message.parts[len(message.parts) - count :]
            if len(tail) == count and all(a is b for a, b in zip(tail, added, strict=True)):
                metadata = {k: v for k, v in (message.metadata or {}).items() if k != STASH_KEY}
                if persistent.metadata and STASH_KEY in persistent.metadata:
                    metadata[STASH_KEY] = persistent.metadata[STASH_KEY]
                messages = list(messages)
                messages[index] = dataclasses.replace(
                    message,
                    parts=list(message.parts[:-count]),
                    metadata=metadata or (None if persistent.metadata is None else metadata),
                )
            break
        return messages

    async def process(
        self,
        messages: Sequence[ModelMessage],
        *,
        model_name: str | None = None,
        run_id: str | None = None,
    ) -> ProcessedHistory:
        """Run the stack over ``messages`` (ending with the request about to be sent).

        Args:
            messages: The pydantic-ai history; never mutated.
            model_name: The model the request goes to (picks the tokenizer) when the
                processor was built without one.
            run_id: Keys the per-run capability state.

        Returns:
            The history to keep, the history to send and the stack's result.

        Raises:
            CapabilityError: A capability failed or broke the history's invariants (the
                input is left as it was).
            InteropError: A message cannot be converted.
        """
        checked = list(messages)
        source = self._without_scoped(checked)
        converter = self.converter
        canonical = converter.to_canonical(source)
        name = self.model_name or model_name
        counter = self._token_counter or self._manager.token_counter(name)
        context = RequestContext(
            messages=[],
            token_counter=counter,
            model_name=name,
            context_window=self.context_window,
            state=self._state(run_id),
        )
        result = await compact(canonical, None, context=context, plugin_manager=self._manager)
        edited = len(result.messages) != len(canonical) or not all(
            map(operator.is_, result.messages, canonical)
        )
        persistent = converter.to_pydantic_ai(result.messages) if edited else source
        sent = persistent
        if result.request_scoped and result.messages and result.messages[-1].kind == "request":
            last = result.messages[-1]
            with_scoped = last.replace(parts=(*last.parts, *result.request_scoped))
            sent_last = converter.to_pydantic_ai([with_scoped])[0]
            sent = [*persistent[:-1], sent_last]
            self._scoped = (sent_last, persistent[-1], tuple(sent_last.parts[len(last.parts) :]))
        if self.on_event is not None:
            for event in result.events:
                self.on_event(event)
        processed = ProcessedHistory(
            persistent=list(persistent),
            sent=list(sent),
            result=result,
            changed=edited or source is not checked,
            scoped=sent is not persistent,
        )
        self.last = processed
        return processed

    async def __call__(self, ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
        """The history processor: run the stack and return the history to send.

        Args:
            ctx: pydantic-ai's run context (supplies the model name and the run id).
            messages: The history about to be sent.
        """
        model = getattr(ctx, "model", None)
        processed = await self.process(
            messages,
            model_name=getattr(model, "model_name", None),
            run_id=getattr(ctx, "run_id", None),
        )
        return processed.sent


def as_history_processor(
    capabilities: Sequence[object],
    *,
    context_window: int | None = None,
    model_name: str | None = None,
    token_counter: TokenCounter | None = None,
    on_event: OnEvent | None = None,
) -> HarnessHistoryProcessor:
    """Wrap a harness capability stack as a pydantic-ai history processor.

    ::

        from pydantic_ai import Agent
        from pydantic_ai.capabilities import ProcessHistory

        processor = as_history_processor([ClearToolResults(max_messages=40), SlidingWindow(max_messages=80)])
        agent = Agent(model, capabilities=[ProcessHistory(processor)])

    pydantic-ai stores what a history processor returns as the run's history, so the
    stack's edits persist; so do request-scoped parts, until the processor's next call
    removes them. :class:`HarnessCapabilities` keeps them out of the stored history.

    Args:
        capabilities: Harness capabilities (any pluggy plugin objects), in the user's order.
        context_window: The model's context window, for fraction-based triggers.
        model_name: Picks the tokenizer; defaults to the name of the model each request
            goes to.
        token_counter: A token counter to use instead of the model's.
        on_event: Called with every :class:`~harness.context.CompactionEvent`.

    Raises:
        CapabilityOrderError: The capabilities' ordering cannot be satisfied.
    """
    return HarnessHistoryProcessor(
        capabilities,
        context_window=context_window,
        model_name=model_name,
        token_counter=token_counter,
        on_event=on_event,
    )


@dataclasses.dataclass
class HarnessCapabilities(AbstractCapability[Any]):
    """A pydantic-ai capability that runs a harness capability stack before each request.

    ::

        agent = Agent(model, capabilities=[HarnessCapabilities([ClearToolResults(max_messages=40)])])

    Its ``before_model_request`` converts the history, runs the stack, writes the edited
    history back to the run's stored history (``RunContext.messages``) and sends it, with
    the stack's request-scoped parts (e.g. a limit warning) added to the request being
    sent only: they never reach the stored history. Each run gets its own processor
    (``for_run``), so per-run capability state starts empty.

    Attributes:
        stack: The harness capabilities, in the user's order.
        context_window: The model's context window, for fraction-based triggers.
        model_name: Picks the tokenizer; defaults to the request's model name.
        token_counter: A token counter to use instead of the model's.
        on_compaction: Called with every compaction event (``on_event`` is pydantic-ai's
            own hook name, for stream events).
    """

    stack: Sequence[object] = ()
    context_window: int | None = None
    model_name: str | None = None
    token_counter: TokenCounter | None = None
    on_compaction: OnEvent | None = None
    processor: HarnessHistoryProcessor = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Build the processor (checks the stack's ordering)."""
        self.processor = as_history_processor(
            self.stack,
            context_window=self.context_window,
            model_name=self.model_name,
            token_counter=self.token_counter,
            on_event=self.on_compaction,
        )

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Not constructible from an agent spec (it holds Python objects)."""
        return None

    async def for_run(self, ctx: RunContext[Any]) -> HarnessCapabilities:
        """A fresh copy for the run, so per-run state and caches are not shared."""
        return dataclasses.replace(self)

    async def before_model_request(
        self,
        ctx: RunContext[Any],
        request_context: ModelRequestContext,
    ) -> ModelRequestContext:
        """Run the stack; persist its edits and send its request-scoped parts once."""
        messages = list(request_context.messages)
        processed = await self.processor.process(
            messages,
            model_name=getattr(request_context.model, "model_name", None),
            run_id=ctx.run_id,
        )
        if processed.changed:
            ctx.messages[:] = processed.persistent
        if processed.changed or processed.scoped:
            request_context.messages = list(processed.sent)
        return request_context
