"""A search string as PostgreSQL text-search input: web-search syntax plus ``word*`` prefixes.

The query goes to ``websearch_to_tsquery`` (every word must appear; ``"a phrase"``,
``or`` and ``-word`` work as on a search engine), except the words that end in ``*``,
which become prefix matches (``'word':*``) joined to it with ``&``. Punctuation is never
an error: a query of nothing searchable matches nothing.
"""

from __future__ import annotations

__all__ = ["split_query"]

import re

_PREFIX = re.compile(r"(\w+)\*+")
_WORDLIKE = re.compile(r"\w")


def split_query(query: str) -> tuple[str, str] | None:
    """``(web-search text, prefix tsquery)`` for ``query``, or ``None`` when it has no word at all."""
    plain: list[str] = []
    prefixes: list[str] = []
    for token in query.split():
        match = _PREFIX.fullmatch(token)
        if match:
            prefixes.append("'" + match.group(1).replace("\\", "\\\\").replace("'", "''") + "':*")
        else:
            plain.append(token)
    if not prefixes and not _WORDLIKE.search(" ".join(plain)):
        return None
    return " ".join(plain), " & ".join(prefixes)
