"""Every public exception and warning harness raises, in one place.

Every error harness raises on purpose derives from :class:`HarnessError`, and every
warning from :class:`HarnessWarning`, so callers can catch or filter the whole family
with one line. Errors carry structured attributes (the file, the tool, the plugin...)
besides their message, so a caller can react without parsing text.

This module sits above one layer only, :mod:`harness.redaction`: every URL an error carries
is masked on the way in, so no error ever shows a password. It is long and better whole:
the one place to look for a harness exception is the point of it.

The families:

* messages and files: :class:`MessageError`, :class:`PartFieldError`, :class:`WireFormatError`,
  :class:`HistoryFileError`, :class:`InteropError`;
* tokens: :class:`TokenizerError`, :class:`ApproximateTokenCountWarning`;
* sessions, stores and file writes: :class:`SessionLoadError`, :class:`SessionSaveError`,
  :class:`SessionStoreError`, :class:`SessionNotFoundError`, :class:`SessionConflictError`,
  :class:`SessionLeaseError`, :class:`SearchQueryError`, :class:`StoreResolutionError`,
  :class:`StoreCredentialsError`, :class:`TargetNotRegularFileError`, :class:`SessionIdError`;
* tools: :class:`ToolRetry`, :class:`ToolArgumentsError`, :class:`ToolDefinitionError`,
  :class:`IllegalTransition`;
* plugins and capabilities: :class:`PluginLoadError`, :class:`CapabilityError`,
  :class:`CapabilityOrderError`, :class:`StackConfigError`, :class:`UnknownPluginNameWarning`;
* models: :class:`ModelError` and its kinds, :class:`ModelResolutionError`,
  :class:`ModelResponseError`, :class:`ReplayExhausted`;
* runs: :class:`RunError` and its kinds (:class:`MaxIterationsExceeded`,
  :class:`UserAbort`, :class:`RequestTimeout`, :class:`EmptyResponseError`,
  :class:`ToolRetryBudgetExceeded`, :class:`RunStopped`, :class:`ApprovalPendingError`),
  :class:`EventLoopRunningError`;
* durable runs: :class:`WorkflowIncompatibleError`, :class:`AgentLoadError`,
  :class:`EngineBoundaryError`, :class:`EngineConnectionError`;
* applications: :class:`CodingAgentMissingError`, :class:`PlotUnavailableError`,
  :class:`ScriptError`, :class:`HistoryBuildError`, :class:`PricesFileError`, :class:`EvalRunError`.
"""

from __future__ import annotations

__all__ = [
    "AgentLoadError",
    "ApprovalError",
    "ApprovalPendingError",
    "ApproximateTokenCountWarning",
    "CapabilityError",
    "CapabilityOrderError",
    "CodingAgentMissingError",
    "EmptyResponseError",
    "EngineBoundaryError",
    "EngineConnectionError",
    "EvalRunError",
    "EventLoopRunningError",
    "HarnessError",
    "HarnessExperimentalWarning",
    "HarnessWarning",
    "HistoryBuildError",
    "HistoryFileError",
    "IllegalTransition",
    "InteropError",
    "MaxIterationsExceeded",
    "MessageError",
    "PartFieldError",
    "ModelAuthenticationError",
    "ModelBadRequestError",
    "ModelContextLengthError",
    "ModelError",
    "ModelRateLimitError",
    "ModelResolutionError",
    "ModelResponseError",
    "ModelTimeoutError",
    "ModelUnavailableError",
    "PlotUnavailableError",
    "PluginLoadError",
    "PluginLoadWarning",
    "PricesFileError",
    "ProviderNotInstalledError",
    "ReplayExhausted",
    "RequestTimeout",
    "RunError",
    "RunStopped",
    "ScriptError",
    "SearchQueryError",
    "SessionConflictError",
    "SessionIdError",
    "SessionLeaseError",
    "SessionLoadError",
    "SessionNotFoundError",
    "SessionSaveError",
    "SessionStoreError",
    "StackConfigError",
    "StoreCredentialsError",
    "StoreResolutionError",
    "TargetNotRegularFileError",
    "TokenizerError",
    "ToolArgumentsError",
    "ToolDefinitionError",
    "ToolRetry",
    "ToolRetryBudgetExceeded",
    "UnknownPluginNameWarning",
    "UserAbort",
    "WireFormatError",
    "WorkflowIncompatibleError",
    "declare_experimental",
    "is_experimental",
    "warn_at_caller",
    "warn_experimental",
]


import inspect
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from harness.redaction import MaskedURL, mask_url, redact


