"""Samples and where a benchmark's samples come from (files, a pool, or a generator)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, JsonValue, field_validator, model_validator

from rsilab.records import DataTier, Model

TIERS: tuple[DataTier, ...] = (DataTier.TRAIN, DataTier.DEV, DataTier.ACCEPT, DataTier.FINAL)
"""Every tier a benchmark has, in order; accept and final are private (controller only)."""


class Sample(Model):
    """One item of a benchmark: what ``predict`` gets (``id``, ``input``) and what it is scored on.

    ``input`` and ``target`` are any JSON values. ``predict`` never sees ``target``.
    """

    id: str = Field(min_length=1, description="Identifier, unique within its split.")
    input: JsonValue = Field(description="What the harness gets on stdin (with the id).")
    target: JsonValue = Field(default=None, description="What the scorer compares against.")


class FileSplits(Model):
    """Fixed splits, one JSON Lines file of samples per tier (every tier required)."""

    kind: Literal["files"] = Field(default="files", description="Discriminator.")
    files: dict[DataTier, Path] = Field(
        description="JSONL file per tier: train, dev, accept, final."
    )

    @field_validator("files")
    @classmethod
    def _every_tier(cls, value: dict[DataTier, Path]) -> dict[DataTier, Path]:
        missing = [t.value for t in TIERS if t not in value]
        if missing:
            raise ValueError(f"missing split(s): {', '.join(missing)}; every tier needs a file")
        return value


def _default_fractions() -> dict[DataTier, float]:
    return {DataTier.TRAIN: 0.5, DataTier.DEV: 0.2, DataTier.ACCEPT: 0.15, DataTier.FINAL: 0.15}


class PoolSplits(Model):
    """One pool of samples, partitioned into the tiers by the lab's secret seed.

    The pool comes from a JSONL file (``pool``) or a Python function (``build``); exactly one.
    """

    kind: Literal["pool"] = Field(default="pool", description="Discriminator.")
    name: str = Field(default="", description="Names the pool in digests (e.g. 'sklearn-digits').")
    pool: Path | None = Field(default=None, description="JSONL file holding every sample.")
    build: Callable[[], Sequence[Sample]] | None = Field(
        default=None, exclude=True, description="Function returning every sample (host side)."
    )
    fractions: dict[DataTier, float] = Field(
        default_factory=_default_fractions,
        description="Share of the pool per tier; every tier > 0, summing to 1.",
    )

    @field_validator("fractions")
    @classmethod
    def _valid_fractions(cls, value: dict[DataTier, float]) -> dict[DataTier, float]:
        missing = [t.value for t in TIERS if t not in value]
        if missing:
            raise ValueError(f"missing fraction(s) for {', '.join(missing)}")
        if any(f <= 0 for f in value.values()):
            raise ValueError("every fraction must be > 0")
        if abs(sum(value.values()) - 1.0) > 1e-6:
            raise ValueError(f"fractions sum to {sum(value.values()):g}, not 1")
        return value

    @model_validator(mode="after")
    def _one_origin(self) -> PoolSplits:
        if (self.pool is None) == (self.build is None):
            raise ValueError("a pool needs exactly one of 'pool' (a JSONL file) or 'build'")
        return self


class GeneratedSplits(Model):
    """Samples made per tier by a function of (tier, seed); private seeds derive from the secret.

    ``generate`` must be deterministic in its arguments and must not read the lab.
    """

    kind: Literal["generated"] = Field(default="generated", description="Discriminator.")
    name: str = Field(description="Names the generator in digests, e.g. 'kernel.sizes'.")
    generate: Callable[[DataTier, int], Sequence[Sample]] = Field(
        exclude=True, description="(tier, seed) -> samples of that tier."
    )


SampleSource = Annotated[FileSplits | PoolSplits | GeneratedSplits, Field(discriminator="kind")]
"""Where a benchmark's samples come from."""
