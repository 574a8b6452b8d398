"""The ``harness`` click group, its entry point and the helpers every command shares.

Shared helpers for command modules:

* :func:`console` / :func:`error_console`: rich consoles for stdout and stderr;
  :func:`escaped` for user text inside rich markup.
* :func:`stack_option`: the ``--stack`` / ``--config`` / ``--stack-name`` options, and
  :func:`resolve_cli_stack` to turn their values into capabilities.
* :func:`load_history_file` / :func:`read_history_file`: read a history file (the wire
  format, a pydantic-ai dump, or a ``harness.session`` file), with a clear error.

Exit codes (:data:`EXIT_OK`, :data:`EXIT_PROBLEM`, :data:`EXIT_USAGE`,
:data:`EXIT_INTERRUPTED`): 0 success; 1 the command ran and found a problem a script
cares about; 2 a usage or input error (bad option, unreadable or malformed file, bad stack
string, any :class:`~harness.errors.HarnessError`); 130 interrupted.
"""

from __future__ import annotations

from harness.errors import HistoryFileError

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_PROBLEM",
    "EXIT_USAGE",
    "HarnessCliError",
    "HistoryFile",
    "cli",
    "console",
    "error_console",
    "escaped",
    "load_history_file",
    "main",
    "read_history_file",
    "resolve_cli_stack",
    "stack_option",
]

import json
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, Literal, TypeVar, cast

import attrs
import click
from rich.console import Console
from rich.markup import escape

from harness.core.messages import CanonicalMessage
from harness.errors import HarnessError, HarnessExperimentalWarning, WireFormatError

if TYPE_CHECKING:
    from harness.capabilities.base import Capability
    from harness.config import StackEntry
    from harness.session import Session

EXIT_OK: Final = 0
"""The command succeeded."""
EXIT_PROBLEM: Final = 1
"""The command ran but found a problem (e.g. ``inspect`` found invariant violations)."""
EXIT_USAGE: Final = 2
"""A usage or input error: bad option, bad file, bad stack string, any harness error."""
EXIT_INTERRUPTED: Final = 130
"""Interrupted (Ctrl-C)."""

_F = TypeVar("_F", bound=Callable[..., Any])


def console() -> Console:
    """A stdout console that does not squeeze tables when the output is not a terminal."""
    return Console() if sys.stdout.isatty() else Console(width=200, soft_wrap=True)


def error_console(*, force_terminal: bool = False) -> Console:
    """A stderr console, for progress, warnings and errors.

    Args:
        force_terminal: Draw live displays (a progress bar) even when stderr is not a terminal.
    """
    if sys.stderr.isatty() or force_terminal:
        return Console(stderr=True, force_terminal=force_terminal or None)
    return Console(stderr=True, width=200, soft_wrap=True)


class HarnessCliError(click.ClickException):
    """A :class:`~harness.errors.HarnessError` reported by a command: exit code 2, one line on stderr."""

    exit_code = EXIT_USAGE

    def __init__(self, error: HarnessError) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error

    def show(self, file: IO[Any] | None = None) -> None:
        """Print ``error: <type>: <message>`` to stderr (or ``file``)."""
        click.echo(f"error: {self.format_message()}", file=file or sys.stderr)


class _HarnessGroup(click.Group):
    """A group whose commands report harness errors as :class:`HarnessCliError` (exit 2)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except HarnessError as exc:
            raise HarnessCliError(exc) from exc


@click.group(
    cls=_HarnessGroup,
    epilog="""\b
Examples:
  harness inspect history.json
  harness compact history.json --stack "dedupe_file_reads sliding_window:max_messages=80" --dry-run
  harness plugins --json
  HARNESS_TRACE_PLUGINS=1 harness compact session.json --out compacted.json
