"""Campaign leases: compare-and-swap acquisition, takeover of dead holders, heartbeats."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from rsilab.errors import NotFoundError
from rsilab.expos import open_campaign
from rsilab.orchestrator.campaign._lease import Lease, LeaseHeld, LeaseLost, acquire_lease
from rsilab.records import (
    CampaignLease,
    EventDraft,
    Finding,
    FindingStatus,
    LeaseHolder,
    Record,
    TaskRef,
    lease_id,
)
from rsilab.store import Lab, Store, verify_store

T0 = datetime(2030, 1, 1, tzinfo=UTC)


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def _campaign(store: Store) -> str:
    return open_campaign(store, TaskRef(name="digits")).id


def _finding(campaign_id: str | None) -> Finding:
    return Finding(claim="a claim", status=FindingStatus.UNRESOLVED, campaign_id=campaign_id)


def _stored(store: Store, campaign_id: str) -> CampaignLease:
    return store.get_as(lease_id(campaign_id), CampaignLease)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: the pid names no process now
    return child.pid


def _plant(store: Store, campaign_id: str, **holder: Any) -> None:
    """Write a lease as another process would have, heartbeat now."""
    stamp = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    fields = {"host": socket.gethostname(), "pid": os.getpid(), "token": "theirs", **holder}
    record = CampaignLease(
        campaign_id=campaign_id,
        holder=LeaseHolder(**fields),
        acquired_at=stamp,
        heartbeat_at=stamp,
        ttl_s=60,
    )
    store.commit(EventDraft(actor="t", role="controller", action="lease_acquired"), [record])


def _wait_for(condition: Any, what: str, deadline_s: float = 5.0) -> None:
    end = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.005)


def _lost(lease: Lease) -> bool:
    try:
        lease.check()
    except LeaseLost:
        return True
    return False


def test_acquire_writes_the_lease_and_refuses_a_second_holder(lab: Lab) -> None:
    campaign_id = _campaign(lab.store)
    lease = acquire_lease(lab.store, campaign_id, ttl_s=5)
    stored = _stored(lab.store, campaign_id)
    assert stored.holder == lease.record.holder
    assert (stored.holder.host, stored.holder.pid) == (socket.gethostname(), os.getpid())
    with pytest.raises(LeaseHeld) as caught:
        acquire_lease(lab.store, campaign_id)
    message = str(caught.value)
    assert f"process {os.getpid()} on {socket.gethostname()}" in message
    assert stored.acquired_at in message and "rsilab resume" in message
    assert caught.value.lease.holder.token == stored.holder.token
    actions = [e.action for e in lab.store.events(campaign_id=campaign_id)]
    assert actions == ["campaign_created", "lease_acquired"]


def test_acquire_needs_the_campaign(lab: Lab) -> None:
    with pytest.raises(NotFoundError):
        acquire_lease(lab.store, "cmp-000000000000")


def test_of_two_racing_acquirers_the_compare_and_swap_picks_one(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    campaign_id = _campaign(lab.store)
    other = Lab.open(lab.path)  # a second connection, as another process would have
    original = lab.store.get_as
    winner: list[Lease] = []

    def stale_read(record_id: str, cls: Any) -> Any:
        # The other acquirer commits between this one's read and its write.
        if cls is CampaignLease and not winner:
            winner.append(acquire_lease(other.store, campaign_id))
            raise NotFoundError("lease", record_id)
        return original(record_id, cls)

    monkeypatch.setattr(lab.store, "get_as", stale_read)
    try:
        with pytest.raises(LeaseHeld) as caught:
            acquire_lease(lab.store, campaign_id)
        assert caught.value.lease.holder.token == winner[0].record.holder.token
    finally:
        other.close()


def test_threads_racing_for_one_lease_get_exactly_one(lab: Lab) -> None:
    campaign_id = _campaign(lab.store)
    start = threading.Barrier(8)
    won: list[Lease] = []
    refused: list[LeaseHeld] = []

    def race() -> None:
        start.wait()
        try:
            won.append(acquire_lease(lab.store, campaign_id))
        except LeaseHeld as exc:
            refused.append(exc)

    threads = [threading.Thread(target=race) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (len(won), len(refused)) == (1, 7)
    assert _stored(lab.store, campaign_id).holder == won[0].record.holder


def test_a_silent_lease_is_taken_over_after_its_ttl(lab: Lab) -> None:
    campaign_id = _campaign(lab.store)
    clock = FakeClock()
    first = acquire_lease(lab.store, campaign_id, ttl_s=5, now=clock)
    clock.advance(5)
    with pytest.raises(LeaseHeld):  # exactly the ttl: not yet
        acquire_lease(lab.store, campaign_id, ttl_s=5, now=clock)
    clock.advance(1)
    second = acquire_lease(lab.store, campaign_id, ttl_s=5, now=clock)
    assert second.record.takeover.startswith("expired: no heartbeat for 6.0 s")
    with pytest.raises(LeaseLost) as caught:
        first.heartbeat()
    assert "taken by process" in str(caught.value)
    with pytest.raises(LeaseLost):
        first.check()
    first.release()  # lost: releasing must not free the new holder's lease
    assert _stored(lab.store, campaign_id).holder == second.record.holder
    second.heartbeat()
    assert verify_store(lab.store, None).ok


def test_heartbeat_keeps_the_lease(lab: Lab) -> None:
    campaign_id = _campaign(lab.store)
    clock = FakeClock()
    lease = acquire_lease(lab.store, campaign_id, ttl_s=5, now=clock)
    clock.advance(4)
    lease.heartbeat()
    clock.advance(4)
    with pytest.raises(LeaseHeld):
        acquire_lease(lab.store, campaign_id, ttl_s=5, now=clock)
    clock.advance(30)
    lease.heartbeat()  # late, but nobody took it: still ours
    assert _stored(lab.store, campaign_id).heartbeat_at.startswith("2030-01-01T00:00:38")


def test_a_dead_process_of_this_host_is_taken_over_at_once(lab: Lab) -> None:
    campaign_id = _campaign(lab.store)
    pid = _dead_pid()
    _plant(lab.store, campaign_id, pid=pid)
    lease = acquire_lease(lab.store, campaign_id)
    assert (
        lease.record.takeover == f"dead: process {pid} on {socket.gethostname()} no longer exists"
    )


def test_a_holder_of_another_boot_is_dead(lab: Lab) -> None:
    campaign_id = _campaign(lab.store)
    if not os.path.exists("/proc/sys/kernel/random/boot_id"):
        pytest.skip("no boot id on this system")
    _plant(lab.store, campaign_id, boot_id="another-boot")
    assert acquire_lease(lab.store, campaign_id).record.takeover.startswith("dead:")


def test_a_dead_pid_of_another_host_is_not_trusted(lab: Lab) -> None:
    campaign_id = _campaign(lab.store)
    _plant(lab.store, campaign_id, host="elsewhere.example", pid=_dead_pid())
    with pytest.raises(LeaseHeld) as caught:
        acquire_lease(lab.store, campaign_id)
    assert "on elsewhere.example" in str(caught.value)


def test_release_frees_the_lease_and_is_idempotent(lab: Lab) -> None:
    campaign_id = _campaign(lab.store)
    with acquire_lease(lab.store, campaign_id) as lease:
        pass
    lease.release()
    assert _stored(lab.store, campaign_id).released_at is not None
    with pytest.raises(LeaseLost, match="released"):
        lease.heartbeat()
    again = acquire_lease(lab.store, campaign_id)
    assert again.record.takeover == "released"
    actions = [e.action for e in lab.store.events(campaign_id=campaign_id)]
    assert actions.count("lease_released") == 1


def test_keep_alive_renews_and_reports_a_takeover(lab: Lab) -> None:
    campaign_id = _campaign(lab.store)
    lease = acquire_lease(lab.store, campaign_id, ttl_s=5, now=FakeClock())
    first_rev = _stored(lab.store, campaign_id).rev
    with lease.keep_alive(0.01):
        _wait_for(lambda: _stored(lab.store, campaign_id).rev >= first_rev + 2, "heartbeats")
        lease.check()
        taker: list[Lease] = []

        def take() -> bool:
            # The old holder's clock stands still, so its lease looks expired; a heartbeat
            # landing between this read and write makes the attempt conflict: try again.
            try:
                later = FakeClock(T0 + timedelta(seconds=60))
                taker.append(acquire_lease(lab.store, campaign_id, now=later))
            except LeaseHeld:
                return False
            return True

        _wait_for(take, "the takeover")
        _wait_for(lambda: _lost(lease), "the keep-alive thread to notice")
    assert _stored(lab.store, campaign_id).holder == taker[0].record.holder
    actions = [e.action for e in lab.store.events(campaign_id=campaign_id)]
    assert actions.count("lease_heartbeat") >= 2
    assert verify_store(lab.store, None).ok


_OTHER_PROCESS = """
import sys
from datetime import UTC, datetime, timedelta
from rsilab.orchestrator.campaign._lease import acquire_lease
from rsilab.store import Lab

