"""The ``--store`` and ``--session-dir`` options every session-using command shares, and opening the store.

Which store a command uses, first match wins:

1. ``--store URL`` on the command line (``sqlite:///path.db``, ``file:///dir``,
   ``postgresql://user@host/db`` with ``harness-postgres``, or a bare path);
2. ``--session-dir DIR`` on the command line: the ``file:`` store over ``DIR``, the JSON
   session files of the releases before stores (``harness sessions`` also spells it ``--dir``);
3. ``$HARNESS_STORE``, then ``$HARNESS_SESSION_DIR`` (a ``file:`` store);
4. :func:`harness.stores.default_store_url`: ``sessions.db`` in the XDG data folder.

Stores are opened with :func:`harness.config.store.open_store`, so an installed plugin
answers its scheme (``postgresql://``).
"""

from __future__ import annotations

__all__ = [
    "SESSION_NAME",
    "check_session_name",
    "default_store_missing",
    "legacy_session_files",
    "opened_store",
    "store_options",
    "store_url_for",
    "with_note",
]

from collections.abc import Callable, Generator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, TypeVar

import click
from click.core import ParameterSource

from harness.cli._app import HarnessCliError
from harness.errors import HarnessError, SessionIdError
from harness.session.ids import SESSION_ID_PATTERN, check_session_id
from harness.session.store import SessionStore
from harness.stores import default_store_url, store_url

_F = TypeVar("_F", bound=Callable[..., Any])

SESSION_NAME: Final = SESSION_ID_PATTERN
"""A session id a command accepts for a new session (:data:`harness.session.ids.SESSION_ID_PATTERN`)."""

STORE_HELP: Final = (
    "Session store: sqlite:///PATH.db, file:///DIR (JSON files), postgresql://USER@HOST/DB "
    "(needs harness-postgres), or a path. Default: $HARNESS_STORE, else "
    "$XDG_DATA_HOME/harness/sessions.db."
)


def store_options(*, dir_alias: bool = False) -> Callable[[_F], _F]:
    """Add ``--store URL`` and ``--session-dir DIR`` to a command (see the module docstring).

    Args:
        dir_alias: Also accept ``--dir`` for ``--session-dir`` (``harness sessions`` had it).

    The command receives ``store: str | None`` and ``session_dir: Path | None``; pass its
    context to :func:`store_url_for`.
    """
    names = ("--session-dir", "--dir") if dir_alias else ("--session-dir",)

    def decorate(function: _F) -> _F:
        function = click.option(
            *names,
            "session_dir",
            type=click.Path(file_okay=False, path_type=Path),
            default=None,
            envvar="HARNESS_SESSION_DIR",
            help=(
                "Keep sessions as JSON files in DIR: the same as --store file://DIR, the layout "
                "before stores (env HARNESS_SESSION_DIR)."
            ),
        )(function)
        return click.option(
            "--store", "store", default=None, metavar="URL", envvar="HARNESS_STORE", help=STORE_HELP
        )(function)

    return decorate


def store_url_for(ctx: click.Context) -> str:
    """The store URL the options of ``ctx`` and its parent commands choose (see the module docstring).

    An empty ``--store ""`` is refused (it would silently mean the default store); an
    empty ``$HARNESS_STORE`` counts as unset.

    Raises:
        click.UsageError: ``--store`` and ``--session-dir`` were both given.
        click.BadParameter: ``--store`` is empty.
    """
    command_line: dict[str, Any] = {}
    environment: dict[str, Any] = {}
    current: click.Context | None = ctx
    while current is not None:
        for name in ("store", "session_dir"):
            value = current.params.get(name)
            source = current.get_parameter_source(name)
            if name == "store" and isinstance(value, str) and not value.strip():
                if source is ParameterSource.COMMANDLINE:
                    raise click.BadParameter(
                        "the store URL is empty; give a URL or a path", param_hint="--store"
                    )
                continue  # an empty $HARNESS_STORE means unset
            if value is None or value == "":
                continue
            if source is ParameterSource.COMMANDLINE:
                command_line.setdefault(name, value)
            elif source is ParameterSource.ENVIRONMENT:
                environment.setdefault(name, value)
        current = current.parent
    if "store" in command_line and "session_dir" in command_line:
        raise click.UsageError(
            "--store and --session-dir are exclusive (--session-dir DIR is --store file://DIR)"
        )
    for chosen in (command_line, environment):
        if "store" in chosen:
            return str(chosen["store"]).strip()
        if "session_dir" in chosen:
            return store_url(Path(chosen["session_dir"]), "file")
    return default_store_url()


