"""The context a capability sees before each model request, and the events it reports."""

from __future__ import annotations

__all__ = [
    "CompactionEvent",
    "RequestContext",
]

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from harness.core.messages import CanonicalMessage, Part, UnknownPart, Usage, with_harness_mark
from harness.errors import MessageError

if TYPE_CHECKING:
    from harness.core.model import Model, ModelSettings, ToolDefinition
    from harness.session import Session
    from harness.tokens import TokenCounter


@attrs.frozen
class CompactionEvent:
    """One edit a capability made to the history, reported through ``on_compaction``.

    Attributes:
        strategy: Name of the capability (or sub-step) that made the edit.
        reason: Why it acted, e.g. ``"max_tokens 120000 exceeded (131520)"``.
        messages_before: Message count before the edit.
        messages_after: Message count after the edit.
        tokens_before: Token count before the edit.
        tokens_after: Token count after the edit.
        removed_tool_call_ids: Ids of tool calls whose call and answers were removed.
        cleared_tool_call_ids: Ids of tool calls whose return (or arguments) were replaced.
        details: Capability-specific facts (e.g. fallback used, summary length).
    """

    strategy: str
    reason: str
    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    removed_tool_call_ids: tuple[str, ...] = ()
    cleared_tool_call_ids: tuple[str, ...] = ()
    details: Mapping[str, Any] = attrs.field(factory=dict[str, Any])

    @property
    def tokens_saved(self) -> int:
        """Tokens freed by the edit (negative if it grew the history)."""
        return self.tokens_before - self.tokens_after


