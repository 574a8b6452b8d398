"""``harness -v`` / ``-q``: where the library's log records go when the command line runs.

The library only logs (one logger per package: ``harness.run``, ``harness.hooks``,
``harness.session``, ``harness.models``...) and installs no handler. The command line is an
application, so it installs one handler on the ``harness`` logger, writing to stderr:
warnings and errors by default, errors only with ``-q``, information with ``-v`` (run
starts and ends, compactions, pauses, retries) and everything with ``-vv`` (every request,
tool call and checkpoint).
"""

from __future__ import annotations

__all__ = ["LOGGER_NAME", "configure_logging", "level_for"]

import logging
import sys
from typing import Final, TextIO

LOGGER_NAME: Final = "harness"
_HANDLER_NAME: Final = "harness-cli"


class _StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever ``sys.stderr`` is when a record arrives (a test runner swaps it)."""

    def emit(self, record: logging.LogRecord) -> None:
        """Write ``record`` to the current ``sys.stderr``."""
        self.stream = sys.stderr
        super().emit(record)


def level_for(verbose: int, quiet: bool) -> int:
    """The level ``-v`` repeated ``verbose`` times, or ``-q``, selects."""
    if quiet:
        return logging.ERROR
    return {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)


def configure_logging(verbose: int, quiet: bool) -> logging.Handler:
    """Route the ``harness`` loggers to stderr at the selected level (replacing an earlier CLI handler)."""
    logger = logging.getLogger(LOGGER_NAME)
    for handler in list(logger.handlers):
        if handler.get_name() == _HANDLER_NAME:
            logger.removeHandler(handler)
    handler = _StderrHandler()
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    level = level_for(verbose, quiet)
    handler.setLevel(level)
    logger.addHandler(handler)
    logger.setLevel(level)
    return handler
