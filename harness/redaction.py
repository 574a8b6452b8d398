"""Credentials in URLs and connection strings: the one place they are masked.

Every store, engine, error, log record and span that names a store or a server shows it
through :class:`MaskedURL` (or :func:`mask_url`), so a password never leaves the user's
configuration. What counts as a credential:

* the user info of a URL in any scheme: ``scheme://user:secret@host`` shows as
  ``scheme://user:***@host``;
* the value of every libpq secret keyword (``password``, ``sslpassword``) and of the usual
  credential parameters (``token``, ``secret``, ``api_key``, ...), case-insensitively, as
  a URL query parameter or in a libpq ``key=value`` connection string (quoted values
  included).

:meth:`MaskedURL.stripped` removes the credentials instead of masking them (what a
durable engine journals), and :meth:`MaskedURL.redact` masks the secret values wherever
they appear in a text (a driver's error message can quote the offending token).

This module is the bottom layer: it imports nothing from harness, so
:mod:`harness.errors` masks the URLs its errors carry with it.
"""

from __future__ import annotations

__all__ = ["MASK", "SECRET_KEYWORDS", "MaskedURL", "mask_url", "redact"]

import re
from collections.abc import Iterable
from typing import Final
from urllib.parse import quote, unquote, urlsplit

MASK: Final = "***"
"""What a secret is shown as."""

SECRET_KEYWORDS: Final = frozenset(
    {
        "password",
        "sslpassword",
        "passwd",
        "pass",
        "pwd",
        "secret",
        "token",
        "access_token",
        "auth_token",
        "api_key",
        "apikey",
        "private_key",
        "client_secret",
    }
)
"""Parameter names whose values are credentials (compared case-insensitively)."""

_URL_START = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
_KEYWORD = "|".join(sorted((re.escape(k) for k in SECRET_KEYWORDS), key=len, reverse=True))
# libpq key=value form: the value is a single-quoted string with backslash escapes, or a bare word.
_CONNINFO_SECRET = re.compile(rf"(?i)(?<![\w.])({_KEYWORD})(\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s']*)")
# A URL embedded in a longer text (an error message quoting it).
_EMBEDDED_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>]+")


def _split_userinfo(netloc: str) -> tuple[str | None, str | None, str]:
    """``(user, password, hosts)`` of a URL's netloc (``None`` where absent)."""
    userinfo, at, hosts = netloc.rpartition("@")
    if not at:
        return None, None, netloc
    user, colon, password = userinfo.partition(":")
    return user, (password if colon else None), hosts


def _conninfo_value(raw: str) -> str:
    if raw.startswith("'") and raw.endswith("'") and len(raw) >= 2:
        return re.sub(r"\\(.)", r"\1", raw[1:-1])
    return raw


class MaskedURL:
    """A URL or connection string whose credentials never show.

    ``str()``, ``repr()`` and f-strings give the masked form; only :meth:`reveal` gives
    the text as it was configured, for the driver that connects with it.

    Args:
        url: A URL in any scheme (``postgresql://user:secret@host/db?sslpassword=x``) or a
            libpq ``key=value`` connection string. A :class:`MaskedURL` is taken as is.
    """

    __slots__ = ("_masked", "_raw", "_secrets", "_stripped")

    def __init__(self, url: str | MaskedURL) -> None:
        raw = url.reveal() if isinstance(url, MaskedURL) else url
        self._raw = raw
        masked, stripped, secrets = _analyse(raw)
        self._masked = masked
        self._stripped = stripped
        self._secrets = secrets

    @property
    def masked(self) -> str:
        """The text with every credential replaced by ``***``."""
        return self._masked

    @property
    def has_credentials(self) -> bool:
        """Whether the text carries a credential (a password, a token...)."""
        return bool(self._secrets)

    @property
    def secrets(self) -> tuple[str, ...]:
        """The credential values it carries, longest first (decoded and as written)."""
        return self._secrets

    def reveal(self) -> str:
        """The text as configured, credentials included: only for the driver that connects."""
        return self._raw

    def stripped(self) -> str:
        """The text with every credential removed (not masked): what may be journaled.

        The driver then takes the credentials from its own configuration (libpq's
        ``PGPASSWORD`` or ``.pgpass``, a worker's named store).
        """
        return self._stripped

    def redact(self, text: str) -> str:
        """``text`` with every secret value of this URL, and any URL in it, masked."""
        return redact(text, self._secrets)

    def __str__(self) -> str:
        return self._masked

    def __repr__(self) -> str:
        return f"MaskedURL({self._masked!r})"

    def __format__(self, spec: str) -> str:
        return format(self._masked, spec)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MaskedURL) and other._raw == self._raw

    def __hash__(self) -> int:
        return hash(("MaskedURL", self._raw))

    def __reduce__(self) -> tuple[object, ...]:
        # Pickling keeps the masked text only: a credential never crosses a process boundary this way.
        return (MaskedURL, (self._masked,))


