"""Creating and migrating a store's schema: ``schema_migrations`` records each applied version.

Opening a store reads the version first and writes nothing when it is current. A schema
of a newer version is refused with :class:`~harness.errors.SessionStoreError` before
anything is written; so is a schema that holds tables but no ``schema_migrations`` table
(it belongs to something else). Otherwise the missing versions are applied in one
transaction (PostgreSQL's DDL is transactional: all of them or none), under an advisory
lock, so two processes opening a new store at the same moment migrate it once.
"""

from __future__ import annotations

__all__ = ["check_schema", "ensure_schema", "schema_version"]

from typing import Any

import psycopg

from harness.errors import SessionStoreError
from harness_postgres.statements import MIGRATIONS, SCHEMA_VERSION, compose

_MIGRATIONS_TABLE = """
CREATE TABLE {s}.schema_migrations (
    version integer PRIMARY KEY,
    description text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""

_INSPECT = (
    b"SELECT n.oid IS NOT NULL, "
    b"to_regclass(format('%%I.schema_migrations', %s::text)) IS NOT NULL, "
    b"(SELECT count(*) FROM pg_class c "
    b"WHERE c.relnamespace = n.oid AND c.relkind IN ('r', 'p', 'v', 'm', 'f')) "
    b"FROM (SELECT %s::text AS name) AS wanted LEFT JOIN pg_namespace n ON n.nspname = wanted.name"
)


def _inspect(conn: psycopg.Connection[Any], schema: str) -> tuple[bool, int | None, int]:
    """``(schema exists, version or None without a migrations table, relations in the schema)``."""
    row = conn.execute(_INSPECT, (schema, schema)).fetchone()
    assert row is not None
    exists, has_table, relations = bool(row[0]), bool(row[1]), int(row[2] or 0)
    if not has_table:
        return exists, None, relations
    found = conn.execute(
        compose("SELECT coalesce(max(version), 0) FROM {s}.schema_migrations", schema)
    ).fetchone()
    return exists, int(found[0]) if found is not None else 0, relations


def schema_version(conn: psycopg.Connection[Any], schema: str) -> int:
    """The version of the store in ``schema`` (0: none there yet)."""
    return _inspect(conn, schema)[1] or 0


def _refuse(url: str, schema: str, version: int | None, relations: int) -> None:
    if version is not None and version > SCHEMA_VERSION:
        raise SessionStoreError(
            url,
            f"schema {schema!r} holds a session store of version {version}, newer than this release of "
            f"harness-postgres reads ({SCHEMA_VERSION}); upgrade harness-postgres to use it",
        )
    if version is None and relations:
        raise SessionStoreError(
            url,
            f"schema {schema!r} holds {relations} tables but no schema_migrations table: it is not a harness "
            "session store; refusing to change it (choose another schema)",
        )


def check_schema(conn: psycopg.Connection[Any], schema: str, url: str) -> int:
    """Check, writing nothing, that ``schema`` holds a store of :data:`SCHEMA_VERSION` (a read-only open).

    Raises:
        SessionStoreError: The schema holds no harness store (nothing was created), one of
            another version (an older one is migrated by a writable open), or something else.
    """
    _, version, relations = _inspect(conn, schema)
    _refuse(url, schema, version, relations)
    if version is None or version == 0:
        raise SessionStoreError(
            url, f"no harness store here (schema {schema!r} has no session tables); nothing was created"
        )
    if version < SCHEMA_VERSION:
        raise SessionStoreError(
            url,
            f"schema {schema!r} holds a session store of version {version}, older than this release reads "
            f"({SCHEMA_VERSION}), and a read-only open migrates nothing; open it once for writing to migrate",
        )
    return version


def ensure_schema(conn: psycopg.Connection[Any], schema: str, url: str) -> int:
    """Bring the store in ``schema`` to :data:`SCHEMA_VERSION`; return the version it had.

    ``conn`` must be in autocommit mode and idle; on return it is idle again.

    Raises:
        SessionStoreError: The schema is newer or not a session store (nothing written).
        psycopg.Error: The server refused (no privilege to create the schema, ...); the
            transaction was rolled back.
    """
    _, version, relations = _inspect(conn, schema)
    _refuse(url, schema, version, relations)
    if version == SCHEMA_VERSION:
        return version
    conn.execute(b"BEGIN")
    try:
        conn.execute(
            b"SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"harness-postgres schema {schema}",)
        )
        exists, version, relations = _inspect(conn, schema)  # another process may have migrated meanwhile
        _refuse(url, schema, version, relations)
        if not exists:
            conn.execute(compose("CREATE SCHEMA {s}", schema))
        if version is None:
            conn.execute(compose(_MIGRATIONS_TABLE, schema))
            version = 0
        for target in range(version + 1, SCHEMA_VERSION + 1):
            description, script = MIGRATIONS[target]
            for statement in script.split(";"):
                if statement.strip():
                    conn.execute(compose(statement, schema))
            conn.execute(
                compose("INSERT INTO {s}.schema_migrations (version, description) VALUES (%s, %s)", schema),
                (target, description),
            )
        conn.execute(b"COMMIT")
    except BaseException:
        if not conn.closed:
            conn.execute(b"ROLLBACK")
        raise
    return version
