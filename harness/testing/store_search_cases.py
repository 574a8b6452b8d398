"""The conformance cases about search: one grammar (:mod:`harness.session.query`), the same hits."""

from __future__ import annotations

__all__ = ["SearchCases"]

import pytest

from harness.core.messages import CanonicalMessage, TextPart, UserPromptPart
from harness.errors import SearchQueryError
from harness.session import SessionStore
from harness.testing.store_kit import ConformanceBase, StoreFactory, new_session, sample_messages


class SearchCases(ConformanceBase):
    """Every store answers each query of the grammar with the same set of hits."""

    def test_search_grammar_gives_the_same_hits_on_every_store(self, make_store: StoreFactory) -> None:
        """AND, ``-term``, ``or``, phrases, prefixes, folded case and accents, odd input."""
        store = make_store()
        ids: dict[str, str] = {}
        for tag in ("alpha", "beta", "gamma"):
            session = new_session(store, sample_messages(tag), session_id=f"s-{tag}")
            session.checkpoint()
            ids[tag] = session.session_id
        extra = new_session(
            store,
            [
                CanonicalMessage.request(UserPromptPart(content="Un Café crème, the zebra's favourite")),
                CanonicalMessage.response(TextPart(content="snake_case and dotted.name words")),
            ],
            session_id="s-extra",
        )
        extra.checkpoint()
        reader = make_store(same=True)

        def hits(query: str, session_id: str | None = None) -> set[tuple[str, int]]:
            return {(h.session_id, h.seq) for h in reader.search(query, session_id=session_id, limit=100)}

        a, b, g = ids["alpha"], ids["beta"], ids["gamma"]
        every_zebra = {(s, q) for s in (a, b, g) for q in (0, 1)} | {("s-extra", 0)}
        assert hits("zebra") == every_zebra
        assert hits("zebra -beta") == every_zebra - {(b, 0)}
        assert hits("-beta zebra") == every_zebra - {(b, 0)}
        assert hits("alpha or gamma") == {(a, 0), (g, 0)}
        assert hits("alpha OR gamma") == {(a, 0), (g, 0)}
        assert hits("zebra alpha or gamma") == {(a, 0), (g, 0)}
        assert hits("alpha gamma") == set()
        assert hits('"find the zebra"') == {(a, 0), (b, 0), (g, 0)}
        assert hits('"zebra find"') == set()
        assert hits('zebra -"find the"') == {(a, 1), (b, 1), (g, 1), ("s-extra", 0)}
        assert hits("quok*") == {(a, 2), (b, 2), (g, 2)}
        assert hits('"quokka hab*"') == {(a, 2), (b, 2), (g, 2)}
        assert hits("quok") == set()
        assert hits("notes.txt") == {(a, 3), (b, 3), (g, 3)}
        assert hits("txt") == {(a, 3), (b, 3), (g, 3)}
        assert hits("cafe") == hits("CAFÉ") == hits("Café") == {("s-extra", 0)}
        assert hits("snake") == hits("snake_case") == hits("dotted") == {("s-extra", 1)}
        assert hits("zebra", session_id=b) == {(b, 0), (b, 1)}
        assert hits("alpha or gamma", session_id=a) == {(a, 0)}
        for nothing in ("", "   ", "-beta", "-", "*", '"', "or", "zebra or", "or zebra"):
            expected: set[tuple[str, int]] = hits("zebra") if "zebra" in nothing else set()
            assert hits(nothing) == expected, nothing
        assert hits("alpha or -beta") == {(a, 0)}

    def test_search_limit_below_one_is_refused_with_a_typed_error(self, make_store: StoreFactory) -> None:
        """``limit`` 0 or negative is a SearchQueryError naming the limit; 1 and 2 cut the hits."""
        store: SessionStore = make_store()
        new_session(store, sample_messages("alpha")).checkpoint()
        for bad in (0, -1):
            with pytest.raises(SearchQueryError, match=f"limit must be an integer >= 1, got {bad}"):
                store.search("zebra", limit=bad)
        assert len(store.search("zebra", limit=1)) == 1
        assert len(store.search("zebra", limit=2)) == 2
        assert len(store.search("zebra", limit=1000)) == 2
