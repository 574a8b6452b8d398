"""The conformance cases about run leases (:mod:`harness.session.lease`), real processes included."""

from __future__ import annotations

__all__ = ["LeaseCases"]

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.errors import SessionLeaseError
from harness.session import SessionStore
from harness.session.lease import LeaseHolder, LeasingStore, new_holder
from harness.testing.store_kit import ConformanceBase, StoreFactory
from harness.testing.store_workers import read_side_channel, spawn_worker


def _leasing(store: SessionStore) -> LeasingStore:
    if not isinstance(store, LeasingStore):
        pytest.skip(f"{type(store).__name__} keeps no run leases (harness.session.lease.LeasingStore)")
    return store


def _dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


class LeaseCases(ConformanceBase):
    """A live holder's lease refuses every other holder; a dead or expired one's is taken over."""

    def test_a_live_lease_refuses_another_holder_until_it_is_dropped(self, make_store: StoreFactory) -> None:
        """Two handles: the second holder is refused naming the first; a renewal, a drop, another session."""
        store = _leasing(make_store())
        other = _leasing(make_store(same=True))
        first, second = new_holder(), new_holder()
        store.take_lease("leased", first)  # the session need not exist yet
        with pytest.raises(SessionLeaseError, match=f"another run holds its lease \\(pid {os.getpid()} on "):
            other.take_lease("leased", second)
        store.take_lease("leased", new_holder(first.token))  # a renewal by the holder
        other.take_lease("free", second)  # another session's lease is its own
        other.drop_lease("leased", second.token)  # not its lease: nothing happens
        with pytest.raises(SessionLeaseError) as caught:
            other.take_lease("leased", second)
        assert caught.value.session_id == "leased"
        assert caught.value.holder == first.describe()
        assert "\n" not in str(caught.value)
        store.drop_lease("leased", first.token)
        other.take_lease("leased", second)
        with pytest.raises(SessionLeaseError):
            store.take_lease("leased", first)

    def test_an_expired_or_dead_holders_lease_is_taken_over(self, make_store: StoreFactory) -> None:
        """Another host's lease holds until it expires; a dead process's on this host is free at once."""
        store = _leasing(make_store())
        elsewhere = LeaseHolder("t-elsewhere", "elsewhere.invalid", 1, time.time() + 60)
        store.take_lease("remote", elsewhere)
        with pytest.raises(SessionLeaseError, match=r"pid 1 on elsewhere\.invalid"):
            store.take_lease("remote", new_holder())
        expired = LeaseHolder("t-expired", "elsewhere.invalid", 1, time.time() - 1)
        store.take_lease("stale", expired)
        store.take_lease("stale", new_holder())
        mine = new_holder()
        dead = LeaseHolder("t-dead", mine.host, _dead_pid(), time.time() + 60)
        store.take_lease("crashed", dead)
        store.take_lease("crashed", mine)

    def test_a_killed_processs_lease_is_taken_over(self, make_store: StoreFactory, tmp_path: Path) -> None:
        """A real process holds the lease (refused while it lives); once SIGKILLed, the lease is taken."""
        if not self.processes:
            pytest.skip(f"{type(self).__name__}.processes is False")
        store = _leasing(make_store())
        side = tmp_path / "lease.txt"
        child = spawn_worker("lease", opener=self.opener, spec=make_store.spec, session_id="held", side=side)
        try:
            deadline = time.monotonic() + 60
            while not any(line.startswith("leased ") for line in read_side_channel(side)):
                assert child.poll() is None, side.with_name(side.name + ".err").read_text()
                assert time.monotonic() < deadline, "the child never took the lease"
                time.sleep(0.01)
            with pytest.raises(SessionLeaseError, match=f"pid {child.pid} on "):
                store.take_lease("held", new_holder())
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
        store.take_lease("held", new_holder())  # resuming after the crash is never blocked
