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
from typing import Final

LOGGER_NAME: Final = "harness"
_HANDLER_NAME: Final = "harness-cli"


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
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    level = level_for(verbose, quiet)
    handler.setLevel(level)
    logger.addHandler(handler)
    logger.setLevel(level)
    return handler
