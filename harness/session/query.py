"""The search grammar every session store answers the same way, and its word rules.

A query is split on white space into **terms**:

* ``word``: a log message matches when it holds the word (case and accents ignored);
* ``word*``: any word that starts with ``word``;
* ``"two words"``: a phrase, the words next to each other in this order (``"two wo*"``: the
  last one a prefix); a bare term of several words, such as ``notes.txt`` or ``call_a``, is
  the phrase of its words;
* ``-term``: the message must *not* match the term (a word, prefix or phrase);
* ``a or b``: either term (``or`` in any case, bare, between two terms that are not
  exclusions).

Terms are ANDed, and ``or`` binds tighter than AND: ``zebra quokka or marmot`` is
``zebra AND (quokka OR marmot)``. A query with no positive term (empty, only punctuation,
only ``-term`` s) matches nothing; an ``or`` with no term on one side is ignored, and so is
one next to an exclusion. An unmatched ``"`` runs to the end of the query.

**Words** are the runs of letters and digits of a text (``_`` and punctuation separate
them) after case folding and removing accents (``Café`` is ``cafe``):
:func:`text_words`. Stores index these words (SQLite's FTS5 ``unicode61`` tokenizer cuts
the same words; the PostgreSQL store indexes :func:`index_text`; the ``file:`` store
compares them directly), so every store gives the same set of hits. Only the order, best
first, is each store's own ranking.

``limit`` must be an integer >= 1: :func:`check_limit` raises
:class:`~harness.errors.SearchQueryError` otherwise.
"""

from __future__ import annotations

__all__ = ["SearchQuery", "SearchTerm", "check_limit", "index_text", "parse_query", "text_words"]

import re
import unicodedata
from collections.abc import Sequence

import attrs

from harness.errors import SearchQueryError

_WORD = re.compile(r"[^\W_]+")
_TOKEN = re.compile(r'(-?)"([^"]*)"?(\*?)|(\S+)')


def _fold(text: str) -> str:
    """Lower-cased, accents removed (NFD, combining marks dropped)."""
    decomposed = unicodedata.normalize("NFD", text.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def text_words(text: str) -> list[str]:
    """The words of ``text`` as search compares them (see the module docstring)."""
    return _WORD.findall(_fold(text))


def index_text(text: str) -> str:
    """``text`` as its words joined by spaces: what a store hands its full-text index."""
    return " ".join(text_words(text))


@attrs.frozen
class SearchTerm:
    """One term: its words in order, the last one a prefix when ``prefix``."""

    words: tuple[str, ...]
    prefix: bool = False

    def matches(self, words: Sequence[str]) -> bool:
        """Whether the words of a text contain this term."""
        n = len(self.words)
        head, last = self.words[:-1], self.words[-1]
        for at in range(len(words) - n + 1):
            if tuple(words[at : at + n - 1]) != head:
                continue
            word = words[at + n - 1]
            if word == last or (self.prefix and word.startswith(last)):
                return True
        return False


@attrs.frozen
class SearchQuery:
    """A parsed query: every group (an OR of terms) must match, no exclusion may.

    Attributes:
        groups: The positive terms, one tuple per AND-ed group of OR-ed terms.
        excluded: The terms a hit must not match.
    """

    groups: tuple[tuple[SearchTerm, ...], ...] = ()
    excluded: tuple[SearchTerm, ...] = ()

    @property
    def empty(self) -> bool:
        """No positive term: the query matches nothing."""
        return not self.groups

    def matches(self, words: Sequence[str]) -> bool:
        """Whether a text with these :func:`text_words` is a hit."""
        if self.empty:
            return False
        if not all(any(t.matches(words) for t in group) for group in self.groups):
            return False
        return not any(t.matches(words) for t in self.excluded)

    def positive_words(self) -> list[str]:
        """Every word of the positive terms, in query order (what a snippet centres on)."""
        return [w for group in self.groups for term in group for w in term.words]


def parse_query(query: str) -> SearchQuery:
    """Parse ``query`` by the grammar of the module docstring (never raises on odd text)."""
    items: list[tuple[str, SearchTerm | None]] = []  # ("+"/"-", term) or ("or", None)
    for match in _TOKEN.finditer(query):
        negated, phrase, star, bare = match.groups()
        if bare is not None:
            if bare.casefold() == "or":
                items.append(("or", None))
                continue
            negated = "-" if bare.startswith("-") and len(bare) > 1 else ""
            text = bare[1:] if negated else bare
            star = "*" if text.endswith("*") else ""
            phrase = text.rstrip("*")
        elif phrase.rstrip().endswith("*"):
            star = "*"
        words = tuple(text_words(phrase))
        if words:
            items.append(("-" if negated else "+", SearchTerm(words, prefix=bool(star))))
    groups: list[list[SearchTerm]] = []
    excluded: list[SearchTerm] = []
    joining = False
    for index, (kind, term) in enumerate(items):
        if kind == "or":
            previous = items[index - 1][0] if index else ""
            joining = previous == "+" and bool(groups)
            continue
        assert term is not None
        if kind == "-":
            excluded.append(term)
        elif joining:
            groups[-1].append(term)
        else:
            groups.append([term])
        joining = False
    return SearchQuery(tuple(tuple(g) for g in groups), tuple(excluded))


def check_limit(store: str, limit: object) -> int:
    """``limit`` when it is an integer >= 1.

    Raises:
        SearchQueryError: Anything else (``0``, ``-1``, ``None``, ``True``, ``2.5``).
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise SearchQueryError(store, f"search limit must be an integer >= 1, got {limit!r}")
    return limit
