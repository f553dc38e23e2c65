"""Campaign leases: at most one process runs a campaign at a time.

A campaign's :class:`~rsilab.records.CampaignLease` names its holder (host, pid, boot id and a
random token). :func:`acquire_lease` takes it with a compare-and-swap when it is free:
released, silent for longer than its ttl, or held by a process of this host that no longer
exists (so a crashed run on the same machine is resumed at once, without waiting out the
ttl). Two acquirers racing for it conflict in the store; exactly one wins, the other gets
:class:`LeaseHeld`.

Heartbeats are in the ledger. The store has no unrecorded writes (every record change is one
ledger event, which ``rsilab verify`` checks), and we keep it so: a renewal that left no trace
would make a takeover impossible to audit afterwards ("was the old holder really silent?").
The cost is bounded by the interval, ``ttl / 3`` (10 s for the default 30 s ttl, so 360 small
events an hour of campaign); views that list a campaign's events may hide ``lease_heartbeat``.

The lease fences a stalled holder. A holder paused past its ttl (SIGSTOP, a laptop's sleep)
may wake after another process took the campaign over, before its next heartbeat could tell
it so. Every write it then makes for the campaign is refused by the store itself: while held,
a lease puts a :class:`~rsilab.store.fences.Fence` on the process's store, so each commit that
names the campaign reads the lease inside the commit's own transaction and raises
:class:`LeaseLost` unless the lease still names this holder's token, unreleased. Nothing is
written, and :meth:`Lease.check` raises the same error at the holder's next turn. A lease that
was lost keeps its fence: the process writes nothing more for that campaign. (Intents add
their own compare-and-swap on top: see :mod:`rsilab.orchestrator.intents`.)

Leases compare wall clocks of the hosts that share a lab: ``ttl_s`` must exceed their skew.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from rsilab.errors import ConflictError, NotFoundError, RsilabError, UserError
from rsilab.orchestrator.writer import write
from rsilab.records import Campaign, CampaignLease, LeaseHolder, Record, lease_id
from rsilab.sandbox.owners import boot_id, pid_alive
from rsilab.store import Store
from rsilab.store.fences import Fence

ACTOR = "orchestrator"
DEFAULT_TTL_S = 30.0

Clock = Callable[[], datetime]
"""Gives the current time, timezone-aware; tests pass a fake one."""


def utc_clock() -> datetime:
    """The current UTC time (the default :data:`Clock`)."""
    return datetime.now(UTC)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


class LeaseHeld(UserError):
    """Another live process holds the campaign's lease."""

    def __init__(self, lease: CampaignLease) -> None:
        holder = lease.holder
        super().__init__(
            f"campaign {lease.campaign_id} is being run by process {holder.pid} on "
            f"{holder.host} (since {lease.acquired_at}, last heartbeat {lease.heartbeat_at})",
            f"wait for it to finish, or stop it and run `rsilab resume {lease.campaign_id}`; "
            f"a holder that died is taken over {lease.ttl_s:g} s after its last heartbeat",
        )
        self.lease = lease


class LeaseLost(UserError):
    """The lease this process held was taken over (or released) by someone else."""

    def __init__(self, ours: CampaignLease, current: CampaignLease | None) -> None:
        if current is None:
            taker = "removed from the lab"
        elif current.released_at:
            taker = "released"
        else:
            holder = current.holder
            taker = f"taken by process {holder.pid} on {holder.host} at {current.acquired_at}"
        super().__init__(
            f"this process lost the lease of campaign {ours.campaign_id}: it was {taker}",
            "make sure one `rsilab resume` runs per campaign; if this process was paused longer "
            f"than the ttl ({ours.ttl_s:g} s), raise the ttl",
        )
        self.current = current


# --- Is the holder alive? ---------------------------------------------------------------------


def holder_is_dead(holder: LeaseHolder) -> bool:
    """True only when certain: the holder is of this host and its boot or process is gone.

    A reused pid makes a dead holder look alive; that only delays takeover until the ttl.
    """
    if holder.host != socket.gethostname():
        return False
    boot = boot_id()
    if boot and holder.boot_id and boot != holder.boot_id:
        return True
    return not pid_alive(holder.pid)


def takeover_reason(lease: CampaignLease, now: datetime) -> str | None:
    """Why ``lease`` may be taken at ``now`` ('released', 'expired ...', 'dead ...'); None if
    its holder still counts as alive."""
    if lease.released_at is not None:
        return "released"
    silent = (now - datetime.fromisoformat(lease.heartbeat_at)).total_seconds()
    if silent > lease.ttl_s:
        return f"expired: no heartbeat for {silent:.1f} s (ttl {lease.ttl_s:g} s)"
    if holder_is_dead(lease.holder):
        return f"dead: process {lease.holder.pid} on {lease.holder.host} no longer exists"
    return None


# --- Acquire, renew, release ------------------------------------------------------------------


