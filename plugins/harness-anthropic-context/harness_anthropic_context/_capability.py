"""The :class:`AnthropicContextManagement` capability: Anthropic's server-side context management.

A ``wrap_model_request`` wrapper adds ``context_management`` (and the ``anthropic-beta``
header it needs) to each request that goes to an ``AnthropicModel``; a request to any other
model gets none of it, and the compaction blocks of its history become text parts holding
their summaries. A ``before_model_request`` hook reports what the server did to the
previous request (its applied edits, a compaction) as a :class:`~harness.CompactionEvent`.
The stored history is never edited.
"""

from __future__ import annotations

__all__ = ["SOURCE", "AnthropicContextManagement", "is_anthropic"]

import sys
from collections.abc import Generator, Mapping, Sequence
from typing import Any, ClassVar, Final, Literal, cast

import attrs

from harness.capabilities import Capability, CompactionEvent, ModelCall, RequestContext
from harness.core import CanonicalMessage, Model, ModelSettings, thaw
from harness.hooks import hookimpl
from harness_anthropic_context._edits import (
    CLEAR_THINKING,
    COMPACT,
    COMPACTION_BETA,
    CONTEXT_MANAGEMENT_BETA,
    EditConfig,
    build_edit,
)
from harness_anthropic_context._history import (
    applied_edits,
    compaction_parts,
    compaction_summary,
    sendable_messages,
    with_pause_text,
)

SOURCE: Final = "anthropic_context_management"
"""The capability's name: its entry point, its events' ``strategy``, its harness marks' ``source``."""

_BETA_HEADER: Final = "anthropic-beta"

_FLAT: Final[Mapping[str, tuple[str, str]]] = {
    "clear_tool_uses_trigger": ("clear_tool_uses", "trigger"),
    "clear_tool_uses_keep": ("clear_tool_uses", "keep"),
    "clear_tool_uses_clear_at_least": ("clear_tool_uses", "clear_at_least"),
    "clear_tool_uses_exclude_tools": ("clear_tool_uses", "exclude_tools"),
    "clear_tool_uses_clear_tool_inputs": ("clear_tool_uses", "clear_tool_inputs"),
    "clear_thinking_keep": ("clear_thinking", "keep"),
    "compaction_trigger": ("compaction", "trigger"),
    "compaction_instructions": ("compaction", "instructions"),
    "compaction_pause_after_compaction": ("compaction", "pause_after_compaction"),
}
"""The one-line (``--stack``) spelling of each edit field: ``<edit>_<field>``."""


def is_anthropic(model: Model) -> bool:
    """Whether ``model`` is a ``harness.models.anthropic.AnthropicModel`` (or a subclass).

    The module is only looked up when it is imported already (an ``AnthropicModel`` exists
    only then), so this never imports the SDK.
    """
    module = sys.modules.get("harness.models.anthropic")
    cls: object = getattr(module, "AnthropicModel", None) if module is not None else None
    return isinstance(cls, type) and isinstance(model, cls)


def _merged(configs: dict[str, EditConfig], parameter: str, flat: Mapping[str, object]) -> EditConfig:
    config = configs[parameter]
    names = [name for name, (edit, _) in _FLAT.items() if edit == parameter and name in flat]
    fields = {_FLAT[name][1]: flat[name] for name in names}
    if not fields:
        return config
    if config is False:
        raise ValueError(f"{parameter} is false but {', '.join(names)} would configure it")
    base = build_edit(parameter, config) or {}
    base.pop("type", None)
    return {**base, **fields}


def _thinking_on(settings: ModelSettings) -> bool:
    thinking = settings.extra.get("thinking")
    return isinstance(thinking, Mapping) and cast(Mapping[str, object], thinking).get("type") != "disabled"


def _with_betas(headers: object, betas: Sequence[str]) -> dict[str, Any]:
    """``headers`` (a mapping or ``None``) with ``betas`` added to its ``anthropic-beta`` value."""
    merged: dict[str, Any] = dict(cast(Mapping[str, Any], headers)) if isinstance(headers, Mapping) else {}
    key = next((k for k in merged if k.lower() == _BETA_HEADER), _BETA_HEADER)
    current = merged.get(key)
    values = [v.strip() for v in current.split(",") if v.strip()] if isinstance(current, str) else []
    values.extend(beta for beta in betas if beta not in values)
    merged[key] = ",".join(values)
    return merged


