"""What a durable run is: the input every engine journals, and the store it names without a secret.

An engine (``harness-dbos``, ``harness-temporal``) journals a run's input once and often
repeats part of it in every unit; whatever it holds ends up in the engine's database, its
UI and every export. :class:`RunSpec` is that input: the agent's import reference, a
:class:`StoreReference`, the session, the prompt, the agent's fingerprint, when the run
started and the working directory of a session it creates. It never holds the history,
and never a credential:

* a store is named by a :class:`StoreReference`: a *name* the worker resolves from its
  own configuration (``--store NAME=URL``, ``HARNESS_STORE``; see
  :class:`~harness.durable.stores.StoreDirectory`), or a URL with every credential
  stripped, whose password the worker supplies (its own ``--store`` with the same URL, or
  libpq's ``PGPASSWORD`` / ``~/.pgpass``);
* :func:`store_reference` refuses a URL that still carries a password, unless the caller
  opts in to stripping it, with an error that says how to name the store instead.

:class:`RunStarter` builds the spec of a new run for an agent on a store.
"""

from __future__ import annotations

__all__ = ["SPEC_VERSION", "RunSpec", "RunStarter", "RunSummary", "StoreReference", "store_reference"]

import json
import os
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, cast

import attrs

from harness.durable.fingerprint import Fingerprinted, agent_fingerprint
from harness.errors import StoreCredentialsError, WorkflowIncompatibleError
from harness.redaction import MaskedURL

SPEC_VERSION = 2
"""The version of :meth:`RunSpec.to_json`'s object (1 was harness-dbos's own, with a raw store URL)."""

_NAME_PREFIX = "@"


@attrs.frozen
class StoreReference:
    """How a journaled run names its session store: a worker-side name, or a URL without credentials.

    Attributes:
        name: A store name the worker resolves from its own configuration.
        url: A store URL with every credential removed.
    """

    name: str | None = None
    url: str | None = None

    def __attrs_post_init__(self) -> None:
        if (self.name is None) == (self.url is None):
            raise ValueError("a store reference is either a name or a URL")
        if self.url is not None and MaskedURL(self.url).has_credentials:
            raise ValueError("a store reference's URL must not carry credentials")

    @classmethod
    def named(cls, name: str) -> StoreReference:
        """A reference to the store the worker knows as ``name``."""
        if not name or any(c.isspace() for c in name) or "=" in name:
            raise ValueError(f"a store name is a word without spaces or '=', got {name!r}")
        return cls(name=name)

    def to_json(self) -> dict[str, str]:
        """``{"name": ...}`` or ``{"url": ...}``."""
        return {"name": self.name} if self.name is not None else {"url": cast(str, self.url)}

    @classmethod
    def from_json(cls, data: object) -> StoreReference:
        """Read :meth:`to_json`'s object.

        Raises:
            WorkflowIncompatibleError: ``data`` is not a store reference.
        """
        if isinstance(data, Mapping):
            fields = cast(Mapping[str, Any], data)
            name, url = fields.get("name"), fields.get("url")
            try:
                if isinstance(name, str) and url is None:
                    return cls.named(name)
                if isinstance(url, str) and name is None:
                    return cls(url=url)
            except ValueError as exc:
                raise WorkflowIncompatibleError(f"the run's store reference is not valid: {exc}") from exc
        raise WorkflowIncompatibleError(
            "the run's store reference is not a {'name': ...} or {'url': ...} object",
            changed=("store",),
        )

    def __str__(self) -> str:
        return f"{_NAME_PREFIX}{self.name}" if self.name is not None else cast(str, self.url)


def store_reference(
    store: str | os.PathLike[str] | MaskedURL | StoreReference, *, strip_credentials: bool = False
) -> StoreReference:
    """The reference a run journals for ``store``.

    Args:
        store: A :class:`StoreReference`; ``"@name"`` for a store the workers know by
            name; or a store URL (a bare path is a SQLite file, made absolute so every
            worker of the machine finds it).
        strip_credentials: Accept a URL that carries a password and journal it without
            the password; the workers then supply it (their own ``--store`` for the same
            URL, or libpq's ``PGPASSWORD`` / ``~/.pgpass``).

    Raises:
        StoreCredentialsError: The URL carries a credential and ``strip_credentials`` is
            false (the message says how to name the store instead).
    """
    if isinstance(store, StoreReference):
        return store
    if isinstance(store, MaskedURL):
        url = store
    else:
        text = os.fspath(store).strip()
        if text.startswith(_NAME_PREFIX):
            return StoreReference.named(text[len(_NAME_PREFIX) :])
        if "://" not in text and not text.startswith(("sqlite:", "file:")):
            from pathlib import Path

            text = f"sqlite:///{Path(text).absolute()}"
        url = MaskedURL(text)
    if url.has_credentials and not strip_credentials:
        raise StoreCredentialsError(url.masked)
    return StoreReference(url=url.stripped())