def _rebuild(kind: type[BaseException], args: tuple[Any, ...]) -> BaseException:
    """An instance of ``kind`` with ``args``, made without calling its constructor (pickle sets the rest)."""
    made = kind.__new__(kind, *args)
    made.args = args
    return made


def _reduce(error: BaseException, local: frozenset[str]) -> tuple[Any, ...]:
    state = {key: value for key, value in vars(error).items() if key not in local}
    return (_rebuild, (type(error), error.args), state)


class HarnessError(Exception):
    """Root of every error harness raises on purpose.

    Every subclass pickles (to a process pool, a DBOS journal, a worker) as itself, with its
    message and attributes, whatever its constructor takes: it is rebuilt from its ``args``
    and attributes without calling ``__init__``. Attributes named in ``_process_local``
    (a run's ``session`` and ``state``) stay behind.
    """

    _process_local: frozenset[str] = frozenset()

    def __reduce__(self) -> tuple[Any, ...]:
        return _reduce(self, self._process_local)


class HarnessWarning(UserWarning):
    """Root of every warning harness emits; pickles as itself like :class:`HarnessError`."""

    def __reduce__(self) -> tuple[Any, ...]:
        return _reduce(self, frozenset())


class HarnessExperimentalWarning(HarnessWarning):
    """Emitted once when an experimental feature is imported.

    Silence every experimental feature at once with::

        warnings.filterwarnings("ignore", category=HarnessExperimentalWarning)
    """


_EXPERIMENTAL_FEATURES: set[str] = set()

_INTERNAL_PACKAGES = frozenset({"harness", "importlib", "asyncio", "pluggy", "contextlib", "functools"})
"""Top-level packages whose frames a warning skips on its way to the user's line."""


def _internal(frame: FrameType) -> bool:
    name = str(frame.f_globals.get("__name__", ""))
    top = name.split(".", 1)[0]
    frozen = frame.f_code.co_filename.startswith("<frozen ")  # importlib's bootstrap
    return frozen or top in _INTERNAL_PACKAGES or top.startswith("harness_")


def warn_at_caller(warning: Warning, *, skip: int = 0) -> None:
    """Emit ``warning`` at the first line outside harness, its plugins and the import machinery.

    A warning raised deep inside the loop, a lazy plugin import or an event loop still
    names the user's own line (``Agent(...)``, ``harness.open_store(...)``, an ``import``),
    whatever the depth: frames of ``harness``, ``harness_*`` packages, ``importlib``,
    ``asyncio``, ``pluggy``, ``contextlib`` and ``functools`` are skipped. The usual
    filters and the once-per-location registry of that line apply.

    Args:
        warning: The warning to emit.
        skip: Frames above the caller to skip first, whatever module they belong to
            (``warn_experimental`` skips the module declaring itself).
    """
    here = inspect.currentframe()
    frame = here.f_back if here is not None else None
    for _ in range(skip):
        frame = frame.f_back if frame is not None else None
    while frame is not None and _internal(frame):
        frame = frame.f_back
    if frame is None:
        warnings.warn(warning, stacklevel=2)
        return
    namespace = frame.f_globals
    registry: dict[str | tuple[str, type[Warning], int], int]
    registry = namespace.setdefault("__warningregistry__", {})
    warnings.warn_explicit(
        warning,
        type(warning),
        frame.f_code.co_filename,
        frame.f_lineno,
        module=str(namespace.get("__name__", "<string>")),
        registry=registry,  # no module_globals: a `python -c` loader cannot give its source
    )


def declare_experimental(feature: str) -> None:
    """Record ``feature`` as experimental without warning (:func:`is_experimental` says so).

    For a plugin that is installed everywhere but used only sometimes (``harness-otel``):
    it declares itself at import and calls :func:`warn_experimental` when it is first used.
    """
    _EXPERIMENTAL_FEATURES.add(feature)


def warn_experimental(feature: str, *, skip: int = 1) -> None:
    """Declare ``feature`` experimental and emit the experimental-feature warning for it.

    Call it at module import time; Python's module cache makes it fire once per process.
    The declaration is recorded whatever the warning filters say, so tools can tell which
    imported plugins are experimental (:func:`is_experimental`). The warning names the
    user's line (:func:`warn_at_caller`): the ``import`` of the plugin, or the line that
    asked for its capability, store or engine when harness imported it on demand.

    Args:
        feature: Import name of the experimental feature, e.g. ``"harness_sliding_window"``.
        skip: Frames to skip before looking for the user's line; the default skips the
            module calling this (it is declaring itself, not using itself); ``0`` for a
            call made when the feature is used rather than imported.
    """
    _EXPERIMENTAL_FEATURES.add(feature)
    warn_at_caller(
        HarnessExperimentalWarning(
            f"{feature} is experimental: its API may change or be removed in any release without a "
            "deprecation period. Silence all experimental warnings with "
            "warnings.filterwarnings('ignore', category=harness.HarnessExperimentalWarning)."
        ),
        skip=skip + 1,
    )


