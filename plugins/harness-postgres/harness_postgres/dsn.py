"""Connection strings: the ``schema`` option, what psycopg gets, and the URL shown with passwords masked.

A store is named by a libpq connection string in either form:

* a URL, ``postgresql://user:secret@host:5432/db?sslmode=require&schema=agents``
  (``postgres://`` too), where the extra ``schema`` query parameter names the PostgreSQL
  schema that holds the store's tables;
* key/value pairs, ``host=db user=app dbname=agents`` (the schema is then given with the
  ``schema`` argument of :class:`~harness_postgres.store.PostgresStore`).

:func:`parse_target` splits the ``schema`` option off (libpq would refuse it), checks it,
and builds the store's :attr:`~harness_postgres.store.PostgresStore.url`: always a
``postgresql://`` URL, with every credential masked by :class:`harness.core.MaskedURL`
(user info, ``password``, ``sslpassword`` and the other secret keywords,
case-insensitively) and the schema named when it is not the default. A connection string
psycopg cannot parse is refused with psycopg's reason, its quoted tokens masked: the
token it quotes can be the password itself, and a ``key=value`` string that does not parse
is not shown at all (where its secrets are cannot be known then).
"""

from __future__ import annotations

__all__ = ["DEFAULT_SCHEMA", "SCHEMES", "Target", "check_schema_name", "mask_password", "parse_target"]

import re
from collections.abc import Mapping
from urllib.parse import quote, unquote, urlencode, urlsplit

import attrs
import psycopg
from psycopg.conninfo import conninfo_to_dict

from harness.core import MaskedURL
from harness.errors import StoreResolutionError

DEFAULT_SCHEMA = "harness"
"""The PostgreSQL schema a store uses unless told otherwise."""

SCHEMES: frozenset[str] = frozenset({"postgresql", "postgres"})
"""URL schemes this distribution answers (``resolve_store``)."""

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_QUOTED = re.compile(r'"[^"]*"')
_UNPARSED = "(a key=value connection string libpq cannot parse, not shown: it may hold a password)"


@attrs.frozen
class Target:
    """Where a store connects, and how it names itself.

    Attributes:
        conninfo: The connection string handed to psycopg (``schema`` removed).
        schema: The PostgreSQL schema that holds the tables.
        url: The store's URL for messages: passwords masked, the schema named when it
            is not :data:`DEFAULT_SCHEMA`.
    """

    conninfo: str
    schema: str
    url: str


def check_schema_name(schema: str) -> str:
    """Return ``schema`` if it is a plain lower-case PostgreSQL identifier.

    Raises:
        ValueError: It is empty, longer than 63 characters, starts with ``pg_`` (reserved
            by PostgreSQL) or holds anything but ``a-z``, ``0-9`` and ``_`` (not starting
            with a digit).
    """
    if not _SCHEMA_NAME.fullmatch(schema) or schema.startswith("pg_"):
        raise ValueError(
            f"schema must be a lower-case PostgreSQL identifier (a-z, 0-9 and _, not starting with a digit "
            f"or pg_, at most 63 characters), got {schema!r}"
        )
    return schema


def _unsplit(scheme: str, netloc: str, path: str, query: str) -> str:
    """A URL that keeps ``//`` even with an empty host (``urlunsplit`` drops it)."""
    return f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "")


def _is_url(dsn: str) -> bool:
    head, sep, _ = dsn.partition("://")
    return bool(sep) and head.lower() in SCHEMES


def mask_password(dsn: str) -> str:
    """``dsn`` with every credential masked (see :class:`harness.core.MaskedURL`)."""
    return MaskedURL(dsn).masked


def _parse_failure(exc: psycopg.Error, secret: MaskedURL) -> str:
    """Psycopg's reason a string did not parse, with every quoted token and known secret masked."""
    return _QUOTED.sub('"***"', secret.redact(str(exc).strip()))


def parse_target(dsn: str, schema: str | None = None) -> Target:
    """Split ``dsn`` into what psycopg gets, the schema and the store's masked URL.

    Args:
        dsn: A ``postgresql://`` / ``postgres://`` URL (may carry ``?schema=name``) or a
            key/value connection string.
        schema: The schema to use; ``None``: the URL's ``schema`` parameter, else
            :data:`DEFAULT_SCHEMA`.

    Raises:
        StoreResolutionError: The connection string does not parse, or names a schema that
            differs from ``schema`` or is not a valid name.
        ValueError: ``schema`` is not a valid schema name.
    """
    if schema is not None:
        check_schema_name(schema)
    text = dsn.strip()
    secret = MaskedURL(text)
    shown = secret.masked
    from_url: str | None = None
    conninfo = text
    if _is_url(text):
        parts = urlsplit(text)
        items = [item for item in parts.query.split("&") if item]
        given = [unquote(item.partition("=")[2]) for item in items if item.partition("=")[0] == "schema"]
        if len(given) > 1:
            raise StoreResolutionError(shown, "the URL names the schema more than once")
        if given:
            from_url = given[0]
            try:
                check_schema_name(from_url)
            except ValueError as exc:
                raise StoreResolutionError(shown, str(exc)) from None
        rest = "&".join(item for item in items if item.partition("=")[0] != "schema")  # kept verbatim
        conninfo = _unsplit(parts.scheme, parts.netloc, parts.path, rest)
    if schema is not None and from_url is not None and schema != from_url:
        raise StoreResolutionError(
            shown, f"the URL names schema {from_url!r} but schema={schema!r} was given"
        )
    chosen = schema or from_url or DEFAULT_SCHEMA
    try:
        params = conninfo_to_dict(conninfo)
    except psycopg.Error as exc:
        if not _is_url(text):  # where its secrets are is unknown when libpq cannot parse it
            shown = _UNPARSED
        raise StoreResolutionError(
            shown, f"not a PostgreSQL connection string: {_parse_failure(exc, secret)}"
        ) from None
    return Target(conninfo=conninfo, schema=chosen, url=_display_url(params, chosen))


def _display_url(params: Mapping[str, object], schema: str) -> str:
    """A ``postgresql://`` URL for ``params`` (libpq's keywords), password masked."""
    values = {key: str(value) for key, value in params.items() if value is not None}
    user = values.pop("user", None)
    password = values.pop("password", None)
    host = values.pop("host", None)
    port = values.pop("port", None)
    dbname = values.pop("dbname", None)
    netloc = ""
    if host is not None and ("/" in host or "," in host or host.startswith("@")):
        values["host"] = host  # a socket folder or several hosts: keep it as a parameter
        host = None
    if host is not None:
        netloc = f"[{host}]" if ":" in host else quote(host, safe="")
        if port is not None:
            netloc += f":{port}"
            port = None
    if port is not None:
        values["port"] = port
    if user is not None:
        netloc = quote(user, safe="") + (":***" if password else "") + "@" + netloc
    elif password:
        values["password"] = "***"
    path = "/" + quote(dbname, safe="") if dbname is not None else ""
    if schema != DEFAULT_SCHEMA:
        values["schema"] = schema
    query = urlencode(sorted(values.items()), safe="*/", quote_via=quote)
    return MaskedURL(_unsplit("postgresql", netloc, path, query)).masked