@attrs.frozen
class RunSpec:
    """What a run is: the input a durable engine journals once (see the module).

    Attributes:
        agent: The agent's import reference (``"package.module:attribute"``).
        store: The session store, by reference (never a credential).
        session_id: The run's session (created by the run if the store has none such).
        prompt: The prompt (``None``: continue the session without a new prompt).
        fingerprint: :func:`~harness.durable.fingerprint.agent_fingerprint` of the agent
            when the run was started.
        started_at: When the run was started (UTC).
        working_directory: The working directory of a session the run creates.
    """

    agent: str
    store: StoreReference
    session_id: str
    prompt: str | None
    fingerprint: Mapping[str, str]
    started_at: datetime
    working_directory: str

    def to_json(self) -> dict[str, Any]:
        """The spec as a JSON object."""
        return {
            "version": SPEC_VERSION,
            "agent": self.agent,
            "store": self.store.to_json(),
            "session_id": self.session_id,
            "prompt": self.prompt,
            "fingerprint": dict(self.fingerprint),
            "started_at": self.started_at.isoformat(),
            "working_directory": self.working_directory,
        }

    def to_text(self) -> str:
        """:meth:`to_json` as one compact JSON text."""
        return json.dumps(self.to_json(), separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, data: object) -> RunSpec:
        """Read :meth:`to_json`'s object (or its text).

        Raises:
            WorkflowIncompatibleError: Not a spec of this version (another harness started
                the run), or a field is missing or of the wrong type.
        """
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except ValueError as exc:
                raise WorkflowIncompatibleError(
                    f"the workflow input is not JSON: {exc}", changed=("workflow input",)
                ) from exc
        if not isinstance(data, Mapping):
            raise WorkflowIncompatibleError(
                "the workflow input is not a JSON object", changed=("workflow input",)
            )
        fields = cast(Mapping[str, Any], data)
        version = fields.get("version")
        if version != SPEC_VERSION:
            raise WorkflowIncompatibleError(
                f"the run was started by another harness (input version {version!r}, this one reads "
                f"{SPEC_VERSION}); finish it with the harness that started it",
                changed=("workflow input",),
            )
        try:
            prompt = fields["prompt"]
            fingerprint = cast(Mapping[str, Any], fields["fingerprint"])
            return cls(
                agent=str(fields["agent"]),
                store=StoreReference.from_json(fields["store"]),
                session_id=str(fields["session_id"]),
                prompt=None if prompt is None else str(prompt),
                fingerprint={str(k): str(v) for k, v in fingerprint.items()},
                started_at=datetime.fromisoformat(str(fields["started_at"])),
                working_directory=str(fields["working_directory"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise WorkflowIncompatibleError(
                f"the workflow input is not valid: {type(exc).__name__}: {exc}", changed=("workflow input",)
            ) from exc


@attrs.frozen
class RunSummary:
    """What a finished durable run returns: never the history (it is in the store).

    Attributes:
        run_id: The engine's id of the run (its workflow id).
        session_id: The session the run wrote.
        output: The final response's text.
        revision: The session's store revision after the run.
        iterations: Model requests the run made.
        messages: Messages in the final history.
        usage: The run's usage (``session_total_usage`` shape).
        skipped_commits: Checkpoints the last execution found already written (a resumed run).
    """

    run_id: str
    session_id: str
    output: str | None
    revision: int
    iterations: int
    messages: int = 0
    usage: Mapping[str, Any] = attrs.field(factory=dict[str, Any])
    skipped_commits: int = 0

    def to_json(self) -> dict[str, Any]:
        """The summary as a JSON object."""
        data = attrs.asdict(self)
        data["usage"] = dict(self.usage)
        return data

    @classmethod
    def from_json(cls, data: object) -> RunSummary:
        """Read :meth:`to_json`'s object (or its text).

        Raises:
            WorkflowIncompatibleError: Not a run summary.
        """
        try:
            fields = cast(Mapping[str, Any], json.loads(data) if isinstance(data, str) else data)
            output = fields["output"]
            return cls(
                run_id=str(fields["run_id"]),
                session_id=str(fields["session_id"]),
                output=None if output is None else str(output),
                revision=int(fields["revision"]),
                iterations=int(fields["iterations"]),
                messages=int(fields.get("messages", 0)),
                usage=dict(cast(Mapping[str, Any], fields.get("usage") or {})),
                skipped_commits=int(fields.get("skipped_commits", 0)),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise WorkflowIncompatibleError(
                f"the workflow result is not a run summary: {type(exc).__name__}: {exc}",
                changed=("workflow result",),
            ) from exc


class RunStarter:
    """Builds the :class:`RunSpec` of new runs of one agent on one store.

    Args:
        agent: The agent's import reference (``"package.module:attribute"``).
        store: The store runs write to (see :func:`store_reference`).
        load: Builds the agent from its reference, the first time its fingerprint is
            needed (the engines pass :func:`harness.config.load_agent`).
        strip_credentials: See :func:`store_reference`.
        clock: The start time of a run (default: the wall clock, UTC).

    Raises:
        StoreCredentialsError: ``store`` carries a credential (see :func:`store_reference`).
    """

    def __init__(
        self,
        agent: str,
        store: str | os.PathLike[str] | MaskedURL | StoreReference,
        *,
        load: Callable[[str], Fingerprinted],
        strip_credentials: bool = False,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.agent = agent
        self.store = store_reference(store, strip_credentials=strip_credentials)
        self._load = load
        self._clock = clock or (lambda: datetime.now(UTC))
        self._fingerprint: dict[str, str] | None = None

    def fingerprint(self) -> dict[str, str]:
        """The agent's fingerprint (builds the agent the first time).

        Raises:
            AgentLoadError: The reference does not load.
        """
        if self._fingerprint is None:
            self._fingerprint = agent_fingerprint(self._load(self.agent))
        return self._fingerprint

    def spec(self, prompt: str | None, session_id: str | None = None) -> RunSpec:
        """The input of a new run (``session_id`` ``None``: a new session)."""
        return RunSpec(
            agent=self.agent,
            store=self.store,
            session_id=session_id if session_id is not None else uuid.uuid4().hex,
            prompt=prompt,
            fingerprint=self.fingerprint(),
            started_at=self._clock(),
            working_directory=os.getcwd(),
        )