def is_experimental(module_name: str) -> bool:
    """Whether an imported module, or a package it belongs to, declared itself experimental.

    Args:
        module_name: A dotted module name, e.g. ``"harness_tiered.tiered"``; the answer is
            ``True`` when it or any parent package called :func:`warn_experimental` with
            its own name.
    """
    parts = module_name.split(".")
    return any(".".join(parts[:end]) in _EXPERIMENTAL_FEATURES for end in range(1, len(parts) + 1))


# ------------------------------------------------------------------------------
# Messages, files and formats
# ------------------------------------------------------------------------------


class MessageError(HarnessError, ValueError):
    """A message or part was built with values that break the message model."""


class PartFieldError(MessageError):
    """A part was built with a field value its wire form cannot hold (it would not load back).

    The constructor checks each field against the same field specs the wire loader uses
    (:data:`harness.core.fields.PART_FIELDS`). The message is one line:
    ``ToolCallPart.tool_name must be a string, got object``; the value itself is not shown.

    Attributes:
        part: The part's class name (``"ToolCallPart"``).
        field: The field.
        reason: What was wrong (the wire check's words).
    """

    def __init__(self, part: str, field: str, reason: str) -> None:
        self.part = part
        self.field = field
        self.reason = reason
        super().__init__(f"{part}.{field} {reason}")


class WireFormatError(HarnessError, ValueError):
    """A document could not be read as a message history.

    Attributes:
        message_index: Index of the offending message, when known (for a foreign format,
            its index in the document: the record, not the converted message).
        part_index: Index of the offending part (or content block) inside that message, when known.
        field: Name of the offending field, when known.
        reason: What was wrong, without the location prefix.
        line: The 1-based line of a JSON Lines document holding the offending message, when known.
        format: The format the document was being read as (``"pydantic-ai"``, ``"openai"``,
            ``"anthropic"``), or ``None`` when no format applies (the document is not a history
            in any accepted format, or the error comes from writing).
    """

    def __init__(
        self,
        reason: str,
        *,
        message_index: int | None = None,
        part_index: int | None = None,
        field: str | None = None,
        line: int | None = None,
        format: str | None = None,
    ) -> None:
        self.reason = reason
        self.message_index = message_index
        self.part_index = part_index
        self.field = field
        self.line = line
        self.format = format
        where: list[str] = []
        if format is not None:
            where.append(f"{format} format")
        if line is not None:
            where.append(f"line {line}")
        if message_index is not None:
            where.append(f"message {message_index}")
        if part_index is not None:
            where.append(f"part {part_index}")
        if field is not None:
            where.append(f"field {field!r}")
        super().__init__(f"{', '.join(where)}: {reason}" if where else reason)


class HistoryFileError(HarnessError):
    """A file given as a history could not be read as one.

    Attributes:
        path: The file.
        reason: What is wrong with it.
    """

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class InteropError(HarnessError):
    """A history cannot be converted to or from another framework's messages."""


# ------------------------------------------------------------------------------
# Tokens
# ------------------------------------------------------------------------------


class TokenizerError(HarnessError, ValueError):
    """A token counter was configured or called with values it cannot use."""


class ApproximateTokenCountWarning(HarnessWarning):
    """Token counts are approximate: the model's encoding is not available offline.

    Emitted once per process per missing encoding (and once when no encoding at all is
    available). Silence it with
    ``warnings.filterwarnings("ignore", category=harness.errors.ApproximateTokenCountWarning)``.
    """


# ------------------------------------------------------------------------------
# Sessions
# ------------------------------------------------------------------------------


class SessionLoadError(HarnessError):
    """A session file could not be loaded.

    Attributes:
        path: The file.
        reason: What is wrong with it.
        backup: The backup copy beside it, when one exists.
    """

    def __init__(self, path: Path, reason: str, *, backup: Path | None = None) -> None:
        self.path = path
        self.reason = reason
        self.backup = backup
        hint = f" (a backup exists: {backup})" if backup is not None else ""
        super().__init__(f"cannot load session file {path}: {reason}{hint}")


class SessionSaveError(HarnessError):
    """A session could not be saved (for example it would overwrite a corrupt file)."""