""",
)
@click.version_option(package_name="harness-loop")
def cli() -> None:
    """harness: a minimal agent loop with pluggy hooks and context-window capabilities.

    Exit codes: 0 ok, 1 the command found a problem (e.g. invariant violations),
    2 usage or input error, 130 interrupted.
    """
    # Running the CLI is the opt-in: the capability plugins it loads are all experimental,
    # and one warning per plugin would bury the output (the README says they are).
    warnings.filterwarnings("ignore", category=HarnessExperimentalWarning)


def main(argv: list[str] | None = None) -> Any:
    """Entry point of the ``harness`` command; errors print as one clear line on stderr.

    Returns:
        The command's exit code when it asked for one (the console script passes it to
        ``sys.exit``).
    """
    try:
        return cli.main(args=argv, prog_name="harness", standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except (click.Abort, KeyboardInterrupt):
        click.echo("interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except HarnessError as exc:  # raised outside a command (e.g. while parsing)
        HarnessCliError(exc).show()
        sys.exit(EXIT_USAGE)


# --------------------------------------------------------------------------------------
# Stacks
# --------------------------------------------------------------------------------------


def stack_option(function: _F) -> _F:
    """Add ``--stack``, ``--config`` and ``--stack-name`` to a command.

    The command receives ``stack: str | None``, ``config: Path | None`` and
    ``stack_name: str | None``; pass them to :func:`resolve_cli_stack`.
    """
    function = click.option(
        "--stack-name",
        "stack_name",
        default=None,
        metavar="NAME",
        help="Use the named stack [stacks.NAME] of the configuration file.",
    )(function)
    function = click.option(
        "--config",
        "config",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        default=None,
        help="Read the stack from this harness.toml / pyproject.toml instead of the discovered one.",
    )(function)
    return click.option(
        "--stack",
        "stack",
        default=None,
        metavar="SPEC",
        help=(
            'Capability stack in the short form, e.g. "dedupe_file_reads '
            'clear_tool_results:keep_pairs=3,max_fraction=0.8". Wins over configuration files.'
        ),
    )(function)


def resolve_cli_stack(
    stack: str | None,
    config: Path | None,
    stack_name: str | None,
    *,
    default: str | None = None,
    context_window: int | None = None,
) -> tuple[list[Capability], list[StackEntry]]:
    """Build the stack chosen by :func:`stack_option`'s options (see :func:`harness.config.resolve_stack`).

    Raises:
        StackConfigError: The stack string, the file or an entry is bad.
    """
    from harness.config import resolve_stack

    return resolve_stack(
        stack, config=config, default=default, context_window=context_window, name=stack_name
    )


# --------------------------------------------------------------------------------------
# History files
# --------------------------------------------------------------------------------------


@attrs.frozen
class HistoryFile:
    """A history read by :func:`read_history_file`.

    Attributes:
        path: The file.
        kind: ``"history"`` (a JSON array: the wire format, which is pydantic-ai's
            message-history format) or ``"session"`` (a ``harness.session`` file).
        messages: The messages.
        session: The session, for a session file.
    """

    path: Path
    kind: Literal["history", "session"]
    messages: list[CanonicalMessage]
    session: Session | None = None


def read_history_file(path: Path) -> HistoryFile:
    """Read a history file, detecting its format.

    A JSON array is read as the wire format (pydantic-ai dumps are the same format); a
    JSON object is read as a session file (``harness.session``).

    Raises:
        HistoryFileError: The file cannot be read, is empty, is not JSON, or is JSON of
            another shape.
        WireFormatError: Re-raised as :class:`HistoryFileError` naming the file, the
            message, the part and the field.
        SessionLoadError: A session file is invalid (it names the file).
    """
    try:
        raw = path.read_bytes()
    except IsADirectoryError:
        raise HistoryFileError(path, "is a folder, not a history file") from None
    except OSError as exc:
        raise HistoryFileError(path, f"cannot read the file: {exc.strerror or exc}") from exc
    if not raw.strip():
        raise HistoryFileError(path, "the file is empty")
    try:
        document: object = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise HistoryFileError(path, f"not valid JSON (truncated or corrupt?): {exc}") from exc
    if isinstance(document, list):
        from harness.wire import load_messages

        try:
            messages = load_messages(cast("list[Any]", document))  # parsed once, not re-read
        except WireFormatError as exc:
            raise HistoryFileError(path, f"not a valid message history: {exc}") from exc
        return HistoryFile(path, "history", messages)
    if isinstance(document, dict) and "messages" in document:
        from harness.session import Session

        session = Session.load(path)
        return HistoryFile(path, "session", list(session.messages), session)
    shape = "a JSON object without a 'messages' key" if isinstance(document, dict) else "a JSON scalar"
    raise HistoryFileError(
        path, f"{shape}: expected a message history (a JSON array) or a session file (an object)"
    )


def load_history_file(path: Path) -> list[CanonicalMessage]:
    """The messages of a history or session file (see :func:`read_history_file`).

    Raises:
        HistoryFileError: The file is not a readable history.
        SessionLoadError: A session file is invalid.
    """
    return read_history_file(path).messages


def escaped(text: object) -> str:
    """``text`` with rich markup escaped, for user-supplied strings in rich output."""
    return escape(str(text))
