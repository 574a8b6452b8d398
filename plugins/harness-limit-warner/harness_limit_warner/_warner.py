"""The :class:`LimitWarner` capability."""

from __future__ import annotations

__all__ = ["KINDS", "SOURCE", "LimitKind", "LimitStatus", "LimitWarner", "is_warning_part"]

from collections.abc import Sequence
from typing import ClassVar, Literal, TypeAlias

import attrs

from harness.capabilities import Capability, RequestContext
from harness.core import CanonicalMessage, Part, SystemPromptPart, UserPromptPart, harness_mark
from harness.errors import CapabilityError
from harness.hooks import hookimpl

SOURCE = "limit_warner"
"""The ``source`` of the request-scoped mark every warning part carries."""

LimitKind: TypeAlias = Literal["iterations", "context_window", "total_tokens"]

KINDS: tuple[LimitKind, ...] = ("iterations", "context_window", "total_tokens")
"""Every limit kind, in the order the warning lists them."""

_MAX_SCANNED = 8  # histories whose clean prefix is remembered (concurrent runs)


def is_warning_part(part: Part) -> bool:
    """True when ``part`` is a limit warning (recognised by its harness mark, never by text)."""
    if getattr(part, "metadata", None) is None:  # the common case: no mark at all
        return False
    mark = harness_mark(part)
    return mark is not None and bool(mark.get("request_scoped")) and mark.get("source") == SOURCE


def _has_warning(message: CanonicalMessage) -> bool:
    for part in message.parts:
        if getattr(part, "metadata", None) is not None and is_warning_part(part):
            return True
    return False


@attrs.frozen
class LimitStatus:
    """How close a run is to one limit.

    Attributes:
        kind: Which limit.
        used: Requests made, context tokens or total tokens used so far.
        limit: The configured (or agent's) limit.
        fraction: ``used / limit``.
        critical: Whether this limit alone makes the warning CRITICAL.
    """

    kind: LimitKind
    used: int
    limit: int
    fraction: float
    critical: bool

    @property
    def remaining(self) -> int:
        """What is left before the limit (never negative)."""
        return max(self.limit - self.used, 0)

    def line(self) -> str:
        """The warning line for this limit."""
        percent = int(self.fraction * 100)
        if self.kind == "iterations":
            return (
                f"- Iterations: {self.used}/{self.limit} requests used ({percent}%); "
                f"{self.remaining} remaining."
            )
        if self.kind == "context_window":
            return f"- Context window: {self.used:,}/{self.limit:,} tokens used ({percent}%)."
        return f"- Total tokens: {self.used:,}/{self.limit:,} tokens used ({percent}%)."