def _analyse(raw: str) -> tuple[str, str, tuple[str, ...]]:
    """``(masked, stripped, secrets)`` of a URL or a ``key=value`` connection string."""
    secrets: set[str] = set()
    if _URL_START.match(raw):
        parts = urlsplit(raw)
        user, password, hosts = _split_userinfo(parts.netloc)
        masked_netloc = stripped_netloc = parts.netloc
        if password is not None:
            if password:
                secrets.update({password, unquote(password)})
            masked_netloc = f"{user}:{MASK}@{hosts}"
            stripped_netloc = f"{user}@{hosts}" if user else hosts
        masked_query_items: list[str] = []
        stripped_query_items: list[str] = []
        for item in re.split(r"([&;])", parts.query) if parts.query else []:
            if item in ("&", ";"):
                continue
            key, eq, value = item.partition("=")
            if eq and unquote(key).lower() in SECRET_KEYWORDS:
                if value:
                    secrets.update({value, unquote(value)})
                masked_query_items.append(f"{key}={MASK}")
                continue
            masked_query_items.append(item)
            stripped_query_items.append(item)
        head = f"{parts.scheme}://"
        tail = parts.path
        fragment = f"#{parts.fragment}" if parts.fragment else ""
        masked = head + masked_netloc + tail + (f"?{'&'.join(masked_query_items)}" if parts.query else "")
        stripped = head + stripped_netloc + tail
        if stripped_query_items:
            stripped += "?" + "&".join(stripped_query_items)
        return masked + fragment, stripped + fragment, _ordered(secrets)

    def mask(match: re.Match[str]) -> str:
        value = match.group(3)
        if value:
            secrets.update({value, _conninfo_value(value)})
        return f"{match.group(1)}{match.group(2)}{MASK}"

    masked = _CONNINFO_SECRET.sub(mask, raw)
    stripped = re.sub(r"\s{2,}", " ", _CONNINFO_SECRET.sub("", raw)).strip()
    return masked, stripped, _ordered(secrets)


def _ordered(secrets: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted({s for s in secrets if s and s != MASK}, key=len, reverse=True))


def mask_url(text: str | MaskedURL) -> str:
    """The masked form of a URL or connection string (see :class:`MaskedURL`)."""
    return text.masked if isinstance(text, MaskedURL) else MaskedURL(text).masked


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with each of ``secrets`` and the credentials of any URL it quotes masked.

    Args:
        text: Any text: an error message, a log line.
        secrets: Values to mask wherever they occur (their percent-encoded form too).
    """
    values = set(secrets)
    for value in list(values):
        values.add(quote(value, safe=""))
    for value in sorted((v for v in values if v and v != MASK), key=len, reverse=True):
        text = text.replace(value, MASK)
    text = _EMBEDDED_URL.sub(lambda match: mask_url(match.group(0)), text)
    return _CONNINFO_SECRET.sub(lambda match: f"{match.group(1)}{match.group(2)}{MASK}", text)