class AnthropicContextManagement(Capability):
    """Turn on Anthropic's server-side context editing and compaction for requests to Claude.

    Each edit is off unless configured: a mapping of its fields, ``True`` (the server's
    defaults) or a JSON object as text. The ``<edit>_<field>`` keywords set one field each
    (that is how a ``--stack`` string configures them) and turn their edit on.

    Args:
        clear_tool_uses: ``clear_tool_uses_20250919``: ``trigger`` (input tokens, or
            ``{"type": "tool_uses", "value": n}``), ``keep`` (tool uses kept),
            ``clear_at_least`` (input tokens), ``exclude_tools`` (names never cleared),
            ``clear_tool_inputs`` (``True``, or the tool names whose inputs are cleared too).
        clear_thinking: ``clear_thinking_20251015``: ``keep`` (assistant turns whose
            thinking is kept, or ``"all"``). Sent only with requests that enable thinking.
        compaction: ``compact_20260112``: ``trigger`` (input tokens), ``instructions``
            (for the summary), ``pause_after_compaction`` (the server answers with the
            compaction block alone, and the run ends there).
        clear_tool_uses_trigger: ``clear_tool_uses.trigger``.
        clear_tool_uses_keep: ``clear_tool_uses.keep``.
        clear_tool_uses_clear_at_least: ``clear_tool_uses.clear_at_least``.
        clear_tool_uses_exclude_tools: ``clear_tool_uses.exclude_tools``.
        clear_tool_uses_clear_tool_inputs: ``clear_tool_uses.clear_tool_inputs``.
        clear_thinking_keep: ``clear_thinking.keep``.
        compaction_trigger: ``compaction.trigger``.
        compaction_instructions: ``compaction.instructions``.
        compaction_pause_after_compaction: ``compaction.pause_after_compaction``.
        report: Report what the server did to a request as a ``CompactionEvent`` on the
            next request (strategy ``"anthropic_context_management"``).
        calls: ``"requests"`` (the run's own requests) or ``"all"`` (capabilities' model
            calls too, such as a summarizer's) get the parameters.

    Raises:
        ValueError: No edit is configured, a field is unknown or out of range; the message
            names the parameter and the field (``clear_tool_uses.keep must be at least 0``).
        TypeError: A parameter or a field has the wrong type.
    """

    name: ClassVar[str] = SOURCE
    runs_after: ClassVar[tuple[str, ...]] = ("model_fallback",)  # inside it: sees the model it switched to

    def __init__(
        self,
        clear_tool_uses: EditConfig = None,
        clear_thinking: EditConfig = None,
        compaction: EditConfig = None,
        *,
        clear_tool_uses_trigger: int | None = None,
        clear_tool_uses_keep: int | None = None,
        clear_tool_uses_clear_at_least: int | None = None,
        clear_tool_uses_exclude_tools: Sequence[str] | None = None,
        clear_tool_uses_clear_tool_inputs: bool | None = None,
        clear_thinking_keep: int | str | None = None,
        compaction_trigger: int | None = None,
        compaction_instructions: str | None = None,
        compaction_pause_after_compaction: bool | None = None,
        report: bool = True,
        calls: Literal["requests", "all"] = "requests",
    ) -> None:
        named: dict[str, object] = {
            "clear_tool_uses_trigger": clear_tool_uses_trigger,
            "clear_tool_uses_keep": clear_tool_uses_keep,
            "clear_tool_uses_clear_at_least": clear_tool_uses_clear_at_least,
            "clear_tool_uses_exclude_tools": clear_tool_uses_exclude_tools,
            "clear_tool_uses_clear_tool_inputs": clear_tool_uses_clear_tool_inputs,
            "clear_thinking_keep": clear_thinking_keep,
            "compaction_trigger": compaction_trigger,
            "compaction_instructions": compaction_instructions,
            "compaction_pause_after_compaction": compaction_pause_after_compaction,
        }
        flat = {name: value for name, value in named.items() if value is not None}
        configs: dict[str, EditConfig] = {
            "clear_tool_uses": clear_tool_uses,
            "clear_thinking": clear_thinking,
            "compaction": compaction,
        }
        edits = {p: build_edit(p, _merged(configs, p, flat)) for p in configs}
        if all(edit is None for edit in edits.values()):
            raise ValueError(
                "AnthropicContextManagement: configure at least one of clear_tool_uses, clear_thinking "
                "or compaction (e.g. clear_tool_uses={'trigger': 100000, 'keep': 3})"
            )
        if not isinstance(cast(object, report), bool):
            raise TypeError(f"report must be true or false, got {type(report).__name__} {report!r}")
        if calls not in ("requests", "all"):
            raise ValueError(f"calls must be 'requests' or 'all', got {calls!r}")
        self.clear_tool_uses: dict[str, Any] | None = edits["clear_tool_uses"]
        self.clear_thinking: dict[str, Any] | None = edits["clear_thinking"]
        self.compaction: dict[str, Any] | None = edits["compaction"]
        self.report = report
        self.calls = calls

    def __repr__(self) -> str:
        edits = ", ".join(
            f"{p}={getattr(self, p)!r}" for p in ("clear_tool_uses", "clear_thinking", "compaction")
        )
        return f"AnthropicContextManagement({edits})"

    def edits(self, settings: ModelSettings | None = None) -> list[dict[str, Any]]:
        """The ``context_management.edits`` sent with ``settings`` (thinking first, as the API asks).

        ``clear_thinking`` is left out when ``settings`` does not enable thinking.
        """
        chosen = [
            self.clear_thinking if settings is None or _thinking_on(settings) else None,
            self.clear_tool_uses,
            self.compaction,
        ]
        return [thaw(edit) for edit in chosen if edit is not None]

    def settings_for(
        self, settings: ModelSettings, messages: Sequence[CanonicalMessage] = ()
    ) -> ModelSettings:
        """``settings`` with the ``context_management`` parameter and the beta header added.

        Edits of other types already in ``settings.extra["context_management"]`` are kept
        (after ours); an ``anthropic-beta`` header already set keeps its values. The
        compaction beta is also sent when ``messages`` hold a compaction block (sent back).
        """
        edits = self.edits(settings)
        ours = {edit["type"] for edit in edits}
        given = settings.extra.get("context_management")
        management: dict[str, Any] = dict(thaw(given)) if isinstance(given, Mapping) else {}
        previous = cast(list[object], management.get("edits") or [])
        kept = [
            cast(dict[str, Any], e)
            for e in previous
            if isinstance(e, dict) and cast(dict[str, Any], e).get("type") not in ours
        ]
        sent: list[dict[str, Any]] = [*edits, *kept]
        management["edits"] = sent
        betas: list[str] = []
        if any(edit.get("type") != COMPACT for edit in sent):
            betas.append(CONTEXT_MANAGEMENT_BETA)
        if self.compaction is not None or any(compaction_parts(m) for m in messages if m.kind == "response"):
            betas.append(COMPACTION_BETA)
        extra = {
            **settings.extra,
            "context_management": management,
            "extra_headers": _with_betas(settings.extra.get("extra_headers"), betas),
        }
        return attrs.evolve(settings, extra=extra)

    @hookimpl(wrapper=True)
    def wrap_model_request(
        self, ctx: RequestContext, request: ModelCall
    ) -> Generator[None, CanonicalMessage, CanonicalMessage]:
        """Add the parameters for an ``AnthropicModel``; make the history portable for any other model."""
        settings, messages = request.settings, request.messages
        anthropic = is_anthropic(request.model)
        if anthropic and (self.calls == "all" or request.purpose == "request"):
            request.settings = self.settings_for(settings, messages)
        sendable = sendable_messages(messages, anthropic=anthropic)
        if any(new is not old for new, old in zip(sendable, messages, strict=True)):
            request.messages = sendable
        try:
            return (yield)
        finally:  # a fallback wrapper outside may send the same call to another model next
            request.settings = settings
            if request.messages is not messages:
                request.messages = messages

    @hookimpl
    def after_model_response(self, response: CanonicalMessage) -> CanonicalMessage | None:
        """Keep a compaction-only response (``pause_after_compaction``): add :data:`PAUSE_TEXT` to it.

        Without text or a tool call the loop would take it for an empty response and drop
        it, block and all; with the part it is stored and the run ends on it.
        """
        return with_pause_text(response)

    @hookimpl
    async def before_model_request(self, ctx: RequestContext) -> None:
        """Report what the server did to the previous request, once, as a ``CompactionEvent``.

        The event goes to the request's event sink (``on_compaction`` observers, the log, a
        streamed run's :class:`~harness.run.Compaction` event) but not into ``ctx.events``:
        harness did not edit the history, so nothing reacts to it as to a local compaction
        (no post-compaction receipt, no ``pause_after_compaction`` of the agent).
        """
        if not self.report or ctx.on_event is None or len(ctx.messages) < 2:
            return
        response = ctx.messages[-2]
        if response.kind != "response" or response.provider_name != "anthropic":
            return
        edits = applied_edits(response)
        blocks = compaction_parts(response)
        if not edits and not blocks:
            return
        ctx.on_event(ctx, _event(ctx, response, edits, len(blocks)))