class SessionStoreError(HarnessError):
    """A session store is unusable: corrupt, of a newer schema, or unreachable.

    Nothing was written when this is raised.

    Attributes:
        store: The store's URL (``sqlite:///...``, ``postgresql://...``, ``file:///...``).
        session_id: The session concerned, when there is one.
        reason: What is wrong.
    """

    def __init__(self, store: str | MaskedURL, reason: str, *, session_id: str | None = None) -> None:
        store = mask_url(store)
        reason = redact(reason)
        self.store = store
        self.session_id = session_id
        self.reason = reason
        where = f"session {session_id!r} in store {store}" if session_id else f"store {store}"
        super().__init__(f"{where}: {reason}")


class SessionNotFoundError(SessionStoreError, KeyError):
    """The store holds no session with this id."""

    def __init__(self, store: str | MaskedURL, session_id: str) -> None:
        super().__init__(store, "no such session", session_id=session_id)

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class SessionConflictError(SessionStoreError):
    """A write was based on a stale revision: another writer got there first; nothing was written.

    Reload the session (``store.load(session_id)``) and run again.

    Attributes:
        expected: The revision the write was based on.
        actual: The revision the store holds (``None`` if the session is gone).
    """

    def __init__(self, store: str | MaskedURL, session_id: str, expected: int, actual: int | None) -> None:
        self.expected = expected
        self.actual = actual
        now = "it no longer exists" if actual is None else f"it is at revision {actual}"
        if expected == 0:
            reason = "cannot create it: a session with this id already exists"
        else:
            reason = (
                f"write based on revision {expected}, but {now}: another writer changed the session; "
                "reload it and try again"
            )
        super().__init__(store, reason, session_id=session_id)


class SessionLeaseError(SessionStoreError):
    """Another live writer holds the session's lease: a second run would only conflict later.

    Raised when a run starts, before any model call. A lease whose holder died (its
    process is gone, on this host) or expired (another host stopped renewing it) is
    taken over instead.

    Attributes:
        holder: Who holds it: ``"pid <pid> on <host>"``.
    """

    def __init__(self, store: str | MaskedURL, session_id: str, holder: str) -> None:
        self.holder = holder
        super().__init__(
            store,
            f"another run holds its lease ({holder}); wait for it to finish or open another session",
            session_id=session_id,
        )


class SearchQueryError(HarnessError, ValueError):
    """A store's ``search`` was given an argument it cannot use (a ``limit`` below 1).

    Attributes:
        store: The store's URL (credentials masked).
        reason: What is wrong.
    """

    def __init__(self, store: str | MaskedURL, reason: str) -> None:
        self.store = mask_url(store)
        self.reason = reason
        super().__init__(f"search in store {self.store}: {reason}")


class SessionIdError(HarnessError, ValueError):
    """A new session's id is not one every store and the command line can address.

    Attributes:
        session_id: The id as given (shortened to 80 characters in the message).
        reason: What is wrong with it.
    """

    def __init__(self, session_id: str, reason: str) -> None:
        self.session_id = session_id
        self.reason = reason
        shown = session_id if len(session_id) <= 80 else f"{session_id[:60]}...({len(session_id)} characters)"
        super().__init__(f"session id {shown!r}: {reason}")


class StoreResolutionError(HarnessError, ValueError):
    """No store understands a store URL.

    Attributes:
        url: The URL as given, credentials masked.
    """

    def __init__(self, url: str | MaskedURL, reason: str) -> None:
        self.url = mask_url(url)
        super().__init__(f"cannot open session store {self.url!r}: {redact(reason)}")


class StoreCredentialsError(HarnessError, ValueError):
    """A durable run was given a store URL that carries a credential, which its engine would journal.

    Nothing was started. Name the store instead (workers resolve the name from their own
    configuration), or keep the password out of the URL and opt in to stripping it.

    Attributes:
        url: The URL, credentials masked.
    """

    def __init__(self, url: str | MaskedURL) -> None:
        self.url = mask_url(url)
        super().__init__(
            f"store {self.url} carries a credential, which the engine would journal in the run's input "
            "(its database, its UI, every export); name the store instead: start the workers with "
            "--store NAME=URL (or HARNESS_STORE=URL) and pass store='@NAME', or keep the password out of "
            "the URL (PGPASSWORD, ~/.pgpass) and pass strip_credentials=True"
        )


