"""The session store conformance kit: one pytest suite any :class:`~harness.session.SessionStore` runs.

Subclass :class:`StoreConformance` in a test module (the class name must start with
``Test``) and say how to make a fresh, empty store::

    from harness.testing.store_conformance import StoreConformance

    class TestMyStore(StoreConformance):
        opener = "my_store_package:open_my_store"   # "module:function", spec -> store

        def store_spec(self, tmp_path, name):
            return f"mystore:///{tmp_path}/{name}"   # a URL no store uses yet

        def cleanup_spec(self, spec):                # optional: drop what store_spec made
            ...

Every test then gets stores from the :meth:`StoreConformance.make_store` fixture:
``make_store()`` opens a new, empty store (a new spec), ``make_store(same=True)`` a second
handle on the *same* storage as the last one (a second connection, as another process
would have). Each handle is closed and each spec cleaned up after the test.

**Processes.** The race and crash tests start real processes (``python -c``), which
open the store with :attr:`StoreConformance.opener` applied to the spec, so the opener
must be importable by name in a fresh interpreter and the spec must be a plain string
(a URL). The default opener, :func:`~harness.testing.store_workers.open_with_plugins`,
opens a URL as ``harness.open_store`` does (every installed ``harness`` plugin's
``resolve_store`` hook, then the built-in ``sqlite:`` / ``file:`` schemes), so a store
distribution with a ``resolve_store`` entry point needs no opener of its own. Set
:attr:`StoreConformance.processes` to ``False`` for a store another process cannot open
(those tests are then skipped, saying so).

**What it covers.** The round trip (every part kind, usage, thoughts, ledger, metadata,
the original query), append-only semantics (a compaction-like rewrite of the view never
rewrites the log; edits record what they replaced), revision conflicts (a stale write
raises :class:`~harness.errors.SessionConflictError` and writes *nothing*), two processes
racing on one session, fork, delete, prune, search (one grammar, the same hits on every
store, ``limit < 1`` refused: :mod:`harness.testing.store_search_cases`), run leases (a
live holder refuses others, a killed or expired one's lease is taken over, skipped for a
store without leases: :mod:`harness.testing.store_lease_cases`), list order, a missing session, an
import with a kept revision and a gapped log, crash consistency (a committing process
SIGKILLed at random moments: :attr:`StoreConformance.crash_rounds` kills by default,
:attr:`StoreConformance.slow_crash_rounds` in the ``slow`` test) and a hypothesis
property (random appends and rewrites reload to the same view, and the log holds every
raw message exactly once, in order). See :mod:`harness.testing.store_workers` for the
consistency check applied after each crash.
"""

from __future__ import annotations

__all__ = ["ConformanceBase", "StoreConformance", "StoreFactory", "sample_messages"]

from harness.testing.store_cases import RecordCases
from harness.testing.store_kit import ConformanceBase, StoreFactory, sample_messages
from harness.testing.store_lease_cases import LeaseCases
from harness.testing.store_lifecycle_cases import LifecycleCases
from harness.testing.store_process_cases import ProcessCases
from harness.testing.store_search_cases import SearchCases


class StoreConformance(RecordCases, LifecycleCases, ProcessCases, SearchCases, LeaseCases):
    """The conformance suite; subclass it and implement ``store_spec`` (see the module docstring).

    Settings (class attributes): ``opener``, ``processes``, ``crash_rounds``,
    ``slow_crash_rounds``, ``race_commits``, ``property_examples``; methods: ``store_spec``
    (required), ``cleanup_spec``, ``open_spec`` (see :class:`ConformanceBase`).
    """

    # ------------------------------------------------------------------ property

    def test_random_appends_and_rewrites_reload_and_keep_the_log(self, make_store: StoreFactory) -> None:
        """Hypothesis: random appends and rewrites reload exactly, and the log holds each raw message once."""
        from harness.testing.store_properties import run_rewrite_property

        run_rewrite_property(make_store, max_examples=self.property_examples)