@contextmanager
def opened_store(url: str, *, read_only: bool = False, existing: bool = False) -> Generator[SessionStore]:
    """Open ``url`` with the installed plugins and close it when the block ends.

    Args:
        url: The store URL.
        read_only: For a command that only reads (``list``, ``show``, ``search``, the
            source of ``export``): the store must exist, and nothing is created in it.
        existing: For a command that changes sessions that must exist (``fork``, ``rm``,
            ``prune``): a missing ``sqlite:`` / ``file:`` store is an error, not created.

    Raises:
        StoreResolutionError: No store understands the URL.
        SessionStoreError: The store is corrupt, of a newer schema, or unreachable; with
            ``read_only``, also missing.
    """
    from harness.config.store import open_store

    if existing and not read_only:
        _check_exists(url)
    store = open_store(url, read_only=read_only)
    try:
        yield store
    finally:
        store.close()


def _check_exists(url: str) -> None:
    from harness.errors import SessionStoreError
    from harness.stores import store_path

    if "://" not in url:  # a bare path: a SQLite file or a folder
        if not Path(url).exists():
            raise SessionStoreError(url, "no store at this path; nothing was created")
        return
    scheme = url.split(":", 1)[0].lower()
    memory = url.rstrip("/").endswith(":memory:")
    if scheme in ("sqlite", "file") and not memory and not store_path(url).exists():
        what = "database file" if scheme == "sqlite" else "store folder"
        raise SessionStoreError(url, f"the {what} does not exist; nothing was created")


def default_store_missing(url: str) -> bool:
    """Whether ``url`` is the XDG default store (no ``$HARNESS_STORE``) and no run created it yet."""
    import os

    from harness.stores import store_path

    if url != default_store_url() or os.environ.get("HARNESS_STORE", "").strip():
        return False
    return url.startswith("sqlite:") and not store_path(url).exists()


def check_session_name(value: str, param_hint: str) -> str:
    """``value`` when it is a valid new session id (the rule of :mod:`harness.session.ids`).

    Raises:
        click.BadParameter: It is not 1-64 letters, digits, ``.``, ``_`` or ``-``.
    """
    try:
        return check_session_id(value)
    except SessionIdError as exc:
        raise click.BadParameter(str(exc), param_hint=param_hint) from None


def with_note(error: HarnessError, note: str) -> HarnessCliError:
    """The one-line CLI error for ``error`` (exit code 2), followed by ``; note``."""
    return _NotedError(error, note)


class _NotedError(HarnessCliError):
    """A :class:`HarnessCliError` whose line ends with what the command did not do."""

    def __init__(self, error: HarnessError, note: str) -> None:
        super().__init__(error)
        self.note = note

    def format_message(self) -> str:
        """``<type>: <message>; <note>``."""
        return f"{super().format_message()}; {self.note}"


def legacy_session_files(url: str) -> tuple[Path, int] | None:
    """The folder of session files earlier releases wrote by default, when ``url`` is the default store.

    Returns ``(folder, count)`` when ``$XDG_DATA_HOME/harness/sessions`` holds ``*.json``
    files and ``url`` is the default SQLite store: a hint that they can be imported.
    """
    import os

    if url != default_store_url() or os.environ.get("HARNESS_STORE", "").strip():
        return None
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    folder = Path(base) / "harness" / "sessions"
    try:
        count = sum(1 for _ in folder.glob("*.json"))
    except OSError:
        return None
    return (folder, count) if count else None
