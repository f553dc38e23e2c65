"""What a process checks once before it adds the first event to a lab's ledger.

``rsilab verify`` finds a rolled-back or replaced ledger and a missing key, but a writer that
did not ask would append to it: its new events would carry the watermark kept outside the lab
past the point the rollback removed, and the next verify would pass (an older copy of lab.db
put back, then one more run, left no trace). And a writer without the lab's key would append
events no checkpoint signs. So the first write of each process refuses, with one line:

- a ledger shorter than the watermark (events were removed), or whose event at the
  watermark's position is not the one the watermark names (the ledger was replaced);
- no usable key where the key folder shows the lab was signed (its watermark is there) or
  the key file is there but damaged;
- a key that does not sign the lab's last checkpoint (another lab's key);
- a key folder where the signed mark of each event cannot be written (every commit raises
  it: an event it would not cover could be cut from the ledger unnoticed).

A lab nobody signed yet (no watermark, no checkpoint) is written as before.
"""

from __future__ import annotations

from rsilab.errors import LabDamaged, LabError
from rsilab.store import keys
from rsilab.store.base import StoreReader
from rsilab.store.ledger import checkpoint_mac

RESTORE = "run `rsilab verify`; restore the lab (lab.db and its key folder) from a backup"


def check_before_first_write(store: StoreReader, lab_id: str, key: bytes | None) -> None:
    """Raise LabDamaged or LabError (see the module docstring) when ``store`` must not be
    appended to with ``key``; return when it may."""
    mark = keys.load_watermark(lab_id)
    seq, _ = store.head()
    if mark is not None:
        if mark.seq > seq:
            raise LabDamaged(
                f"the lab's ledger ends at event {seq}, but event {mark.seq} was recorded "
                f"outside the lab ({keys.key_dir()}): events were removed (an older copy of "
                "the database?); nothing was written",
                RESTORE,
            )
        at = next(iter(store.stored_events(after=mark.seq - 1)), None)
        if at is None or at.seq != mark.seq or at.hash != mark.head_hash:
            raise LabDamaged(
                f"event {mark.seq} of the lab's ledger is not the one recorded outside the lab "
                f"({keys.key_dir()}): the ledger was replaced; nothing was written",
                RESTORE,
            )
    checkpoints = store.checkpoints()
    problem = keys.key_problem(lab_id) if key is None else None
    # a key folder that holds the lab's watermark knew its key: the key was removed, or the
    # file is damaged. (A lab opened where its key folder is not at all, a copy moved without
    # it, is written unsigned, as `rsilab verify` then says.)
    if problem is not None and (mark is not None or "is damaged" in problem):
        raise LabError(
            f"the ledger key of lab {lab_id} {problem}: events written now would go unsigned; "
            "nothing was written",
            "restore the key file from the backup of your key folder (rsilab backup keeps "
            "it), or set RSILAB_KEY_DIR to the folder that holds it",
        )
    if key is not None and checkpoints:
        last = checkpoints[-1]
        if checkpoint_mac(key, lab_id, last.seq, last.head_hash) != last.mac:
            raise LabError(
                f"the ledger key found for lab {lab_id} does not sign its checkpoints (the key "
                "of another lab?); nothing was written",
                f"put the lab's own key at {keys.key_dir() / (lab_id + '.key')}",
            )
    if key is not None:
        try:
            keys.check_watermark_writable(lab_id)
        except OSError as exc:
            raise LabError(
                f"the key folder {keys.key_dir()} of lab {lab_id} cannot be written "
                f"({exc.strerror or exc}): the signed mark of each new event could not be kept "
                "there; nothing was written",
                "make the key folder writable, or set RSILAB_KEY_DIR to a writable folder "
                "that holds the lab's key",
            ) from exc
