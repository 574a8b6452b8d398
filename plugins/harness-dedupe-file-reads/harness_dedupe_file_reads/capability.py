"""The :class:`DeduplicateFileReads` capability.

Coding agents read the same file again and again. Only the latest read of a given view
of a file matters: it shows the file as it is now, and every earlier read of the same
view is either identical or stale. This capability replaces the content of earlier reads
with a short pointer to the latest one. It never removes a message or a part.

A pinned read (:func:`harness.is_pinned` on its call or its return) is never superseded.
With ``cache_aware`` it only acts when the tokens it frees pay for the prompt-cache write
it causes (:func:`cache_pays`).
"""

from __future__ import annotations

__all__ = ["DEFAULT_PLACEHOLDER", "DeduplicateFileReads", "render_placeholder"]

import re
import threading
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

import attrs

from harness.capabilities import (
    CacheVerdict,
    Capability,
    RequestContext,
    Trigger,
    cache_pays,
    check_cache_settings,
    remaining_requests,
)
from harness.core import (
    CanonicalMessage,
    Part,
    ToolCallPart,
    ToolReturnPart,
    marked_metadata,
    pinned_call_ids,
)
from harness.core import replace as evolve
from harness.errors import CapabilityError, MessageError
from harness.history import PartCounter
from harness_dedupe_file_reads._scan import Cached, Memo, Read, applied, groups, is_cleared, resolve_key
from harness_dedupe_file_reads.keys import (
    DESCRIBERS,
    FileKey,
    FileRead,
    changes_directory,
    describe_read,
    selection_covers,
)

DEFAULT_PLACEHOLDER = "[superseded file read: see the later read of {path} (call {call_id})]"
"""Template of the text that replaces a superseded read (fields ``{path}``, ``{call_id}``)."""

_FIELDS = re.compile(r"\{(path|call_id|tool_name|key)\}")

_References = Callable[[CanonicalMessage, Part | None], str | None]
"""``RequestContext.references``: the recall reference of a message's part (harness-recall)."""


def render_placeholder(template: str, values: Mapping[str, str]) -> str:
    """Fill ``{path}``, ``{call_id}``, ``{tool_name}`` and ``{key}`` in one pass.

    Any other brace is kept verbatim, and braces inside the values (a path such as
    ``src/{name}.py``) are never expanded: this is not :meth:`str.format`.

    Args:
        template: The placeholder template.
        values: Field values.

    Returns:
        The rendered text.
    """
    return _FIELDS.sub(lambda match: values.get(match.group(1), match.group(0)), template)


