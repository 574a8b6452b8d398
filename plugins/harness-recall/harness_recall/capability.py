"""The :class:`Recall` capability: placeholders that say where the original is, and tools to read it."""

from __future__ import annotations

__all__ = ["COMPACTION_CAPABILITIES", "Recall"]

from typing import ClassVar

import attrs

from harness import Capability, RequestContext, RunContext, Session, Tool, hookimpl
from harness_recall.references import SessionReferences
from harness_recall.tools import read_reference, search_log

COMPACTION_CAPABILITIES: tuple[str, ...] = (
    "dedupe_file_reads",
    "clear_tool_results",
    "summarizing",
    "sliding_window",
    "tiered",
)
"""The capabilities :class:`Recall` runs before (so their placeholders carry references)."""

_MAX_SESSIONS = 8  # sessions whose references are kept (concurrent runs of one agent)

_RECALL_DESCRIPTION = (
    "Read back exactly what a placeholder replaced. Placeholders end with [recall: <ref>], "
    "e.g. [recall: r12.0] or [recall: r0-r41]. Long content is paged: pass the offset given."
)
_SEARCH_DESCRIPTION = (
    "Search the session's whole history, removed content included; lists matches with a ref for recall."
)


def _positive_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}.")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}.")


@attrs.frozen(eq=False, kw_only=True)
class Recall(Capability):
    """Let placeholders name the original content, and give the model tools to read it back.

    Before every model request on a session kept in a store (``Session.store`` set), it
    sets ``ctx.references`` (a :class:`~harness_recall.references.SessionReferences` for
    the session, one per session): the compaction capabilities after it then append
    `` [recall: <ref>]`` to each placeholder they write. On a session without a store it
    sets nothing, so placeholders stay exactly as they are. It never edits the history.

    Its :attr:`tools`, ``recall(ref, offset=0)`` and ``search_history(query, limit=5)``,
    read the session's append-only log; an ``Agent`` given this capability offers them to
    the model.

    Attributes:
        max_chars: Characters one ``recall`` answer shows; longer content is paged.
        max_results: Most matches one ``search_history`` answer lists.
        search: Offer ``search_history`` too (``False``: only ``recall``, saving its
            definition's tokens on every request).
    """

    name: ClassVar[str] = "recall"
    runs_before: ClassVar[tuple[str, ...]] = COMPACTION_CAPABILITIES

    max_chars: int = 4000
    max_results: int = 10
    search: bool = True
    _tools: tuple[Tool, ...] = attrs.field(init=False, repr=False)
    _references: list[SessionReferences] = attrs.field(
        init=False, repr=False, factory=list[SessionReferences]
    )

    def __attrs_post_init__(self) -> None:
        """Validate the parameters and build the tools.

        Raises:
            ValueError: ``max_chars`` is below 100 or ``max_results`` below 1 (or not integers), or
                ``search`` is not a bool.
        """
        _positive_int("max_chars", self.max_chars, 100)
        _positive_int("max_results", self.max_results, 1)
        if not isinstance(self.search, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"search must be True or False, got {self.search!r}.")
        object.__setattr__(self, "_tools", self._build_tools())

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The ``recall`` and (with :attr:`search`) ``search_history`` tools, the same objects every time."""
        return self._tools

    def references_for(self, session: Session | None) -> SessionReferences | None:
        """The references of ``session``, or ``None`` without a store.

        The same object for a session every time (its caches and what it learnt stay), for
        the eight sessions used most recently.
        """
        if session is None or session.store is None:
            return None
        known = self._references
        for index, references in enumerate(known):
            if references.session is session and references.reader.source is session.store:
                if index:
                    known.insert(0, known.pop(index))
                return references
        references = SessionReferences(session)
        known.insert(0, references)
        del known[_MAX_SESSIONS:]
        return references

    def should_compact(self, ctx: RequestContext) -> str | None:
        """Never: recall edits nothing (see :meth:`before_model_request`)."""
        return None

    @hookimpl
    async def before_model_request(self, ctx: RequestContext) -> None:
        """Install the session's references on ``ctx`` for the capabilities that run after this one."""
        references = self.references_for(ctx.session)
        if references is not None:
            ctx.references = references

    def _build_tools(self) -> tuple[Tool, ...]:
        max_chars, max_results = self.max_chars, self.max_results

        async def recall(ctx: RunContext, ref: str, offset: int = 0) -> str:
            """Read back content removed from the context.

            Args:
                ctx: The run (its session's log is read).
                ref: The placeholder's reference.
                offset: Character offset of the page.
            """
            return read_reference(ctx.session, ref, offset, max_chars=max_chars)

        async def search_history(ctx: RunContext, query: str, limit: int = 5) -> str:
            """Search the session's whole history.

            Args:
                ctx: The run (its session's log is searched).
                query: Words to find (all must occur).
                limit: Most matches.
            """
            return search_log(ctx.session, query, limit, max_results=max_results)

        tools = [Tool.from_function(recall, description=_RECALL_DESCRIPTION)]
        if self.search:
            tools.append(Tool.from_function(search_history, description=_SEARCH_DESCRIPTION))
        return tuple(tools)
