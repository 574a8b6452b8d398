"""The DBOS configuration of a harness-dbos process: system database, serializer, version."""

from __future__ import annotations

__all__ = ["dbos_config", "system_database_url"]

import os
from pathlib import Path

from dbos import DBOSConfig

from harness_dbos.serializer import JournalSerializer
from harness_dbos.workflow import APP_NAME, APP_VERSION


def system_database_url(target: str | os.PathLike[str]) -> str:
    """A DBOS system database URL: ``sqlite:///...`` and ``postgresql://...`` as given, a path as SQLite.

    ``postgres://`` is spelled ``postgresql://`` (what SQLAlchemy accepts).
    """
    text = os.fspath(target)
    if text.startswith("postgres://"):
        return "postgresql://" + text[len("postgres://") :]
    if "://" in text:
        return text
    return f"sqlite:///{Path(text).expanduser().resolve()}"


def dbos_config(
    system_database: str | os.PathLike[str],
    *,
    executor_id: str | None = None,
    application_version: str = APP_VERSION,
    log_level: str = "WARNING",
) -> DBOSConfig:
    """The configuration every harness-dbos process uses (workers and in-process engines).

    Args:
        system_database: The system database: a ``sqlite:///`` or ``postgresql://`` URL, or
            a path (an SQLite file).
        executor_id: This process's executor id. DBOS recovers, on launch, the pending
            workflows of its own executor id: restart a dead worker with the same id (or
            adopt its id, ``worker --adopt``). ``None``: DBOS's default, ``"local"``.
        application_version: The DBOS application version (see
            :data:`~harness_dbos.workflow.APP_VERSION`; keep the default unless you
            route runs to workers by version yourself).
        log_level: DBOS's log level.
    """
    config: DBOSConfig = {
        "name": APP_NAME,
        "system_database_url": system_database_url(system_database),
        "serializer": JournalSerializer(),
        "application_version": application_version,
        "log_level": log_level,
        "notification_listener_polling_interval_sec": 0.1,
    }
    if executor_id is not None:
        config["executor_id"] = executor_id
    return config