class TargetNotRegularFileError(HarnessError, OSError):
    """A file write was refused: the target is not a regular file, so it would be destroyed.

    Raised by ``harness.session.atomic_write_bytes`` (and so ``Session.save`` and
    ``harness compact``) before anything is written. It is an :class:`OSError` too, so
    code that handles failed writes handles it.

    Attributes:
        path: The path given.
        kind: What is there: ``"directory"``, ``"FIFO"``, ``"character device"``,
            ``"block device"``, ``"socket"``, ``"special file"``, ``"dangling symlink"``,
            ``"symlink loop"``, or ``"symlink"`` (when symlinks are refused).
        target: Where the symlink points (a dangling link's text, or the special file a
            link resolves to), else ``None``.
    """

    def __init__(self, path: Path, kind: str, *, target: Path | None = None) -> None:
        self.path = path
        self.kind = kind
        self.target = target
        pointing = f" (pointing to {target})" if target is not None else ""
        article = "an" if kind[:1].lower() in "aeiou" else "a"
        super().__init__(f"refusing to write {path}: it is {article} {kind}{pointing}, not a regular file")


# ------------------------------------------------------------------------------
# Tools
# ------------------------------------------------------------------------------


class ToolRetry(HarnessError):  # noqa: N818 - name fixed by the API
    """Raised by a tool to ask the model to try again; the message tells it what to fix.

    Args:
        message: What went wrong and how to fix it.
        hint: Append "Fix the errors and try again." to the retry prompt (set ``False``
            to send ``message`` verbatim, as replayed recordings do).
    """

    def __init__(self, message: str, *, hint: bool = True) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message)


class ToolArgumentsError(HarnessError, ValueError):
    """The arguments of a tool call do not match the tool's schema.

    Attributes:
        tool_name: The tool concerned.
        errors: One line per problem, each naming the argument path.
    """

    def __init__(self, tool_name: str, errors: Sequence[str]) -> None:
        self.tool_name = tool_name
        self.errors = tuple(errors)
        count = len(self.errors)
        lines = "\n".join(f"- {e}" for e in self.errors)
        super().__init__(
            f"{count} validation error{'s' if count != 1 else ''} for tool {tool_name!r}:\n{lines}"
        )


class ToolDefinitionError(HarnessError, TypeError):
    """A function cannot be turned into a tool (unsupported annotation, bad name...).

    Attributes:
        tool_name: The tool concerned, when known.
    """

    def __init__(self, message: str, *, tool_name: str | None = None) -> None:
        self.tool_name = tool_name
        super().__init__(message)


class IllegalTransition(HarnessError):  # noqa: N818 - name fixed by the API
    """A tool call was moved to a status its current status does not allow.

    Attributes:
        tool_call_id: The call concerned.
        current: Its :class:`~harness.tools.ToolCallStatus` before the transition (``None`` if unknown).
        target: The status that was refused.
    """

    def __init__(self, tool_call_id: str, current: Any, target: str, detail: str) -> None:
        self.tool_call_id = tool_call_id
        self.current = current
        self.target = target
        super().__init__(f"tool call {tool_call_id!r}: {detail}")


# ------------------------------------------------------------------------------
# Plugins, capabilities and stacks
# ------------------------------------------------------------------------------


class PluginLoadError(HarnessError):
    """A plugin could not be imported, registered or unregistered.

    Attributes:
        plugin_name: The name the plugin registers (or was looked up) under, when known.
        distribution: The distribution that ships it, when known.
        version: That distribution's version, when known.
        entry_point: The entry point's target (``"module:attribute"``), for entry-point plugins.
        reason: What went wrong, without the location prefix.
    """

    def __init__(
        self,
        message: str,
        *,
        plugin_name: str | None = None,
        distribution: str | None = None,
        version: str | None = None,
        entry_point: str | None = None,
        reason: str | None = None,
    ) -> None:
        self.plugin_name = plugin_name
        self.distribution = distribution
        self.version = version
        self.entry_point = entry_point
        self.reason = reason if reason is not None else message
        super().__init__(message)


class PluginLoadWarning(HarnessWarning):
    """An installed plugin that turns itself on (a ``plugin.<name>`` entry point) failed to load.

    It is skipped, and whatever does not need it goes on; emitted once per process per
    entry point. The message is that of the :class:`PluginLoadError` it stands for.

    Attributes:
        plugin_name: The entry point's name.
        distribution: The distribution that ships it, when known.
    """

    def __init__(self, message: str, *, plugin_name: str, distribution: str | None = None) -> None:
        self.plugin_name = plugin_name
        self.distribution = distribution
        super().__init__(message)