lab_path, campaign_id, then = sys.argv[1:]
later = datetime.now(UTC) + timedelta(seconds=120)  # the first holder looks silent
with Lab.open(lab_path) as lab:
    lease = acquire_lease(lab.store, campaign_id, now=lambda: later)
    if then == "release":
        lease.release()
"""


@pytest.mark.parametrize(
    ("then", "said"), [("keep", "taken by process"), ("release", "it was released")]
)
def test_a_holder_that_lost_its_lease_writes_nothing_more_for_its_campaign(
    lab: Lab, then: str, said: str
) -> None:
    """A holder paused past its ttl: another process takes the campaign over (and keeps it,
    or releases it again); every later write of the first for that campaign is refused in
    the store, before its heartbeat could notice, and stays refused after it lets go."""
    campaign_id, other_campaign = _campaign(lab.store), _campaign(lab.store)
    lease = acquire_lease(lab.store, campaign_id)
    lease.check()
    found = _finding(campaign_id)
    lab.store.commit(EventDraft(actor="t", role="controller", action="x"), [found])
    argv = [sys.executable, "-c", _OTHER_PROCESS, str(lab.path), campaign_id, then]
    subprocess.run(argv, check=True)
    head = lab.store.head()
    found.claim = "changed by a holder that lost the campaign"
    writes: list[tuple[EventDraft, list[Record]]] = [
        (EventDraft(actor="t", role="controller", action="x"), [found]),
        (EventDraft(actor="t", role="controller", action="x", campaign_id=campaign_id), []),
        (EventDraft(actor="t", role="worker", action="y"), [_finding(campaign_id)]),
    ]
    for draft, records in writes:
        with pytest.raises(LeaseLost, match=said):
            lab.store.commit(draft, records)
    with pytest.raises(LeaseLost, match=said):
        lease.check()  # the holder's next turn stops it, no heartbeat needed
    lease.release()
    with pytest.raises(LeaseLost, match=said):
        lab.store.commit(*writes[1])
    assert lab.store.head() == head
    assert lab.store.get_as(found.id, Finding).claim == "a claim"
    # the rest of the lab is not fenced
    other = EventDraft(actor="t", role="controller", action="x", campaign_id=other_campaign)
    lab.store.commit(other, [_finding(other_campaign)])
    lab.store.commit(EventDraft(actor="t", role="controller", action="x"), [_finding(None)])
    assert verify_store(lab.store, None).ok


def test_a_released_lease_leaves_the_campaign_writable(lab: Lab) -> None:
    campaign_id = _campaign(lab.store)
    with acquire_lease(lab.store, campaign_id):
        pass
    draft = EventDraft(actor="t", role="human", action="note", campaign_id=campaign_id)
    assert lab.store.commit(draft).campaign_id == campaign_id