def acquire_lease(
    store: Store,
    campaign_id: str,
    *,
    ttl_s: float = DEFAULT_TTL_S,
    actor: str = ACTOR,
    now: Clock = utc_clock,
) -> Lease:
    """Take the lease of ``campaign_id`` for this process (one ``lease_acquired`` event).

    Raises NotFoundError when there is no such campaign, and :class:`LeaseHeld` when a live
    holder has it, including one that won a race with this call.
    """
    store.get_as(campaign_id, Campaign)
    moment = now()
    stamp = _iso(moment)
    me = LeaseHolder(
        host=socket.gethostname(), pid=os.getpid(), boot_id=boot_id(), token=secrets.token_hex(8)
    )
    taken: dict[str, Any] = {
        "holder": me,
        "acquired_at": stamp,
        "heartbeat_at": stamp,
        "ttl_s": ttl_s,
        "released_at": None,
    }
    try:
        current = store.get_as(lease_id(campaign_id), CampaignLease)
    except NotFoundError:
        record = CampaignLease(campaign_id=campaign_id, takeover="", **taken)
    else:
        reason = takeover_reason(current, moment)
        if reason is None:
            raise LeaseHeld(current)
        record = current.model_copy(update={**taken, "takeover": reason})
    try:
        _write(store, record, actor, "lease_acquired", record.takeover or "new lease")
    except ConflictError as exc:
        raise LeaseHeld(store.get_as(record.id, CampaignLease)) from exc
    return Lease(store, record, actor=actor, now=now)


def _write(store: Store, record: CampaignLease, actor: str, action: str, detail: str) -> None:
    """Write ``record`` with its event; the detail names the holder's host and process."""
    holder = record.holder
    where = f"{holder.host}:{holder.pid} {detail}"
    write(store, action, [record], campaign_id=record.campaign_id, detail=where, actor=actor)


class Lease:
    """A campaign lease held by this process. Methods may be called from several threads.

    From its making until :meth:`release` lets it go, the lease fences ``store``: every
    commit of the campaign through it is refused with :class:`LeaseLost` unless the stored
    lease still names this holder (see the module). A lost lease keeps its fence.
    """

    def __init__(self, store: Store, record: CampaignLease, *, actor: str, now: Clock) -> None:
        self._store = store
        self._record = record
        self._actor = actor
        self._now = now
        self._lock = threading.Lock()
        self._released = False
        self._lost: LeaseLost | None = None
        self.last_error: RsilabError | None = None
        """The last error a keep-alive heartbeat met and retried (e.g. a busy database)."""
        self._fence = Fence(self.campaign_id, record.id, self._admits)
        store.fence(self._fence)

    def _admits(self, stored: Record | None) -> LeaseLost | None:
        """The fence's test, run inside another thread's commit: None while the stored
        lease is ours and unreleased; else the LeaseLost that commit raises (kept for
        :meth:`check`, so the holder stops at its next turn)."""
        current = stored if isinstance(stored, CampaignLease) else None
        ours = self._record.holder.token
        if current is not None and current.holder.token == ours and not current.released_at:
            return None
        lost = LeaseLost(self._record, current)
        if self._lost is None:
            self._lost = lost
        return lost

    @property
    def campaign_id(self) -> str:
        return self._record.campaign_id or ""

    @property
    def record(self) -> CampaignLease:
        """A copy of the lease as this process last wrote it."""
        return self._record.model_copy(deep=True)

    def heartbeat(self) -> None:
        """Renew the lease (compare-and-swap, one ``lease_heartbeat`` event).

        Raises :class:`LeaseLost` when someone else took or released it, or it was released
        here; a renewal after the ttl passed still succeeds if nobody took it meanwhile.
        """
        with self._lock:
            self._write("lease_heartbeat", "heartbeat", heartbeat_at=_iso(self._now()))

    def release(self) -> None:
        """Let the lease go so the next acquirer need not wait. Idempotent; does nothing when
        the lease was already lost (there is nothing of ours to release)."""
        with self._lock:
            if self._released:
                return
            with contextlib.suppress(LeaseLost):
                self._write("lease_released", "released", released_at=_iso(self._now()))
            self._released = True
            if self._lost is None:  # a lost lease keeps fencing: nothing more is written
                self._store.unfence(self._fence)

    def check(self) -> None:
        """Raise the :class:`LeaseLost` a :meth:`keep_alive` heartbeat or a fenced commit
        met, if any.

        Cheap (no store read): call it before each side effect.
        """
        if self._lost is not None:
            raise self._lost

    @contextlib.contextmanager
    def keep_alive(self, interval_s: float | None = None) -> Iterator[Lease]:
        """Heartbeat from a background thread every ``interval_s`` (default ttl / 3).

        A lost lease stops the thread and is raised by :meth:`check`; other errors (the
        database busy or briefly unwritable) are kept in :attr:`last_error` and retried at
        the next beat, which the ttl leaves room for. The thread stops on exit.
        """
        interval = interval_s if interval_s is not None else self._record.ttl_s / 3
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(interval):
                try:
                    self.heartbeat()
                except LeaseLost as exc:
                    self._lost = exc
                    return
                except RsilabError as exc:
                    self.last_error = exc

        thread = threading.Thread(target=beat, name=f"lease-{self.campaign_id}", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()

    def _write(self, action: str, detail: str, **update: Any) -> None:
        if self._released:
            raise LeaseLost(self._record, self._record)
        new = self._record.model_copy(update=update)
        try:
            _write(self._store, new, self._actor, action, detail)
        except ConflictError as exc:
            current = self._store.get_as(new.id, CampaignLease)
            self._lost = LeaseLost(self._record, current)
            raise self._lost from exc
        self._record = new

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