class CapabilityError(HarnessError):
    """A capability failed or left the history in a state no provider accepts.

    Attributes:
        capability: Name of the capability at fault.
    """

    def __init__(self, capability: str, message: str) -> None:
        self.capability = capability
        super().__init__(f"capability {capability!r}: {message}")


class CapabilityOrderError(HarnessError):
    """Declared capability ordering is impossible (a cycle or a conflict)."""


class StackConfigError(HarnessError, ValueError):
    """A stack description is malformed, names an unknown capability or parameter, or a value is bad.

    The message names where the entry came from, the capability, the parameter and the
    accepted names or values, with a "did you mean" suggestion when one is close.

    Attributes:
        source: Where the entry came from (``"--stack entry 2"``,
            ``"harness.toml [[stack]] 3"``), or the file or string at fault.
        entry: The capability name of the entry at fault, when known.
        parameter: The parameter at fault, when known.
        accepted: The accepted capability names, parameters or values, when relevant.
        suggestion: The closest accepted name, when one is close.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str = "",
        entry: str | None = None,
        parameter: str | None = None,
        accepted: Sequence[str] = (),
        suggestion: str | None = None,
    ) -> None:
        self.source = source
        self.entry = entry
        self.parameter = parameter
        self.accepted = tuple(accepted)
        self.suggestion = suggestion
        super().__init__(message)


class UnknownPluginNameWarning(HarnessWarning):
    """An entry of ``HARNESS_DISABLE_PLUGINS`` / ``HARNESS_LOAD_PLUGINS`` matches no installed plugin.

    Emitted once per process per variable and entry, naming the installed plugins and the
    closest one ("did you mean").

    Attributes:
        variable: The variable (or ``PluginManager.load_entrypoint_plugins`` argument) holding the entry.
        entry: The entry as written.
        installed: The installed entry-point names, sorted.
        suggestion: The closest installed entry-point or distribution name, when one is close.
    """

    def __init__(
        self,
        message: str,
        *,
        variable: str,
        entry: str,
        installed: Sequence[str] = (),
        suggestion: str | None = None,
    ) -> None:
        self.variable = variable
        self.entry = entry
        self.installed = tuple(installed)
        self.suggestion = suggestion
        super().__init__(message)


# ------------------------------------------------------------------------------
# Models
# ------------------------------------------------------------------------------


class ModelError(HarnessError):
    """A model provider refused or failed a request.

    Raised by the real providers (``harness.models.openai``, ``harness.models.anthropic``)
    once their retry policy gave up, or at once for errors a retry cannot fix.

    Attributes:
        provider: The provider's name, e.g. ``"openai"`` or ``"anthropic"``.
        status_code: The HTTP status the provider answered with (``None`` for timeouts
            and connection failures).
        provider_message: The provider's own error message, verbatim.
        model_name: The model the request was for, when known.
        attempts: How many times the request was sent.
    """

    def __init__(
        self,
        provider: str,
        provider_message: str,
        *,
        status_code: int | None = None,
        model_name: str | None = None,
        attempts: int = 1,
    ) -> None:
        self.provider = provider
        self.provider_message = provider_message
        self.status_code = status_code
        self.model_name = model_name
        self.attempts = attempts
        status = f" (HTTP {status_code})" if status_code is not None else ""
        model = f" model {model_name!r}" if model_name else ""
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        super().__init__(f"{provider}{model}{status}{tries}: {provider_message}")


class ModelAuthenticationError(ModelError):
    """The provider rejected the credentials (HTTP 401/403) or none were configured. Never retried."""


class ModelBadRequestError(ModelError):
    """The provider rejected the request itself (HTTP 400, 404, 413, 422...). Never retried."""


class ModelRateLimitError(ModelError):
    """The provider kept answering HTTP 429 until the retry policy gave up."""


class ModelUnavailableError(ModelError):
    """The provider kept failing (HTTP 5xx, 529, connection errors) until the retry policy gave up."""


class ModelTimeoutError(ModelError):
    """Every attempt timed out before the provider answered."""


class ModelContextLengthError(ModelBadRequestError):
    """The provider refused the request because it exceeds the model's context window. Never retried."""


class ModelResolutionError(HarnessError, ValueError):
    """A model string such as ``"openai:gpt-4o-mini"`` names no known provider.

    Attributes:
        model_string: The string that could not be resolved.
        known_prefixes: The provider prefixes that would have been understood.
    """

    def __init__(self, model_string: str, message: str, known_prefixes: tuple[str, ...] = ()) -> None:
        self.model_string = model_string
        self.known_prefixes = known_prefixes
        super().__init__(message)


