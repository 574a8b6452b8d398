"""What every part of the store conformance kit shares: the store factory, sample data, the settings.

:class:`ConformanceBase` holds what a :class:`~harness.testing.store_conformance.StoreConformance`
subclass configures (the spec of a fresh store, the opener, the number of kills) and the
``make_store`` fixture; the test cases live in :mod:`harness.testing.store_cases`,
:mod:`harness.testing.store_lifecycle_cases` and :mod:`harness.testing.store_process_cases`.
"""

from __future__ import annotations

__all__ = [
    "PROJECT",
    "STAMP",
    "ConformanceBase",
    "StoreFactory",
    "new_session",
    "sample_messages",
    "store_state",
]

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import attrs
import pytest

from harness.core.messages import (
    CanonicalMessage,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownPart,
    Usage,
    UserPromptPart,
)
from harness.errors import SessionNotFoundError
from harness.session import Session, SessionStore
from harness.testing.store_workers import resolve_opener

STAMP = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
"""A fixed timestamp the sample data uses."""
PROJECT = "0123456789abcdef"
"""The project id of the sessions the kit creates."""


def sample_messages(tag: str = "") -> list[CanonicalMessage]:
    """A history with every part kind, odd text (emoji, a lone surrogate, NUL) and every message field.

    Searchable words: ``zebra`` (a prompt), ``quokka`` (a tool result), ``marmot`` (a
    retry prompt); ``tag`` is appended to the first prompt to tell sessions apart.
    """
    return [
        CanonicalMessage.request(
            SystemPromptPart("be terse"),
            UserPromptPart(f"find the zebra {tag}".strip(), timestamp=STAMP),
            instructions="instructions",
        ),
        CanonicalMessage.response(
            ThoughtPart("thinking about it", signature="sig", provider_name="prov"),
            TextPart("looking", metadata={"a": [1, 2.5, None]}),
            ToolCallPart(
                tool_call_id="call_a",
                tool_name="grep",
                args={"pattern": "zebra", "nested": {"deep": [True, False]}},
            ),
            model_name="model-1",
            usage=Usage(request_tokens=30, response_tokens=4, cached_tokens=2),
            provider_name="prov",
            provider_response_id="resp-1",
            finish_reason="tool_call",
            metadata={"k": "v"},
            timestamp=STAMP,
            run_id="run-1",
        ),
        CanonicalMessage.request(
            ToolReturnPart(
                tool_call_id="call_a",
                tool_name="grep",
                content={"lines": ["quokka habitat", 3]},
                timestamp=STAMP,
            )
        ),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="call_b", tool_name="read", args='{"path": "notes.txt"}')
        ),
        CanonicalMessage.request(
            RetryPromptPart("no marmot file here", tool_name="read", tool_call_id="call_b"),
            UserPromptPart(("look at this", {"type": "image", "url": "https://example.invalid/x.png"})),
        ),
        CanonicalMessage.response(
            UnknownPart("future-kind", data={"part_kind": "future-kind", "payload": {"x": 1}}),
            TextPart("done \U0001f993 \udcff \x00 end"),
        ),
        CanonicalMessage.request(RetryPromptPart("that was not parsable")),
        CanonicalMessage.response(TextPart("final answer")),
    ]


def new_session(
    store: SessionStore, messages: list[CanonicalMessage] | None = None, **fields: Any
) -> Session:
    """A session to be created in ``store`` by its first checkpoint (project and folder fixed)."""
    fields.setdefault("project_id", PROJECT)
    fields.setdefault("working_directory", "/work/conformance")
    return Session.create(store=store, messages=list(messages or []), **fields)


def store_state(store: SessionStore, session_ids: list[str], *, listing: bool = True) -> Any:
    """Everything a store holds for these sessions (to compare before and after a refused write).

    With ``listing``, every session's head too (a refused write must not add one).
    """
    out: list[Any] = [sorted((h.session_id, h) for h in store.list_sessions())] if listing else []
    for sid in session_ids:
        try:
            out.append((store.load(sid), store.read_log(sid), store.edits(sid)))
        except SessionNotFoundError:
            out.append(None)
    return out


@attrs.define
class StoreFactory:
    """What :meth:`ConformanceBase.make_store` gives a test: ``make_store(same=False)``.

    Attributes:
        specs: Every spec made so far (the last is the current store's).
        handles: Every handle opened (closed after the test).
    """

    suite: ConformanceBase
    tmp_path: Path
    specs: list[str] = attrs.field(factory=list[str])
    handles: list[SessionStore] = attrs.field(factory=list[SessionStore])

    def __call__(self, *, same: bool = False) -> SessionStore:
        """A handle on a new empty store, or with ``same`` a second handle on the last one."""
        if not same or not self.specs:
            self.specs.append(self.suite.store_spec(self.tmp_path, f"store{len(self.specs)}"))
        handle = self.suite.open_spec(self.specs[-1])
        self.handles.append(handle)
        return handle

    @property
    def spec(self) -> str:
        """The current store's spec (a URL another process can open)."""
        if not self.specs:
            self()
        return self.specs[-1]

    def close(self) -> None:
        """Close every handle, then clean every spec up."""
        for handle in self.handles:
            handle.close()
        for spec in self.specs:
            self.suite.cleanup_spec(spec)


class ConformanceBase:
    """The settings and the ``make_store`` fixture (see :mod:`harness.testing.store_conformance`)."""

    opener: ClassVar[str] = "harness.testing.store_workers:open_with_plugins"
    """``module:function`` that opens a spec, in this process and in the children."""
    processes: ClassVar[bool] = True
    """The store can be opened by another process from its spec (race and crash tests)."""
    crash_rounds: ClassVar[int] = 3
    """SIGKILLs in the always-run crash test."""
    slow_crash_rounds: ClassVar[int] = 60
    """SIGKILLs in the ``slow`` crash test."""
    race_commits: ClassVar[int] = 20
    """Commits each of the two racing processes makes."""
    property_examples: ClassVar[int] = 25
    """Hypothesis examples of the append-and-rewrite property."""

    # ------------------------------------------------------------------ what a subclass provides

    def store_spec(self, tmp_path: Path, name: str) -> str:
        """The URL of a new, empty store; ``name`` differs for every store of one test."""
        raise NotImplementedError("a StoreConformance subclass must implement store_spec(tmp_path, name)")

    def cleanup_spec(self, spec: str) -> None:
        """Remove what :meth:`store_spec` made, after the test (default: nothing; tmp_path goes anyway)."""

    def open_spec(self, spec: str) -> SessionStore:
        """Open a handle on ``spec`` (default: :attr:`opener`)."""
        return resolve_opener(self.opener)(spec)

    @pytest.fixture
    def make_store(self, tmp_path: Path) -> Iterator[StoreFactory]:
        """A :class:`StoreFactory`: ``make_store()`` a new store, ``make_store(same=True)`` another handle."""
        factory = StoreFactory(self, tmp_path)
        yield factory
        factory.close()
