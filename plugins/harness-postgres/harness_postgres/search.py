"""A parsed search query as a PostgreSQL ``tsquery`` (the grammar: :mod:`harness.session.query`).

The store indexes :func:`harness.session.query.index_text` of each message (its words
joined by spaces), so PostgreSQL's parser cuts exactly the words the grammar names. A
word is a quoted lexeme, a phrase joins its words with ``<->``, a prefix is ``:*``,
OR-ed terms are parenthesised with ``|``, groups are joined with ``&`` and each
exclusion is ``& !(...)``. Words are letters and digits only, so no query text is ever
``tsquery`` syntax.
"""

from __future__ import annotations

__all__ = ["tsquery"]

from harness.session import SearchQuery, SearchTerm


def _term(term: SearchTerm) -> str:
    lexemes = [f"'{w}'" for w in term.words]
    if term.prefix:
        lexemes[-1] += ":*"
    return "(" + " <-> ".join(lexemes) + ")"


def tsquery(query: SearchQuery) -> str:
    """The ``to_tsquery`` text of a non-empty ``query``."""
    parts = ["(" + " | ".join(_term(t) for t in group) + ")" for group in query.groups]
    parts.extend("!" + _term(t) for t in query.excluded)
    return " & ".join(parts)
