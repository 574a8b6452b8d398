"""harness-postgres: a PostgreSQL session store (psycopg 3) for many processes and machines.

``harness.open_store("postgresql://user@host/db")`` opens a :class:`PostgresStore` once
this distribution is installed (its ``resolve_store`` hook answers ``postgresql://`` and
``postgres://``). Experimental: importing this package emits
:class:`harness.HarnessExperimentalWarning` once per process.
"""

from harness import warn_experimental
from harness_postgres.dsn import DEFAULT_SCHEMA, check_schema_name, mask_password
from harness_postgres.statements import SCHEMA_VERSION, TEXT_SEARCH_CONFIG
from harness_postgres.store import INDEXED_TEXT_LIMIT, PostgresStore

warn_experimental("harness_postgres")

__all__ = [
    "DEFAULT_SCHEMA",
    "INDEXED_TEXT_LIMIT",
    "SCHEMA_VERSION",
    "TEXT_SEARCH_CONFIG",
    "PostgresStore",
    "check_schema_name",
    "mask_password",
]