class ProviderNotInstalledError(ModelResolutionError):
    """The SDK a provider needs is not installed (``pip install 'harness-loop[openai]'``).

    Attributes:
        extra: The name of the optional dependency group to install.
    """

    def __init__(self, model_string: str, extra: str) -> None:
        self.extra = extra
        super().__init__(
            model_string,
            f"model {model_string!r} needs the {extra} SDK, which is not installed; "
            f"install it with: pip install 'harness-loop[{extra}]'",
        )


class ModelResponseError(HarnessError):
    """A model produced something that is not a response message.

    Attributes:
        model_name: The model at fault, when known.
    """

    def __init__(self, message: str, *, model_name: str | None = None) -> None:
        self.model_name = model_name
        super().__init__(message)


class ReplayExhausted(HarnessError):  # noqa: N818 - name fixed by the API
    """A replay model was asked for more responses than its recording holds.

    Attributes:
        recorded: How many responses the recording holds.
    """

    def __init__(self, message: str, *, recorded: int | None = None) -> None:
        self.recorded = recorded
        super().__init__(message)


# ------------------------------------------------------------------------------
# Runs
# ------------------------------------------------------------------------------


class RunError(HarnessError):
    """A run stopped with an error after saving its history.

    Attributes:
        session: The :class:`harness.session.Session` holding the saved history (also for
            runs started without one), set by the loop before raising.
        state: The run's :class:`harness.tools.RunState` (counters and the tool-call
            registry) when it stopped, set by the loop before raising.

    Both are typed ``Any`` because this bottom layer imports nothing above it. Both stay in
    the process that ran: a pickled copy (a worker's, a journal's) has them ``None``.
    """

    _process_local = frozenset({"session", "state"})

    session: Any = None
    state: Any = None


class MaxIterationsExceeded(RunError):  # noqa: N818 - name fixed by the API
    """The run needed more model requests than ``max_iterations`` allows."""

    def __init__(self, max_iterations: int) -> None:
        self.max_iterations = max_iterations
        super().__init__(
            f"the run reached max_iterations={max_iterations} model requests without a final answer "
            "(the model kept calling tools); the history was saved, raise max_iterations or continue "
            "the run with another prompt"
        )


class UserAbort(RunError):  # noqa: N818 - name fixed by the API
    """The user aborted the run (``Agent.abort()``, or raised by a tool)."""


