"""Checking a worker's system database before DBOS launches on it, so a bad one is one clear error.

DBOS itself retries, logs a traceback and raises SQLAlchemy's or its own errors; a worker
checks first, with a timeout, and reports :class:`~harness.errors.EngineConnectionError`
naming what to check.
"""

from __future__ import annotations

__all__ = ["check_system_database", "launch_quietly"]

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from harness.core import MaskedURL
from harness.errors import EngineConnectionError, HarnessError
from harness_dbos.config import system_database_url

if TYPE_CHECKING:
    from harness_dbos.engine import DBOSEngine

_ENGINE = "harness-dbos"
_POSTGRES = ("postgresql", "postgresql+psycopg", "postgresql+psycopg2")


def _fail(url: MaskedURL, reason: str) -> EngineConnectionError:
    return EngineConnectionError(_ENGINE, url, f"{url.redact(reason)}")


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def check_system_database(target: str | os.PathLike[str], *, timeout: float = 10.0) -> None:
    """Check that DBOS can keep its system database at ``target``.

    A ``sqlite:///`` file's folder must exist; a ``postgresql://`` server must answer
    within ``timeout`` seconds and accept the URL's credentials (the database itself may
    be missing: DBOS creates it). Any other scheme is refused.

    Raises:
        EngineConnectionError: It cannot; the message says what to check.
    """
    text = system_database_url(target)
    url = MaskedURL(text)
    scheme = text.partition("://")[0].lower()
    if scheme == "sqlite":
        folder = Path(text.partition(":///")[2] or ".").expanduser().parent
        if not folder.is_dir():
            raise _fail(url, f"the folder {folder} does not exist; create it or pass another sqlite:///FILE")
        return
    if scheme not in _POSTGRES:
        raise _fail(
            url,
            f"DBOS keeps its system database in PostgreSQL or SQLite, not {scheme!r}: pass "
            "--system-db postgresql://HOST/DATABASE or sqlite:///FILE",
        )
    if not urlsplit(text).path.strip("/"):
        raise _fail(url, "the URL names no database: add one, e.g. postgresql://HOST/dbos")
    import psycopg

    conninfo = "postgresql://" + text.partition("://")[2]
    try:
        psycopg.connect(conninfo, connect_timeout=max(1, round(timeout))).close()
    except psycopg.Error as exc:
        first = _first_line(exc)
        if "database" in first and "does not exist" in first:
            return  # DBOS creates it
        raise _fail(
            url,
            f"cannot connect to PostgreSQL ({first}); check that the server runs there and accepts "
            "connections, and the user, password (PGPASSWORD, ~/.pgpass) and database",
        ) from None


def launch_quietly(engine: DBOSEngine, target: str | os.PathLike[str]) -> None:
    """Launch ``engine``; a failure is one :class:`~harness.errors.EngineConnectionError`, not a traceback.

    DBOS logs a failed launch with its traceback before raising; that log is held back
    here (the error says what failed), and a harness error DBOS raised is raised as is.

    Raises:
        EngineConnectionError: DBOS could not launch on the system database.
    """
    logger = logging.getLogger("dbos")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        engine.launch()
    except HarnessError:
        raise
    except Exception as exc:
        url = MaskedURL(system_database_url(target))
        raise _fail(url, f"DBOS could not launch: {type(exc).__name__}: {_first_line(exc)}") from exc
    finally:
        logger.setLevel(level)
