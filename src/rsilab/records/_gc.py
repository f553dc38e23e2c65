"""What garbage collection leaves behind: a tombstone for every blob it removed."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from rsilab.records._base import Record, utc_now


class Tombstone(Record):
    """A blob removed on purpose by garbage collection.

    The records that name the blob keep its hash; this record says the bytes are gone by
    design, so ``rsilab verify`` reads a missing blob with a tombstone as collected, and one
    without a tombstone as lost.
    """

    KIND: ClassVar[str] = "tombstone"
    PREFIX: ClassVar[str] = "tomb"

    sha256: str = Field(description="Address of the removed blob.")
    size: int = Field(ge=0, description="Bytes it held.")
    reason: str = Field(description="Why the collection rule let it go.")
    removed_at: str = Field(default_factory=utc_now, description="When it was removed.")

    def summary(self) -> str:
        return f"{self.id} {self.sha256[:12]} {self.size} B"