def _check_int_type(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")


def _check_positive_int(name: str, value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name} must be positive.")


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _normalize_warn_on(value: Sequence[str] | None) -> tuple[LimitKind, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        raise TypeError(f"warn_on must be a sequence of limit kinds, not a string; did you mean [{value!r}]?")
    items = list(value)
    if not items:
        raise ValueError("warn_on must not be empty.")
    for item in items:
        if item not in KINDS:
            expected = ", ".join(repr(k) for k in KINDS)
            raise ValueError(f"warn_on: unknown limit kind {item!r}; expected one of {expected}.")
    return tuple(k for k in KINDS if k in items)


@attrs.frozen(kw_only=True, eq=False)
class LimitWarner(Capability):
    """Warn the model, before each request, that the run is approaching its limits.

    Three kinds of limit are watched, each as a fraction of its limit:

    * ``iterations``: requests already made in the run / ``max_iterations`` (the agent's
      own ``max_iterations`` when this one is not given: an explicit value wins);
    * ``context_window``: the history's context tokens (``ctx.context_tokens()``) /
      ``max_context_tokens``, or / ``max_context_fraction`` of the context window;
    * ``total_tokens``: tokens used by the run so far (``ctx.usage.total_tokens``) /
      ``max_total_tokens``.

    When any watched fraction reaches ``warning_threshold`` a warning is sent with this
    request only (``ctx.add_request_scoped``): it is never stored in the history, so
    warnings never accumulate and the stored history stays a stable cache prefix. It is
    URGENT, or CRITICAL when at most ``critical_remaining_iterations`` iterations remain
    or another watched limit is reached (fraction >= 1).

    Warnings stored by older code (parts whose harness mark says ``request_scoped`` and
    ``source="limit_warner"``) are stripped from the history; they are recognised by that
    mark only, never by text, and a request left empty is kept, never dropped or merged.

    Attributes:
        max_iterations: Iteration (request) limit to warn about; ``None`` uses the
            agent's ``max_iterations`` when it has one.
        max_context_tokens: Context-size limit in tokens.
        max_context_fraction: Context-size limit as a fraction of the context window
            (exclusive with ``max_context_tokens``).
        context_window: Context window to use with ``max_context_fraction`` when the model
            does not report one (or to override it).
        max_total_tokens: Limit on the run's total (input + output) tokens.
        warn_on: Kinds to warn about (``"iterations"``, ``"context_window"``,
            ``"total_tokens"``); ``None`` means every kind that has a limit.
        warning_threshold: Fraction of a limit at which the warning starts, in (0, 1].
        critical_remaining_iterations: Iterations left at or below which the warning is
            CRITICAL.
        role: Send the warning as a ``"user"`` prompt (default: appended at the end, so
            the cached prefix is untouched) or a ``"system"`` prompt.
    """

    name: ClassVar[str] = SOURCE
    runs_after: ClassVar[tuple[str, ...]] = (
        "dedupe_file_reads",
        "clear_tool_results",
        "sliding_window",
        "summarizing",
        "tiered",
    )

    max_iterations: int | None = None
    max_context_tokens: int | None = None
    max_context_fraction: float | None = None
    context_window: int | None = None
    max_total_tokens: int | None = None
    warn_on: tuple[LimitKind, ...] | None = attrs.field(default=None, converter=_normalize_warn_on)
    warning_threshold: float = 0.7
    critical_remaining_iterations: int = 3
    role: Literal["user", "system"] = "user"
    _scanned: list[tuple[CanonicalMessage, int]] = attrs.field(
        init=False, factory=list[tuple[CanonicalMessage, int]], repr=False
    )

    def __attrs_post_init__(self) -> None:
        _check_positive_int("max_iterations", self.max_iterations)
        _check_positive_int("max_context_tokens", self.max_context_tokens)
        _check_positive_int("max_total_tokens", self.max_total_tokens)
        _check_positive_int("context_window", self.context_window)
        if self.max_context_fraction is not None and (
            not _is_number(self.max_context_fraction) or not 0 < self.max_context_fraction <= 1
        ):
            raise ValueError("max_context_fraction must be in (0, 1].")
        if self.max_context_tokens is not None and self.max_context_fraction is not None:
            raise ValueError("Set at most one of max_context_tokens or max_context_fraction.")
        warn_on = self.warn_on
        if (
            self.max_iterations is None
            and self.max_context_tokens is None
            and self.max_context_fraction is None
            and self.max_total_tokens is None
            and (warn_on is None or "iterations" not in warn_on)
        ):
            raise ValueError(
                "At least one of max_iterations, max_context_tokens, max_context_fraction, or "
                "max_total_tokens must be set (or warn_on=['iterations'] to use the agent's max_iterations)."
            )
        if warn_on is not None:
            no_context_limit = self.max_context_tokens is None and self.max_context_fraction is None
            if "context_window" in warn_on and no_context_limit:
                raise ValueError("'context_window' requires its corresponding max_* limit to be configured.")
            if "total_tokens" in warn_on and self.max_total_tokens is None:
                raise ValueError("'total_tokens' requires its corresponding max_* limit to be configured.")
        if not _is_number(self.warning_threshold) or not 0 < self.warning_threshold <= 1:
            raise ValueError("warning_threshold must be in (0, 1].")
        _check_int_type("critical_remaining_iterations", self.critical_remaining_iterations)
        if self.critical_remaining_iterations < 0:
            raise ValueError("critical_remaining_iterations must be non-negative.")
        if self.role not in ("user", "system"):
            raise ValueError(f"role must be 'user' or 'system', got {self.role!r}.")

    # -- measuring -----------------------------------------------------------------

    def _watches(self, kind: LimitKind) -> bool:
        return self.warn_on is None or kind in self.warn_on

    def context_limit(self, ctx: RequestContext) -> int | None:
        """The context-token limit in force for ``ctx``, or ``None`` when not configured.

        Raises:
            CapabilityError: ``max_context_fraction`` is set and neither ``context_window``
                nor the model gives a window size.
        """
        if self.max_context_tokens is not None:
            return self.max_context_tokens
        if self.max_context_fraction is None:
            return None
        window = self.context_window or ctx.context_window
        if window is None:
            raise CapabilityError(
                self.name,
                f"max_context_fraction needs the model's context window, and model {ctx.model_name!r} "
                "does not report one; pass context_window=... to LimitWarner",
            )
        return max(int(self.max_context_fraction * window), 1)

    def statuses(self, ctx: RequestContext) -> list[LimitStatus]:
        """How close ``ctx``'s run is to each watched limit, in warning order.

        Only limits that are configured (or, for iterations, set on the agent) and
        selected by ``warn_on`` appear. The context figure is the history's
        ``ctx.context_tokens()`` (the cached, provider-anchored count).
        """
        result: list[LimitStatus] = []
        iterations = self.max_iterations if self.max_iterations is not None else ctx.max_iterations
        if iterations is not None and iterations > 0 and self._watches("iterations"):
            used = ctx.requests
            remaining = max(iterations - used, 0)
            result.append(
                LimitStatus(
                    "iterations",
                    used,
                    iterations,
                    used / iterations,
                    remaining <= self.critical_remaining_iterations,
                )
            )
        if self._watches("context_window"):
            limit = self.context_limit(ctx)
            if limit is not None:
                used = ctx.context_tokens()
                fraction = used / limit
                result.append(LimitStatus("context_window", used, limit, fraction, fraction >= 1))
        if self.max_total_tokens is not None and self._watches("total_tokens"):
            used = ctx.usage.total_tokens
            fraction = used / self.max_total_tokens
            result.append(LimitStatus("total_tokens", used, self.max_total_tokens, fraction, fraction >= 1))
        return result

    def warning_text(self, ctx: RequestContext) -> str | None:
        """The warning to send with ``ctx``'s request, or ``None`` when no limit is near.

        A limit counts as near when its fraction reaches ``warning_threshold``; only near
        limits are listed.
        """
        near = [s for s in self.statuses(ctx) if s.fraction >= self.warning_threshold]
        if not near:
            return None
        critical = any(s.critical for s in near)
        severity = "CRITICAL" if critical else "URGENT"
        closing = "immediately" if critical else "efficiently"
        lines = [
            "[LimitWarner]",
            f"{severity}: Configured run limits are approaching.",
            *(s.line() for s in near),
            f"Complete the current task {closing} and avoid unnecessary tool calls.",
        ]
        return "\n".join(lines)

    # -- the hook ------------------------------------------------------------------

    def should_compact(self, ctx: RequestContext) -> str | None:
        """Never: the warner does not compact (it has no ``compact`` step)."""
        return None

    @hookimpl
    async def before_model_request(self, ctx: RequestContext) -> None:
        """Strip stale stored warnings, then add a request-scoped warning when a limit is near."""
        self.strip_stale_warnings(ctx)
        text = self.warning_text(ctx)
        if text is None:
            return
        part: Part = SystemPromptPart(text) if self.role == "system" else UserPromptPart(text)
        ctx.add_request_scoped(part, source=SOURCE)

    def strip_stale_warnings(self, ctx: RequestContext) -> int:
        """Remove stored warning parts (recognised by mark) from ``ctx.messages``.

        Only messages added since a previous call saw the same history are scanned: the
        warner remembers the last message it checked (by identity, for the last few
        histories), so the cost per request does not grow with the history. Warning
        parts can only enter a history from outside (a session stored by other code),
        and such a history is made of new message objects, which are scanned in full. A
        message left without parts is kept as it is, never dropped or merged.

        Returns:
            The number of parts removed (reported as one ``on_compaction`` event).
        """
        messages = ctx.messages
        start = self._clean_prefix(messages)
        replaced: dict[int, CanonicalMessage] = {}
        removed = 0
        for index in range(start, len(messages)):
            message = messages[index]
            if not _has_warning(message):
                continue
            kept = tuple(p for p in message.parts if not is_warning_part(p))
            removed += len(message.parts) - len(kept)
            replaced[index] = message.replace(parts=kept)
        if replaced:
            new = [replaced.get(i, m) for i, m in enumerate(messages)]
            ctx.replace_messages(
                new,
                strategy=self.name,
                reason=f"removed {removed} stored limit warning part(s)",
                details={"stripped_parts": removed, "messages_edited": len(replaced)},
            )
        self._remember_clean(ctx.messages)
        return removed

    def _clean_prefix(self, messages: Sequence[CanonicalMessage]) -> int:
        """Length of the longest prefix of ``messages`` known to hold no warning part."""
        best = 0
        for anchor, length in self._scanned:
            if best < length <= len(messages) and messages[length - 1] is anchor:
                best = length
        return best

    def _remember_clean(self, messages: Sequence[CanonicalMessage]) -> None:
        if not messages:
            return
        entry = (messages[-1], len(messages))
        scanned = [e for e in self._scanned if e[0] is not entry[0]]
        scanned.insert(0, entry)
        self._scanned[:] = scanned[:_MAX_SCANNED]