@attrs.frozen(eq=False)
class DeduplicateFileReads(Capability):
    """Replace earlier reads of a file with a pointer to the latest read of the same view.

    ``file_key(call)`` names the view of a file a tool call reads (``None``: not a file
    read). For every key, the newest tool return (by position) that still has its content
    is the *latest read*; every earlier, not yet cleared return of that key gets
    ``placeholder`` (with ``{path}`` and ``{call_id}`` of the latest read filled in) and
    the harness mark ``{"cleared": "dedupe_file_reads", "superseded_by": <call id>,
    "file_key": <key>}``. A read is only ever superseded by a later read; the returns of
    the current step (the request being sent) are never changed; retry prompts are not
    reads. Running it twice changes nothing. A read whose call or return is pinned
    (:func:`harness.is_pinned`) is never superseded (it can still supersede earlier reads).

    With a recall capability installed (``harness-recall`` sets ``ctx.references``), each
    pointer ends with `` [recall: <ref>]``, the reference of the superseded read in the
    session's log; without one it is exactly the rendered ``placeholder``.

    Without a trigger it runs before every request. That is cheap: keys are cached per
    call, a history that only grew since the last pass is checked by its new messages
    alone, and a request with no new duplicate changes nothing and reports nothing.

    **Cache-aware** (``cache_aware=True``): when it would act through its own trigger (or
    on every request), the deduplication is planned first and only applied when
    :func:`cache_pays` says the tokens it frees over ``expected_remaining_requests``
    (default: as many requests as the run made so far) are worth more than writing the
    prompt from the first changed message to the end into the cache again. Pending
    duplicates then wait until enough of them pay (each request meanwhile plans with a
    full pass). A forced ``compact`` (``harness.compact(..., force=True)``, a
    ``TieredCompaction`` tier) is never held back.

    Attributes:
        file_key: ``"auto"`` (default), ``"read_tool"``, ``"shell_cat"`` (see
            :data:`~harness_dedupe_file_reads.keys.FILE_KEYS`) or a callable
            ``(ToolCallPart) -> str | None``.
        placeholder: Template of the replacement text; ``{path}``, ``{call_id}``,
            ``{tool_name}`` and ``{key}`` refer to the latest read.
        max_messages: Optional trigger: act only when the history holds more messages.
        max_tokens: Optional trigger: act only when the history holds more tokens.
        max_fraction: Optional trigger: a fraction of the context window.
        context_window: Context window for ``max_fraction`` when the model reports none.
        supersede_covered_ranges: Also supersede a shell read whose lines a later read of
            the same file and presentation covers (``file_key`` ``"auto"``/``"shell_cat"``).
        shell_keeps_directory: Treat ``cd``/``pushd``/``popd`` in a shell call as changing
            what later relative paths mean (a persistent shell); ``False`` for agents that
            run each command in a fresh shell.
        cache_aware: Act (outside a forced ``compact``) only when :func:`cache_pays`.
        expected_remaining_requests: ``R`` for the cache arithmetic (``None``: estimated,
            see :func:`remaining_requests`).
        cache_write_multiplier: Price of a cache write in base input prices (Anthropic: 1.25).
        cache_read_multiplier: Price of a cache read in base input prices (Anthropic: 0.1).
        trigger: The validated trigger (derived; not a constructor argument).
    """

    name: ClassVar[str] = "dedupe_file_reads"
    runs_before: ClassVar[tuple[str, ...]] = (
        "clear_tool_results",
        "sliding_window",
        "summarizing",
    )

    file_key: str | FileKey = "auto"
    placeholder: str = attrs.field(default=DEFAULT_PLACEHOLDER, kw_only=True)
    max_messages: int | None = attrs.field(default=None, kw_only=True)
    max_tokens: int | None = attrs.field(default=None, kw_only=True)
    max_fraction: float | None = attrs.field(default=None, kw_only=True)
    context_window: int | None = attrs.field(default=None, kw_only=True)
    supersede_covered_ranges: bool = attrs.field(default=False, kw_only=True)
    shell_keeps_directory: bool = attrs.field(default=True, kw_only=True)
    cache_aware: bool = attrs.field(default=False, kw_only=True)
    expected_remaining_requests: int | None = attrs.field(default=None, kw_only=True)
    cache_write_multiplier: float = attrs.field(default=1.25, kw_only=True)
    cache_read_multiplier: float = attrs.field(default=0.1, kw_only=True)
    trigger: Trigger = attrs.field(init=False, repr=False)
    _key_function: FileKey = attrs.field(init=False, repr=False)
    _describer: Callable[[ToolCallPart], FileRead | None] | None = attrs.field(init=False, repr=False)
    _keys: dict[int, Cached] = attrs.field(init=False, repr=False, factory=dict[int, "Cached"])
    _memo: list[Memo] = attrs.field(init=False, repr=False, factory=list[Memo])
    _lock: threading.Lock = attrs.field(init=False, repr=False, factory=threading.Lock)
    # ``ctx.references`` while compact() runs (under the lock); empty otherwise, e.g. for plan().
    _references: list[_References] = attrs.field(init=False, repr=False, factory=list["_References"])

    def __attrs_post_init__(self) -> None:
        """Validate the parameters.

        Raises:
            ValueError: A parameter is invalid; the message names it.
        """
        trigger = Trigger.create(
            max_messages=self.max_messages,
            max_tokens=self.max_tokens,
            max_fraction=self.max_fraction,
            context_window=self.context_window,
            required=False,
        )
        function = resolve_key(self.file_key)
        if not isinstance(self.placeholder, str) or not self.placeholder:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError("placeholder must be a non-empty string.")
        if self.supersede_covered_ranges and self.file_key not in ("auto", "shell_cat"):
            raise ValueError(
                "supersede_covered_ranges=True needs file_key='auto' or 'shell_cat' "
                "(line ranges are only known for the built-in shell reads)."
            )
        if not isinstance(self.cache_aware, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"cache_aware must be True or False, got {self.cache_aware!r}.")
        check_cache_settings(
            self.expected_remaining_requests, self.cache_write_multiplier, self.cache_read_multiplier
        )
        describer = DESCRIBERS.get(self.file_key) if isinstance(self.file_key, str) else None
        object.__setattr__(self, "trigger", trigger)
        object.__setattr__(self, "_key_function", function)
        object.__setattr__(self, "_describer", describer)

    def should_compact(self, ctx: RequestContext) -> str | None:
        """Fire on every request without a trigger, else when the trigger is exceeded.

        With ``cache_aware``, a firing trigger also plans the deduplication and holds it
        back (returns ``None``) unless :func:`cache_pays`.
        """
        if not self.trigger.configured:
            reason = "every request (no trigger configured)"
        else:
            reason = self.trigger.exceeded(ctx, self.name)
        if reason is None or not self.cache_aware:
            return reason
        window = self.context_window or ctx.context_window
        if window is not None and ctx.context_tokens() > window:
            return reason  # a request that does not fit is never held back
        verdict = self.cache_verdict(ctx)
        if verdict is None or not verdict.pays:
            return None
        return f"{reason}; {verdict.describe()}"

    def cache_verdict(self, ctx: RequestContext) -> CacheVerdict | None:
        """The cache arithmetic of the deduplication :meth:`compact` would make now.

        ``None`` when there is nothing to supersede. ``S`` is the tokens it frees, ``P``
        the tokens from the first message it changes to the end of the history after the
        edit, ``R`` from :func:`remaining_requests`; see :func:`cache_pays`.

        Raises:
            CapabilityError: A custom ``file_key`` raised or returned a non-string.
        """
        messages = ctx.messages
        counter = ctx.token_counter
        changes, _ids = self.plan(messages, counter)
        if not changes:
            return None
        freed = 0
        for mi, replaced in changes.items():
            parts = messages[mi].parts
            freed += sum(
                counter.count_part(parts[pi]) - counter.count_part(new) for pi, new in replaced.items()
            )
        first = min(changes)
        rewritten = counter.count_messages(messages[first:]) - freed
        return cache_pays(
            freed,
            rewritten,
            remaining_requests(ctx, self.expected_remaining_requests),
            write_multiplier=self.cache_write_multiplier,
            read_multiplier=self.cache_read_multiplier,
        )

    # -- keys ----------------------------------------------------------------------------

    def _lookup(self, call: ToolCallPart, cache: dict[int, Cached]) -> Cached:
        hit = self._keys.get(id(call))
        if hit is not None and hit[0] is call:
            cache[id(call)] = hit
            return hit
        if self._describer is not None:
            read = self._describer(call)
            barrier = self.shell_keeps_directory and changes_directory(call)
            entry: Cached = (call, None if read is None else read.key, read, barrier)
        else:
            entry = (call, self._custom_key(call), None, False)
        cache[id(call)] = entry
        return entry

    def _custom_key(self, call: ToolCallPart) -> str | None:
        try:
            key: Any = self._key_function(call)
        except Exception as exc:
            raise CapabilityError(
                self.name,
                f"file_key raised {type(exc).__name__} for tool call {call.tool_call_id!r} "
                f"({call.tool_name!r}): {exc}",
            ) from exc
        if key is not None and not isinstance(key, str):
            raise CapabilityError(
                self.name,
                f"file_key must return a str or None, got {type(key).__name__} for tool call "
                f"{call.tool_call_id!r} ({call.tool_name!r})",
            )
        return key

    def key_of(self, call: ToolCallPart) -> str | None:
        """The key this capability gives ``call`` (``None``: not a file read).

        Raises:
            CapabilityError: A custom ``file_key`` raised or returned a non-string.
        """
        return self._lookup(call, {})[1]

    # -- action --------------------------------------------------------------------------

    def plan(
        self, messages: Sequence[CanonicalMessage], counter: PartCounter
    ) -> tuple[dict[int, dict[int, Part]], list[str]]:
        """Compute the replacements a deduplication would make, without applying them.

        A read is only replaced when the pointer has fewer tokens than the read (a tiny
        file's read stays as it is), so deduplication never grows the history.

        Args:
            messages: The history.
            counter: Counts the tokens of a part (the context's cached token counter).

        Returns:
            ``(changes, call_ids)``: ``changes[message_index][part_index]`` is the
            replacement return; ``call_ids`` lists the superseded calls in return order.

        Raises:
            CapabilityError: A custom ``file_key`` raised or returned a non-string.
        """
        with self._lock:
            extended = self._extend_memo(messages, counter)
            if extended is not None:
                if extended[0]:
                    self._memo.clear()  # a dry run: the remembered state assumed the changes applied
                return extended
            changes, ids, memo = self._full_plan(messages, counter)
            if not changes and memo is not None:
                self._memo[:] = [memo]
            return changes, ids

    def _extend_memo(
        self, messages: Sequence[CanonicalMessage], counter: PartCounter
    ) -> tuple[dict[int, dict[int, Part]], list[str]] | None:
        """Plan from the messages appended since the last full pass alone, when that is enough.

        Works when ``messages`` is the remembered history plus appended messages (checked by
        identity, at C speed): a new read of a known group supersedes the group's previous
        latest read (and the reads that kept their content). Returns ``None`` -- the caller
        then scans everything -- when the remembered part was edited, with covered ranges
        and a new read of a known view, or when a superseded read sits in the request being
        sent. The memo is updated as if the returned changes were applied.
        """
        if not self._memo:
            return None
        memo = self._memo[0]
        seen = memo.seen
        # C-speed list comparison: identical objects compare by identity; equal copies are
        # as good, since the memo records positions, ids and keys.
        if len(messages) < len(seen) or list(messages[: len(seen)]) != seen:
            self._memo.clear()
            return None
        last = len(messages) - 1
        current = last if last >= 0 and messages[last].kind == "request" else -1
        covering = self.supersede_covered_ranges
        calls, latest, failed, views, epoch = memo.calls, memo.latest, memo.failed, memo.views, memo.epoch
        memo.pinned.update(pinned_call_ids(messages[len(seen) :]))
        pinned = memo.pinned
        candidates: dict[str, list[Read]] = {}
        for mi, pi, part, (call, key, read, barrier) in self._answered_calls(
            messages, len(seen), calls, self._keys
        ):
            if key is not None and not is_cleared(part):
                group, view = groups(key, read, epoch)
                if covering and view is not None and view in views:
                    self._memo.clear()
                    return None
                previous = latest.get(group)
                if previous is not None:
                    waiting = candidates.setdefault(group, failed.pop(group, []))
                    waiting.append(previous)
                latest[group] = (mi, pi, call, key, read, group, view)
                if view is not None:
                    views.add(view)
            if barrier:
                epoch += 1
        memo.epoch = epoch
        memo.seen = list(messages)
        changes: dict[int, dict[int, Part]] = {}
        superseded: list[tuple[int, int, str]] = []
        for group, waiting in candidates.items():
            target = latest[group]
            text = self._render(target)
            kept: list[Read] = []
            for candidate in waiting:
                if candidate[0] == current:
                    self._memo.clear()
                    return None
                replacement = self._supersede(messages, candidate, target, text, counter, pinned)
                if replacement is None:
                    kept.append(candidate)
                else:
                    changes.setdefault(candidate[0], {})[candidate[1]] = replacement
                    superseded.append((candidate[0], candidate[1], candidate[2].tool_call_id))
            if kept:
                failed[group] = kept
        superseded.sort()
        if changes:
            memo.seen = applied(messages, changes)
        return changes, [call_id for _mi, _pi, call_id in superseded]

    def _supersede(
        self,
        messages: Sequence[CanonicalMessage],
        read: Read,
        target: Read,
        text: str,
        counter: PartCounter,
        pinned: set[str] | frozenset[str] = frozenset(),
    ) -> ToolReturnPart | None:
        """The pointer replacing ``read``; ``None``: it would not be shorter, cannot be marked or is pinned.

        ``pinned`` holds the call ids whose call or answer is pinned: such a read keeps its content.

        While :meth:`compact` runs with ``ctx.references`` set (by harness-recall), the pointer
        ends with `` [recall: <ref>]``, the reference of the superseded read in the session's log.
        """
        mi, pi, _call, key = read[0], read[1], read[2], read[3]
        part = messages[mi].parts[pi]
        assert isinstance(part, ToolReturnPart)
        if part.tool_call_id in pinned:
            return None
        new_mark: dict[str, Any] = {
            "cleared": self.name,
            "superseded_by": target[2].tool_call_id,
            "file_key": key,
        }
        if target[3] != key:
            new_mark["covering_key"] = target[3]
        try:
            metadata = marked_metadata(part.metadata, **new_mark)
        except MessageError:
            return None  # metadata we cannot mark: leave the part alone
        references = self._references[0] if self._references else None
        if references is not None:
            ref = references(messages[mi], part)
            if ref is not None:
                text = f"{text} [recall: {ref}]"
        replacement = evolve(part, content=text, metadata=metadata)
        if counter.count_part(replacement) >= counter.count_part(part):
            return None
        return replacement

    def _answered_calls(
        self,
        messages: Sequence[CanonicalMessage],
        start: int,
        calls: dict[str, ToolCallPart],
        cache: dict[int, Cached],
    ) -> Iterator[tuple[int, int, ToolReturnPart, Cached]]:
        """Every tool return from ``messages[start]`` on whose call is known, with its key.

        Records the calls it passes in ``calls`` (shared with earlier scans) and the keys it
        computes in ``cache``.
        """
        for mi in range(start, len(messages)):
            message = messages[mi]
            if message.kind == "response":
                for part in message.parts:
                    if isinstance(part, ToolCallPart):
                        calls[part.tool_call_id] = part
                continue
            for pi, part in enumerate(message.parts):
                if isinstance(part, ToolReturnPart):
                    call = calls.get(part.tool_call_id)
                    if call is not None:
                        yield mi, pi, part, self._lookup(call, cache)

    def _full_plan(
        self, messages: Sequence[CanonicalMessage], counter: PartCounter
    ) -> tuple[dict[int, dict[int, Part]], list[str], Memo | None]:
        last = len(messages) - 1
        current = last if last >= 0 and messages[last].kind == "request" else -1
        cache: dict[int, Cached] = {}
        calls: dict[str, ToolCallPart] = {}
        reads: list[Read] = []
        latest: dict[str, int] = {}
        epoch = 0
        for mi, pi, part, (call, key, read, barrier) in self._answered_calls(messages, 0, calls, cache):
            if key is not None and not is_cleared(part):
                group, view = groups(key, read, epoch)
                latest[group] = len(reads)
                reads.append((mi, pi, call, key, read, group, view))
            if barrier:
                epoch += 1
        self._keys.clear()
        self._keys.update(cache)
        changes: dict[int, dict[int, Part]] = {}
        ids: list[str] = []
        covered = self._covered(reads, latest) if self.supersede_covered_ranges else {}
        pinned = set(pinned_call_ids(messages))
        memo: Memo | None = Memo(
            seen=list(messages),
            calls=calls,
            latest={group: reads[index] for group, index in latest.items()},
            failed={},
            views={view for i in latest.values() if (view := reads[i][6]) is not None},
            epoch=epoch,
            pinned=pinned,
        )
        if len(latest) == len(reads) and not covered:
            return changes, ids, memo
        rendered: dict[int, str] = {}
        for index, (mi, pi, call, _key, _read, group, _view) in enumerate(reads):
            target = latest[group]
            target = covered.get(target, target)
            if target == index:
                continue
            if mi == current:
                memo = None  # superseded but in the request being sent: the next pass must see it
                continue
            text = rendered.get(target)
            if text is None:
                text = rendered[target] = self._render(reads[target])
            replacement = self._supersede(messages, reads[index], reads[target], text, counter, pinned)
            if replacement is None:
                if memo is not None:
                    memo.failed.setdefault(group, []).append(reads[index])
                continue
            changes.setdefault(mi, {})[pi] = replacement
            ids.append(call.tool_call_id)
        return changes, ids, memo

    @staticmethod
    def describe_read(call: ToolCallPart) -> FileRead | None:
        """What file ``call`` reads (:func:`~harness_dedupe_file_reads.keys.describe_read`), or ``None``.

        Offered on the class, so code that finds the capability through its entry point
        (``harness inspect``) uses the same rule without importing this distribution.
        """
        return describe_read(call)

    @staticmethod
    def _covered(reads: list[Read], latest: dict[str, int]) -> dict[int, int]:
        """Map the index of a latest-of-its-key read to the newest later read covering its lines."""
        by_view: dict[str, list[tuple[int, str]]] = {}
        for index in sorted(latest.values()):
            read, view = reads[index][4], reads[index][6]
            if read is not None and view is not None and read.selection is not None:
                by_view.setdefault(view, []).append((index, read.selection))
        covered: dict[int, int] = {}
        for entries in by_view.values():
            for position, (index, selection) in enumerate(entries[:-1]):
                for later_index, later_selection in reversed(entries[position + 1 :]):
                    if selection_covers(later_selection, selection):
                        covered[index] = later_index
                        break
        return covered

    @contextmanager
    def _referencing(self, references: _References | None) -> Generator[None]:
        """Make ``references`` the one :meth:`_supersede` uses, until the block ends."""
        if references is None:
            yield
            return
        self._references[:] = [references]
        try:
            yield
        finally:
            self._references.clear()

    def _render(self, target: Read) -> str:
        call, key, read = target[2], target[3], target[4]
        if read is None:
            read = describe_read(call)
        path = read.path if read is not None else key
        values = {"path": path, "call_id": call.tool_call_id, "tool_name": call.tool_name, "key": key}
        return render_placeholder(self.placeholder, values)

    async def compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
        """Supersede every earlier read now (ignoring the trigger) and report the change.

        Args:
            ctx: The request context whose ``messages`` are edited.
            reason: Why it runs (goes into the reported event).

        Raises:
            CapabilityError: A custom ``file_key`` raised or returned a non-string.
        """
        messages = ctx.messages
        with self._lock, self._referencing(ctx.references):
            extended = self._extend_memo(messages, ctx.token_counter)
            if extended is not None:
                changes, ids = extended
                if not changes:
                    return
                new_messages = self._memo[0].seen  # already the edited history
            else:
                changes, ids, memo = self._full_plan(messages, ctx.token_counter)
                if not changes:
                    if memo is not None:
                        self._memo[:] = [memo]
                    return
                new_messages = applied(messages, changes)
                if memo is None:
                    self._memo.clear()
                else:
                    memo.seen = new_messages  # replace_messages copies it; this list stays private
                    self._memo[:] = [memo]
        details: dict[str, Any] = {"superseded_reads": len(ids)}
        ctx.replace_messages(
            new_messages,
            strategy=self.name,
            reason=reason,
            cleared_tool_call_ids=ids,
            details=details,
        )