def _event(
    ctx: RequestContext, response: CanonicalMessage, edits: list[dict[str, Any]], compactions: int
) -> CompactionEvent:
    facts: list[str] = []
    cleared = 0
    for edit in edits:
        counts = [
            f"{value} {key.removeprefix('cleared_').replace('_', ' ')}"
            for key, value in edit.items()
            if key.startswith("cleared_") and key != "cleared_input_tokens"
        ]
        fact = f"{edit.get('type', '?')} cleared {', '.join(counts) or 'content'}"
        tokens = edit.get("cleared_input_tokens")
        if isinstance(tokens, int) and not isinstance(tokens, bool):
            cleared += tokens
            fact += f" ({tokens:,} input tokens)"
        facts.append(fact)
    if compactions:
        facts.append(f"{COMPACT} summarized the earlier context ({compactions} compaction block(s))")
    before = ctx.count_tokens(ctx.messages[:-1])
    after = max(0, before - cleared)
    usage = response.usage
    if compactions and usage is not None and usage.request_tokens:
        after = min(after, usage.request_tokens)
    summaries = [s for s in (compaction_summary(p) for p in compaction_parts(response)) if s is not None]
    details: dict[str, Any] = {
        "server_side": True,
        "provider_response_id": response.provider_response_id,
        "applied_edits": edits,
        "compactions": compactions,
        "summary_chars": sum(len(s) for s in summaries),
        "thinking_cleared": any(edit.get("type") == CLEAR_THINKING for edit in edits),
    }
    return CompactionEvent(
        strategy=SOURCE,
        reason="Anthropic server: " + "; ".join(facts),
        messages_before=len(ctx.messages),
        messages_after=len(ctx.messages),
        tokens_before=before,
        tokens_after=after,
        details=details,
    )