class RequestTimeout(RunError, TimeoutError):  # noqa: N818 - name fixed by the API
    """The run exceeded the agent's ``request_timeout``."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        super().__init__(f"the run exceeded request_timeout={timeout}s; completed work was saved")


class EmptyResponseError(RunError):
    """The model kept answering with empty responses after being nudged."""

    def __init__(self, count: int, max_empty_responses: int) -> None:
        self.count = count
        self.max_empty_responses = max_empty_responses
        super().__init__(
            f"the model returned {count} empty responses in a row (no text, no tool call); "
            f"max_empty_responses={max_empty_responses} nudges did not help"
        )


class ToolRetryBudgetExceeded(RunError):  # noqa: N818 - name fixed by the API
    """A tool used up its retry budget (consecutive retry prompts)."""

    def __init__(self, tool_name: str, budget: int, last_error: str) -> None:
        self.tool_name = tool_name
        self.budget = budget
        self.last_error = last_error
        super().__init__(
            f"tool {tool_name!r} exceeded its retry budget of {budget} consecutive retries; "
            f"last problem: {last_error}"
        )


class RunStopped(RunError):  # noqa: N818 - reads as what happened
    """A plugin stopped the run on purpose (a call limit, a policy), after the history was saved.

    Plugins raise a subclass of it from a hook (``wrap_tool_call``, ``wrap_model_request``...);
    unlike any other exception a plugin raises, it reaches the caller unchanged instead of
    becoming a :class:`CapabilityError`.
    """


class EventLoopRunningError(HarnessError, RuntimeError):
    """A synchronous entry point (``Agent.run_sync``, ``compact_sync``) was called in a running event loop.

    It would have to block the loop it runs in (a notebook's, an async application's), so
    it refuses before doing anything; await the asynchronous form there instead.

    Attributes:
        function: What was called (``"Agent.run_sync"``).
        instead: What to write instead (``"await agent.run(...)"``).
    """

    def __init__(self, function: str, instead: str) -> None:
        self.function = function
        self.instead = instead
        super().__init__(
            f"{function}() cannot run inside a running event loop (a notebook, an async function): "
            f"it would block that loop; use `{instead}` there instead"
        )


class ApprovalError(HarnessError, ValueError):
    """``approvals`` given to a run name a tool call that is not waiting for approval."""


class ApprovalPendingError(RunError):
    """A run was started on a session whose tool calls still wait for a human decision.

    Resume it with ``agent.run(None, session=..., approvals={call_id: decision, ...})``.

    Attributes:
        tool_call_ids: The calls waiting for approval, in history order.
    """

    def __init__(self, message: str, *, tool_call_ids: Sequence[str] = ()) -> None:
        self.tool_call_ids = tuple(tool_call_ids)
        super().__init__(message)


# ------------------------------------------------------------------------------
# Applications: the demo, the plot, the testing kit
# ------------------------------------------------------------------------------


class WorkflowIncompatibleError(HarnessError):
    """A durable run cannot go on: its code or stack changed since it started, or its journal does not fit.

    A durable engine replays a run from its journal; an agent whose model, tools,
    capabilities, prompt or settings differ from the ones the run started with would
    send different requests, so the run is refused instead of silently diverging. The
    session is left as it was.

    Attributes:
        run_id: The workflow (run) that was refused.
        changed: The agent's components that differ (``"tools"``, ``"capabilities"``...),
            or the journal entry that does not fit.
    """

    def __init__(self, message: str, *, run_id: str | None = None, changed: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.changed = changed


class EngineBoundaryError(HarnessError, AttributeError):
    """A tool read a run-context field that did not cross into the engine's activity.

    Under a durable engine a tool runs in an activity on a worker, not in the run's
    process: the run's history, usage and per-run state stay with the orchestration. Such
    a field raises this instead of reading as empty; the message names what to use.

    Attributes:
        engine: The engine (``"harness-temporal"``).
        field: The field (``"RunContext.messages"``).
    """

    def __init__(self, engine: str, field: str) -> None:
        self.engine = engine
        self.field = field
        super().__init__(
            f"{field} is not available to a tool running under {engine}: the tool runs in an activity on a "
            "worker, and the run's history, usage and state stay with the workflow (the session's stored "
            "log is: read it through ctx.session.store)"
        )


class EngineConnectionError(HarnessError):
    """A durable engine's server or system database cannot be reached, or its address is unusable.

    Raised when a worker (or a client) starts, before any run is touched; the message says
    what to check.

    Attributes:
        engine: The engine (``"harness-dbos"``, ``"harness-temporal"``).
        target: What was to be reached: the system database URL (credentials masked) or the
            server address.
        reason: What went wrong and what to check.
    """

    def __init__(self, engine: str, target: str | MaskedURL, reason: str) -> None:
        self.engine = engine
        self.target = mask_url(target)
        self.reason = redact(reason)
        super().__init__(f"{engine} cannot use {self.target}: {self.reason}")


class AgentLoadError(HarnessError):
    """An agent reference (``"package.module:attribute"``) could not be turned into an :class:`Agent`.

    Attributes:
        reference: The reference as given.
    """

    def __init__(self, reference: str, message: str) -> None:
        super().__init__(f"agent {reference!r}: {message}")
        self.reference = reference


class CodingAgentMissingError(HarnessError):
    """The example agent (``harness-coding-agent``) is not installed."""


class PlotUnavailableError(HarnessError):
    """matplotlib, needed for the PNG chart, is not installed."""


class PricesFileError(HarnessError, ValueError):
    """A prompt-cache prices file (``harness eval --prices``) cannot be read or has a bad value.

    Attributes:
        path: The file (``None`` for the packaged defaults).
        key: The dotted key at fault (``providers.openai.cache_read``), ``None`` for the file.
        reason: What is wrong.
    """

    def __init__(self, path: Path | None, key: str | None, reason: str) -> None:
        where = str(path) if path is not None else "the packaged prices"
        super().__init__(f"{where}: {key}: {reason}" if key else f"{where}: {reason}")
        self.path = path
        self.key = key
        self.reason = reason


class EvalRunError(HarnessError):
    """One replay of ``harness eval`` failed (in this process or a worker process).

    Attributes:
        file: The transcript.
        stack: The stack's label.
        budget: The budget.
        error: The original error's type name and message.
    """

    def __init__(self, file: str, stack: str, budget: int, error: str) -> None:
        super().__init__(f"{file}: stack {stack!r} at budget {budget}: {error}")
        self.file = file
        self.stack = stack
        self.budget = budget
        self.error = error


class ScriptError(HarnessError):
    """A step of a scripted model cannot become a response."""


class HistoryBuildError(HarnessError):
    """A :class:`HistoryBuilder` was asked for a history it cannot or should not build."""
