"""The ``harness`` click group, its entry point and the helpers every command shares.

Shared helpers for command modules:

* :func:`console` / :func:`error_console`: rich consoles for stdout and stderr;
  :func:`escaped` for user text inside rich markup.
* :func:`stack_option`: the ``--stack`` / ``--config`` / ``--stack-name`` options, and
  :func:`resolve_cli_stack` to turn their values into capabilities.
* :func:`load_history_file` / :func:`read_history_file`: read a history file (the wire
  format, a pydantic-ai dump, OpenAI or Anthropic messages, a Claude Code transcript, or
  a ``harness.session`` file; JSON or JSON Lines, plain or compressed, ``-`` for standard
  input), with a clear error; :func:`history_format_option` adds ``--format`` and
  :data:`HISTORY_PATH` is the argument type.

Exit codes (:data:`EXIT_OK`, :data:`EXIT_PROBLEM`, :data:`EXIT_USAGE`,
:data:`EXIT_OVER_WINDOW`, :data:`EXIT_INTERRUPTED`): 0 success; 1 the command ran and
found a problem a script cares about; 2 a usage or input error (bad option, unreadable or
malformed file, bad stack string, any :class:`~harness.errors.HarnessError`); 3 ``compact``
succeeded but the result is still over ``--window``; 130 interrupted.
"""

from __future__ import annotations

from harness.errors import HistoryFileError

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_OVER_WINDOW",
    "EXIT_PROBLEM",
    "EXIT_USAGE",
    "HISTORY_PATH",
    "PIPE_WIDTH",
    "HarnessCliError",
    "HistoryFile",
    "cli",
    "console",
    "error_console",
    "escaped",
    "history_format_option",
    "load_history_file",
    "main",
    "one_line",
    "read_history_file",
    "resolve_cli_stack",
    "stack_option",
]

import contextlib
import os
import sys
import warnings
from collections.abc import Callable, Generator, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, Literal, TextIO, TypeVar

import attrs
import click
from rich.console import Console, ConsoleRenderable, RichCast
from rich.markup import escape
from rich.measure import Measurement

from harness.core.messages import CanonicalMessage
from harness.errors import HarnessError, HarnessExperimentalWarning, WireFormatError

if TYPE_CHECKING:
    from harness.capabilities.base import Capability
    from harness.config import StackEntry
    from harness.session import Session
    from harness.wire import FormatChoice, HistoryFormat

EXIT_OK: Final = 0
"""The command succeeded."""
EXIT_PROBLEM: Final = 1
"""The command ran but found a problem (e.g. ``inspect`` found invariant violations)."""
EXIT_USAGE: Final = 2
"""A usage or input error: bad option, bad file, bad stack string, any harness error."""
EXIT_OVER_WINDOW: Final = 3
"""``compact`` wrote (or, with ``--dry-run``, would write) a result still over ``--window``."""
EXIT_INTERRUPTED: Final = 130
"""Interrupted (Ctrl-C)."""

_F = TypeVar("_F", bound=Callable[..., Any])


PIPE_WIDTH: Final = 80
"""Columns a table of a pipe or a file is laid out in when its content fits them."""

_MEASURE_LIMIT: Final = 100_000


class _PipeConsole(Console):
    """Output to a pipe or a file: lines of text unwrapped, tables as wide as their content.

    A line of text stays one line (``grep`` finds it whole). Without ``$COLUMNS`` a table
    is as wide as its content, so no cell is cut; with it, a table is squeezed into
    ``$COLUMNS`` as far as its longest words allow.
    """

    def __init__(self, *, stderr: bool, columns: int | None) -> None:
        super().__init__(stderr=stderr, width=columns or PIPE_WIDTH, soft_wrap=True)
        self._columns = columns

    def print(self, *objects: Any, **kwargs: Any) -> None:
        """Print ``objects`` as :meth:`rich.console.Console.print` does, as wide as they need."""
        base = self._columns or PIPE_WIDTH
        needed = base
        unbounded = self.options.update_width(_MEASURE_LIMIT)
        for item in objects:
            if isinstance(item, ConsoleRenderable | RichCast):  # text is not wrapped anyway
                measured = Measurement.get(self, unbounded, item)
                needed = max(needed, measured.maximum if self._columns is None else measured.minimum)
        self.width = needed
        try:
            super().print(*objects, **kwargs)
        finally:
            self.width = base