@attrs.define(eq=False)
class RequestContext:
    """What ``before_model_request`` implementations receive.

    ``messages`` is the history about to be sent; its last element is the request being
    sent. Capabilities edit it in place (or through :meth:`replace_messages`), and those
    edits persist into the session. Parts that must be sent with this request only (for
    example a limit warning) go through :meth:`add_request_scoped`.

    Attributes:
        messages: The history about to be sent, ending with the new request.
        token_counter: The token counter of the run's owner (the plugin manager), for the current model.
        model: The agent's model, when running inside an agent (the default summarizer).
        model_name: Name of the model the request goes to.
        context_window: The model's context window in tokens, when known.
        usage: Usage of the current run so far, including capability requests.
        requests: Model requests already made in the current run (not counting this one).
        max_iterations: The agent's iteration limit, when set.
        request_id: The run's request id (8 characters of a uuid4).
        request_scoped: Parts sent with this request only, never stored.
        events: Every compaction event reported during this request.
        state: Free-form per-run storage for plugins, keyed by plugin name.
        session: The session the run works on (``None`` for ``harness.compact`` on a
            bare history). A stored session's log keeps every message a capability
            replaces; :meth:`Session.log_seq_of <harness.session.Session.log_seq_of>`
            names a message's place in it.
        references: Set by a recall capability (``harness-recall``): returns the short
            reference a placeholder should carry so the model can fetch the original
            content back, or ``None``. ``None`` (no recall installed): placeholders stay
            as they are. Read it through :meth:`reference_for`.
        model_requester: Set by the run: makes a capability's model call one of the run's
            effect units (journaled by a durable engine). Call it through
            :meth:`request_model`.
    """

    messages: list[CanonicalMessage]
    token_counter: TokenCounter
    model: Model | None = None
    model_name: str | None = None
    context_window: int | None = None
    usage: Usage = attrs.field(factory=Usage)
    requests: int = 0
    max_iterations: int | None = None
    request_id: str | None = None
    request_scoped: list[Part] = attrs.field(factory=list[Part])
    events: list[CompactionEvent] = attrs.field(factory=list[CompactionEvent])
    state: dict[str, Any] = attrs.field(factory=dict[str, Any])
    on_event: Callable[[RequestContext, CompactionEvent], None] | None = attrs.field(default=None, repr=False)
    session: Session | None = attrs.field(default=None, repr=False)
    references: Callable[[CanonicalMessage, Part | None], str | None] | None = attrs.field(
        default=None, repr=False
    )
    model_requester: (
        Callable[
            [Model, Sequence[CanonicalMessage], Sequence[ToolDefinition], ModelSettings, str],
            Awaitable[CanonicalMessage],
        ]
        | None
    ) = attrs.field(default=None, repr=False)

    async def request_model(
        self,
        model: Model,
        messages: Sequence[CanonicalMessage],
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
        *,
        source: str,
    ) -> CanonicalMessage:
        """Make a capability's own model call (a summary, a classification) as part of the run.

        Inside a run the call is one of the run's effect units (see
        :mod:`harness.core.effects`): a durable engine journals it, so a replayed run gets
        the same answer without calling the model again. Outside a run (``harness.compact``
        on a bare history) the model is called directly.

        Args:
            model: The model to ask.
            messages: The request.
            tools: Tool definitions to send (usually none).
            settings: Model settings (default: none set).
            source: The capability's name (recorded with the unit).
        """
        from harness.core.model import ModelSettings as _Settings

        chosen = settings if settings is not None else _Settings()
        if self.model_requester is None:
            return await model.request(messages, tools, chosen)
        return await self.model_requester(model, messages, tools, chosen, source)

    def reference_for(self, message: CanonicalMessage, part: Part | None = None) -> str | None:
        """The recall reference for ``message`` (or one of its parts), or ``None``.

        Capabilities that replace content with a placeholder (cleared tool results,
        deduplicated reads, summaries) call this with the *original* message and append
        the reference to the placeholder when it is not ``None``; the model can then
        call ``recall(ref)`` to read the original from the session's log.
        """
        if self.references is None:
            return None
        return self.references(message, part)

    def count_tokens(self, messages: Sequence[CanonicalMessage] | None = None) -> int:
        """Exact token count of ``messages`` (default: the current history), cached per part."""
        return self.token_counter.count_messages(self.messages if messages is None else messages)

    def context_tokens(self) -> int:
        """Best estimate of the current history's size as the provider will see it.

        Anchored on the newest response's provider-reported usage when that figure is
        still valid for this history, otherwise the exact local count.
        """
        return self.token_counter.context_tokens(self.messages)

    def add_usage(self, usage: Usage) -> None:
        """Charge ``usage`` (e.g. a summarizer's request) to the run."""
        self.usage = self.usage + usage

    def add_request_scoped(self, part: Part, *, source: str) -> None:
        """Send ``part`` with this request only; it is never stored in the history.

        The part is marked ``{"request_scoped": True, "source": source}`` in its metadata
        so it can be recognised without looking at its text.

        Raises:
            MessageError: ``part`` is an :class:`~harness.core.messages.UnknownPart`, which
                cannot carry the mark.
        """
        if isinstance(part, UnknownPart):
            raise MessageError("request-scoped parts must be modelled parts, not UnknownPart")
        self.request_scoped.append(with_harness_mark(part, request_scoped=True, source=source))

    def report(self, event: CompactionEvent) -> None:
        """Record ``event`` and pass it to the ``on_compaction`` hook."""
        self.events.append(event)
        if self.on_event is not None:
            self.on_event(self, event)

    def replace_messages(
        self,
        new_messages: Sequence[CanonicalMessage],
        *,
        strategy: str,
        reason: str,
        removed_tool_call_ids: Sequence[str] = (),
        cleared_tool_call_ids: Sequence[str] = (),
        details: Mapping[str, Any] | None = None,
    ) -> CompactionEvent | None:
        """Replace the history with ``new_messages`` and report the edit.

        Does nothing and returns ``None`` when ``new_messages`` holds the same (or equal)
        messages as the current history: a no-op reports nothing.

        Returns:
            The reported event, or ``None`` for a no-op.
        """
        old = self.messages
        new_list = list(new_messages)
        if new_list == old:  # C-speed: identical elements compare by identity first
            return None
        tokens_before = self.count_tokens(old)
        tokens_after = self.count_tokens(new_list)
        event = CompactionEvent(
            strategy=strategy,
            reason=reason,
            messages_before=len(old),
            messages_after=len(new_list),
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            removed_tool_call_ids=tuple(removed_tool_call_ids),
            cleared_tool_call_ids=tuple(cleared_tool_call_ids),
            details=dict(details or {}),
        )
        old[:] = new_list
        self.report(event)
        return event
