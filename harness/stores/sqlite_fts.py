"""A parsed search query as an FTS5 ``MATCH`` expression (the grammar: :mod:`harness.session.query`).

Every word is an FTS5 string (``"word"``), so no character of a query is ever FTS5 syntax;
a phrase is one string of its words, a prefix puts ``*`` after it, OR-ed terms are
parenthesised with ``OR``, the groups are AND-ed, and the exclusions follow one ``NOT``.
"""

from __future__ import annotations

__all__ = ["fts_query"]

from harness.session.query import SearchQuery, SearchTerm


def _term(term: SearchTerm) -> str:
    return '"' + " ".join(term.words) + '"' + ("*" if term.prefix else "")


def fts_query(query: SearchQuery) -> str:
    """The ``MATCH`` expression of a non-empty ``query``."""
    positive = " AND ".join("(" + " OR ".join(_term(t) for t in group) + ")" for group in query.groups)
    if not query.excluded:
        return positive
    return f"({positive}) NOT (" + " OR ".join(_term(t) for t in query.excluded) + ")"
