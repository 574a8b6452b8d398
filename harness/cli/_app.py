"""The ``harness`` click group, its entry point and the helpers every command shares."""

from __future__ import annotations

__all__ = ["cli", "console", "main"]

import sys
import warnings
from typing import Any

import click
from rich.console import Console

from harness.errors import HarnessError, HarnessExperimentalWarning


def console() -> Console:
    """A console that does not squeeze tables when the output is not a terminal."""
    return Console() if sys.stdout.isatty() else Console(width=200, soft_wrap=True)


@click.group()
@click.version_option(package_name="harness-loop")
def cli() -> None:
    """harness: a minimal agent loop with pluggy hooks and context-window capabilities."""
    # Running the CLI is the opt-in: the capability plugins it loads are all experimental,
    # and one warning per plugin would bury the output (the README says they are).
    warnings.filterwarnings("ignore", category=HarnessExperimentalWarning)


def main(argv: list[str] | None = None) -> Any:
    """Entry point of the ``harness`` command; harness errors print as one clear line."""
    try:
        return cli.main(args=argv, prog_name="harness", standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.Abort:
        sys.exit(130)
    except HarnessError as exc:
        console().print(f"[red]error:[/red] {type(exc).__name__}: {exc}")
        sys.exit(2)