def _columns() -> int | None:
    columns = os.environ.get("COLUMNS", "").strip()
    return int(columns) if columns.isdigit() and int(columns) > 0 else None


def _console(*, stderr: bool, force_terminal: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty() or force_terminal:
        return Console(stderr=stderr, force_terminal=force_terminal or None)  # rich reads $COLUMNS
    return _PipeConsole(stderr=stderr, columns=_columns())


def console() -> Console:
    """A stdout console: ``$COLUMNS`` wide, else the terminal's width.

    In a pipe or a file, lines of text are not wrapped; a table is squeezed into
    ``$COLUMNS`` when it is set (as far as its longest words allow), else it is as wide as
    its content (at most the longest cell plus the others), never padded out.
    """
    return _console(stderr=False)


def error_console(*, force_terminal: bool = False) -> Console:
    """A stderr console, for progress, warnings and errors; as wide as :func:`console`.

    Args:
        force_terminal: Draw live displays (a progress bar) even when stderr is not a terminal.
    """
    return _console(stderr=True, force_terminal=force_terminal)


class HarnessCliError(click.ClickException):
    """A :class:`~harness.errors.HarnessError` reported by a command: exit code 2, one line on stderr."""

    exit_code = EXIT_USAGE

    def __init__(self, error: HarnessError) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error

    def show(self, file: IO[Any] | None = None) -> None:
        """Print ``error: <type>: <message>`` to stderr (or ``file``), on one line."""
        click.echo(f"error: {one_line(self.format_message())}", file=file or sys.stderr)


def one_line(text: str) -> str:
    """``text`` on one line: its non-blank lines stripped and joined with ``"; "``."""
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


_GLOBAL_MARK: Final = "_harness_global_options"


def _late_global_option(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    """``-v`` / ``-q`` given after a subcommand: applied as if given before it."""
    if not value:
        return
    root = ctx.find_root()
    verbose, quiet = root.meta.get(_GLOBAL_MARK, (0, False))
    if param.name == "late_verbose":
        verbose += int(value)
    else:
        quiet = True
    root.meta[_GLOBAL_MARK] = (verbose, quiet)
    from harness.cli.logs import configure_logging

    configure_logging(verbose, quiet)


def _accept_global_options(command: click.Command) -> None:
    """Let ``command`` (and a group's subcommands) take ``-v`` / ``-q`` too, where it has no such option."""
    if getattr(command, _GLOBAL_MARK, False):
        return
    setattr(command, _GLOBAL_MARK, True)
    taken = {name for param in command.params for name in getattr(param, "opts", ())}
    if command.context_settings.get("ignore_unknown_options"):  # its arguments are another command's
        return
    if not taken & {"-v", "--verbose"}:
        command.params.append(
            click.Option(
                ["-v", "--verbose", "late_verbose"],
                count=True,
                hidden=True,
                expose_value=False,
                callback=_late_global_option,
            )
        )
    if not taken & {"-q", "--quiet"}:
        command.params.append(
            click.Option(
                ["-q", "--quiet", "late_quiet"],
                is_flag=True,
                hidden=True,
                expose_value=False,
                callback=_late_global_option,
            )
        )
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _accept_global_options(sub)


class _HarnessGroup(click.Group):
    """A group whose commands report harness errors as :class:`HarnessCliError` (exit 2).

    Its commands accept the global ``-v`` / ``-q`` after their name too (``harness run -v ...``).
    """

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None:
            _accept_global_options(command)
        return name, command, rest

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
@click.option(
    "-v",
    "--verbose",
    count=True,
    help="Log more to stderr: -v runs, compactions and retries; -vv every request and tool call.",
)
@click.option("-q", "--quiet", is_flag=True, help="Log errors only.")
def cli(verbose: int, quiet: bool) -> None:
    """harness: a minimal agent loop with pluggy hooks and context-window capabilities.

    Exit codes: 0 ok, 1 the command found a problem (e.g. invariant violations),
    2 usage or input error, 3 over --window (compact), 4 the session changed
    meanwhile (compact --session), 130 interrupted.
    """
    from harness.cli.logs import configure_logging

    click.get_current_context().meta[_GLOBAL_MARK] = (verbose, quiet)
    configure_logging(verbose, quiet)
    # Running the CLI is the opt-in: the capability plugins it loads are all experimental,
    # and one warning per plugin would bury the output (the README says they are).
    warnings.filterwarnings("ignore", category=HarnessExperimentalWarning)


@contextlib.contextmanager
def _warnings_as_lines() -> Generator[None]:
    """Print each Python warning once, as ``warning: <message>`` on stderr, without its source line.

    Installed by :func:`main` only: the library never changes how warnings are shown.
    """
    shown: set[str] = set()
    previous = warnings.showwarning

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        text = " ".join(str(message).split())
        if text not in shown:
            shown.add(text)
            click.echo(f"warning: {text}", err=True)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = previous


def main(argv: list[str] | None = None) -> Any:
    """Entry point of the ``harness`` command; errors print as one clear line on stderr.

    Returns:
        The command's exit code when it asked for one (the console script passes it to
        ``sys.exit``).
    """
    args = sys.argv[1:] if argv is None else argv
    try:
        with _warnings_as_lines():
            return cli.main(args=args, prog_name="harness", standalone_mode=False)
    except HarnessCliError as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        _show_click_error(exc, verbose=_asks_verbose(args))
        sys.exit(exc.exit_code)
    except (click.Abort, KeyboardInterrupt):
        click.echo("interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except HarnessError as exc:  # raised outside a command (e.g. while parsing)
        HarnessCliError(exc).show()
        sys.exit(EXIT_USAGE)


def _asks_verbose(args: list[str]) -> bool:
    """Whether the command line asks for ``-v`` (anywhere before ``--``), read without click."""
    for arg in args:
        if arg == "--":
            return False
        if arg == "--verbose" or (arg.startswith("-v") and set(arg[1:]) == {"v"}):
            return True
    return False


def _show_click_error(exc: click.ClickException, *, verbose: bool) -> None:
    """``error: <type>: <message>`` on one line; with ``-v``, a usage error's usage and help hint follow."""
    click.echo(f"error: {type(exc).__name__}: {one_line(exc.format_message())}", err=True)
    if verbose and isinstance(exc, click.UsageError) and exc.ctx is not None:
        click.echo(exc.ctx.get_usage(), err=True)
        names = exc.ctx.help_option_names
        if names:
            click.echo(f"Try '{exc.ctx.command_path} {names[0]}' for help.", err=True)


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


HISTORY_PATH: Final = click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path)
"""The click type of a history-file argument: an existing file, or ``-`` for standard input."""


def history_format_option(function: _F) -> _F:
    """Add ``--format`` (how to read the history file) to a command.

    The command receives ``history_format``; pass it to :func:`read_history_file`.
    """
    from harness.wire import FORMAT_CHOICES

    return click.option(
        "--format",
        "history_format",
        type=click.Choice(FORMAT_CHOICES),
        default="auto",
        show_default=True,
        help=(
            "How to read the history: detect it (auto), or pydantic-ai (harness's wire format), "
            "openai (Chat Completions messages) or anthropic (Messages API messages, Claude Code "
            "transcripts). JSON Lines, gzip and - (standard input) are read in every format."
        ),
    )(function)


@attrs.frozen
class HistoryFile:
    """A history read by :func:`read_history_file`.

    Attributes:
        path: The file (``-`` for standard input).
        kind: ``"history"`` (a message history in any accepted format) or ``"session"``
            (a ``harness.session`` file).
        messages: The messages.
        session: The session, for a session file.
        format: The format the messages were read in: ``"pydantic-ai"`` (harness's wire
            format, which session files use too), ``"openai"`` or ``"anthropic"``.
        skipped: Transcript records holding no message, counted by type (see
            :class:`harness.wire.LoadedHistory`).
        json_lines: Whether the file is JSON Lines.
        compression: ``"gzip"``, ``"bzip2"`` or ``"xz"`` when the file is compressed.
    """

    path: Path
    kind: Literal["history", "session"]
    messages: list[CanonicalMessage]
    session: Session | None = None
    format: HistoryFormat = "pydantic-ai"
    skipped: Mapping[str, int] = attrs.field(factory=dict[str, int])
    json_lines: bool = False
    compression: str | None = None

    @property
    def from_stdin(self) -> bool:
        """Whether the history was read from standard input."""
        return str(self.path) == "-"

    @property
    def rewritable(self) -> bool:
        """Whether writing the result in harness's own format over the file keeps its format."""
        plain = not (self.from_stdin or self.json_lines or self.compression)
        return plain and self.format == "pydantic-ai"

    @property
    def described(self) -> str:
        """The format in words, e.g. ``"anthropic messages, JSON Lines, gzip"``."""
        if self.kind == "session":
            return "harness session"
        words = [f"{self.format} messages"]
        if self.json_lines:
            words.append("JSON Lines")
        if self.compression:
            words.append(self.compression)
        return ", ".join(words)


def _is_session(document: object) -> bool:
    return (
        isinstance(document, dict)
        and "messages" in document
        and ("version" in document or "session_id" in document)
    )


def read_history_file(path: Path, *, format: FormatChoice = "auto") -> HistoryFile:
    """Read a history file, detecting its format unless ``format`` is given.

    The file (``-``: standard input) may be gzip-, bzip2- or xz-compressed, JSON or JSON
    Lines. An object with ``messages`` and a ``version`` or ``session_id`` is a session
    file (``harness.session``); anything else is read by :func:`harness.wire.read_history`:
    the wire format (pydantic-ai's message JSON), OpenAI Chat Completions messages,
    Anthropic Messages API messages or Claude Code transcripts.

    Raises:
        HistoryFileError: The file cannot be read, is empty, is not JSON or JSON Lines, or
            is not a history in the format (naming the format, message, line, part and field).
        SessionLoadError: A session file is invalid (it names the file).
    """
    from harness.wire import history_from_document, parse_document

    stdin = str(path) == "-"
    try:
        raw = sys.stdin.buffer.read() if stdin else path.read_bytes()
    except IsADirectoryError:
        raise HistoryFileError(path, "is a folder, not a history file") from None
    except OSError as exc:
        raise HistoryFileError(path, f"cannot read the file: {exc.strerror or exc}") from exc
    if not raw.strip():
        raise HistoryFileError(path, "standard input is empty" if stdin else "the file is empty")
    try:
        document = parse_document(raw, "<stdin>" if stdin else str(path))
    except WireFormatError as exc:
        raise HistoryFileError(path, str(exc)) from exc
    if _is_session(document.value) and format in ("auto", "pydantic-ai"):
        if stdin or document.compression:
            raise HistoryFileError(
                path,
                "a harness session file is read from its own file, not standard input or compressed data",
            )
        from harness.session import Session

        session = Session.load(path)
        return HistoryFile(path, "session", list(session.messages), session)
    try:
        loaded = history_from_document(document, format=format)
    except WireFormatError as exc:
        raise HistoryFileError(path, f"not a valid message history: {exc}") from exc
    return HistoryFile(
        path,
        "history",
        loaded.messages,
        format=loaded.format,
        skipped=loaded.skipped,
        json_lines=loaded.json_lines,
        compression=loaded.compression,
    )


def load_history_file(path: Path, *, format: FormatChoice = "auto") -> list[CanonicalMessage]:
    """The messages of a history or session file (see :func:`read_history_file`).

    Raises:
        HistoryFileError: The file is not a readable history.
        SessionLoadError: A session file is invalid.
    """
    return read_history_file(path, format=format).messages


def escaped(text: object) -> str:
    """``text`` with rich markup escaped, for user-supplied strings in rich output."""
    return escape(str(text))
