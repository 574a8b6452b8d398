"""The :class:`DeduplicateFileReads` capability.

Coding agents read the same file again and again. Only the latest read of a given view
of a file matters: it shows the file as it is now, and every earlier read of the same
view is either identical or stale. This capability replaces the content of earlier reads
with a short pointer to the latest one. It never removes a message or a part.
"""

from __future__ import annotations

__all__ = ["DEFAULT_PLACEHOLDER", "DeduplicateFileReads", "render_placeholder"]

import re
import threading
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

import attrs

from harness.capabilities import Capability, RequestContext, Trigger
from harness.core import CanonicalMessage, Part, ToolCallPart, ToolReturnPart, harness_mark, marked_metadata
from harness.core import replace as evolve
from harness.errors import CapabilityError, MessageError
from harness.history import PartCounter
from harness_dedupe_file_reads.keys import (
    DESCRIBERS,
    FILE_KEYS,
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


# (message index, part index, call, key, read, supersession group, view group)
_Read = tuple[int, int, ToolCallPart, str, "FileRead | None", str, "str | None"]
_Cached = tuple[ToolCallPart, "str | None", "FileRead | None", bool]  # (call, key, read, changes cwd)


@attrs.define
class _Memo:
    """What the last full pass learned, so appended messages can be checked alone.

    ``seen`` is the history as it was after that pass (and after its edits were applied);
    the other fields are the scan state at its end: the latest read of every group, and the
    earlier reads of a group that kept their content because a pointer would not have been
    shorter (or their metadata cannot be marked).
    """

    seen: list[CanonicalMessage]
    calls: dict[str, ToolCallPart]
    latest: dict[str, _Read]
    failed: dict[str, list[_Read]]
    views: set[str]
    epoch: int


def _is_cleared(part: ToolReturnPart) -> bool:
    if part.metadata is None:  # the common case, without the Mapping check
        return False
    mark = harness_mark(part)
    return mark is not None and bool(mark.get("cleared"))


def _groups(key: str, read: FileRead | None, epoch: int) -> tuple[str, str | None]:
    """The supersession group and the coverage view of a read.

    A relative shell path names another file once a persistent shell changed directory,
    so relative shell reads are grouped per directory epoch.
    """
    view = None if read is None else read.view
    if view is not None and read is not None and not read.path.startswith("/"):
        return f"{key}#{epoch}", f"{view}#{epoch}"
    return key, view


def _applied(
    messages: Sequence[CanonicalMessage], changes: dict[int, dict[int, Part]]
) -> list[CanonicalMessage]:
    """A copy of ``messages`` with the planned part replacements applied."""
    new_messages = list(messages)
    for mi, replaced in changes.items():
        parts = list(messages[mi].parts)
        for pi, new_part in replaced.items():
            parts[pi] = new_part
        new_messages[mi] = evolve(messages[mi], parts=tuple(parts))
    return new_messages


def _resolve_key(value: str | FileKey) -> FileKey:
    if isinstance(value, str):
        function = FILE_KEYS.get(value)
        if function is None:
            names = ", ".join(repr(name) for name in FILE_KEYS)
            raise ValueError(f"file_key must be a callable or one of {names}; got {value!r}.")
        return function
    if not callable(value):
        names = ", ".join(repr(name) for name in FILE_KEYS)
        raise ValueError(f"file_key must be a callable or one of {names}; got {value!r}.")
    return value


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
    reads. Running it twice changes nothing.

    With a recall capability installed (``harness-recall`` sets ``ctx.references``), each
    pointer ends with `` [recall: <ref>]``, the reference of the superseded read in the
    session's log; without one it is exactly the rendered ``placeholder``.

    Without a trigger it runs before every request. That is cheap: keys are cached per
    call, a history that only grew since the last pass is checked by its new messages
    alone, and a request with no new duplicate changes nothing and reports nothing.

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
    trigger: Trigger = attrs.field(init=False, repr=False)
    _key_function: FileKey = attrs.field(init=False, repr=False)
    _describer: Callable[[ToolCallPart], FileRead | None] | None = attrs.field(init=False, repr=False)
    _keys: dict[int, _Cached] = attrs.field(init=False, repr=False, factory=dict[int, "_Cached"])
    _memo: list[_Memo] = attrs.field(init=False, repr=False, factory=list[_Memo])
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
        function = _resolve_key(self.file_key)
        if not isinstance(self.placeholder, str) or not self.placeholder:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError("placeholder must be a non-empty string.")
        if self.supersede_covered_ranges and self.file_key not in ("auto", "shell_cat"):
            raise ValueError(
                "supersede_covered_ranges=True needs file_key='auto' or 'shell_cat' "
                "(line ranges are only known for the built-in shell reads)."
            )
        describer = DESCRIBERS.get(self.file_key) if isinstance(self.file_key, str) else None
        object.__setattr__(self, "trigger", trigger)
        object.__setattr__(self, "_key_function", function)
        object.__setattr__(self, "_describer", describer)

    def should_compact(self, ctx: RequestContext) -> str | None:
        """Fire on every request without a trigger, else when the trigger is exceeded."""
        if not self.trigger.configured:
            return "every request (no trigger configured)"
        return self.trigger.exceeded(ctx, self.name)

    # -- keys ----------------------------------------------------------------------------

    def _lookup(self, call: ToolCallPart, cache: dict[int, _Cached]) -> _Cached:
        hit = self._keys.get(id(call))
        if hit is not None and hit[0] is call:
            cache[id(call)] = hit
            return hit
        if self._describer is not None:
            read = self._describer(call)
            barrier = self.shell_keeps_directory and changes_directory(call)
            entry: _Cached = (call, None if read is None else read.key, read, barrier)
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
        candidates: dict[str, list[_Read]] = {}
        for mi, pi, part, (call, key, read, barrier) in self._answered_calls(
            messages, len(seen), calls, self._keys
        ):
            if key is not None and not _is_cleared(part):
                group, view = _groups(key, read, epoch)
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
            kept: list[_Read] = []
            for candidate in waiting:
                if candidate[0] == current:
                    self._memo.clear()
                    return None
                replacement = self._supersede(messages, candidate, target, text, counter)
                if replacement is None:
                    kept.append(candidate)
                else:
                    changes.setdefault(candidate[0], {})[candidate[1]] = replacement
                    superseded.append((candidate[0], candidate[1], candidate[2].tool_call_id))
            if kept:
                failed[group] = kept
        superseded.sort()
        if changes:
            memo.seen = _applied(messages, changes)
        return changes, [call_id for _mi, _pi, call_id in superseded]

    def _supersede(
        self,
        messages: Sequence[CanonicalMessage],
        read: _Read,
        target: _Read,
        text: str,
        counter: PartCounter,
    ) -> ToolReturnPart | None:
        """The pointer replacing ``read``, or ``None`` when it would not be shorter or cannot be marked.

        While :meth:`compact` runs with ``ctx.references`` set (by harness-recall), the pointer
        ends with `` [recall: <ref>]``, the reference of the superseded read in the session's log.
        """
        mi, pi, _call, key = read[0], read[1], read[2], read[3]
        part = messages[mi].parts[pi]
        assert isinstance(part, ToolReturnPart)
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
        cache: dict[int, _Cached],
    ) -> Iterator[tuple[int, int, ToolReturnPart, _Cached]]:
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
    ) -> tuple[dict[int, dict[int, Part]], list[str], _Memo | None]:
        last = len(messages) - 1
        current = last if last >= 0 and messages[last].kind == "request" else -1
        cache: dict[int, _Cached] = {}
        calls: dict[str, ToolCallPart] = {}
        reads: list[_Read] = []
        latest: dict[str, int] = {}
        epoch = 0
        for mi, pi, part, (call, key, read, barrier) in self._answered_calls(messages, 0, calls, cache):
            if key is not None and not _is_cleared(part):
                group, view = _groups(key, read, epoch)
                latest[group] = len(reads)
                reads.append((mi, pi, call, key, read, group, view))
            if barrier:
                epoch += 1
        self._keys.clear()
        self._keys.update(cache)
        changes: dict[int, dict[int, Part]] = {}
        ids: list[str] = []
        covered = self._covered(reads, latest) if self.supersede_covered_ranges else {}
        memo: _Memo | None = _Memo(
            seen=list(messages),
            calls=calls,
            latest={group: reads[index] for group, index in latest.items()},
            failed={},
            views={view for i in latest.values() if (view := reads[i][6]) is not None},
            epoch=epoch,
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
            replacement = self._supersede(messages, reads[index], reads[target], text, counter)
            if replacement is None:
                if memo is not None:
                    memo.failed.setdefault(group, []).append(reads[index])
                continue
            changes.setdefault(mi, {})[pi] = replacement
            ids.append(call.tool_call_id)
        return changes, ids, memo

    @staticmethod
    def _covered(reads: list[_Read], latest: dict[str, int]) -> dict[int, int]:
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

    def _render(self, target: _Read) -> str:
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
                new_messages = _applied(messages, changes)
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
