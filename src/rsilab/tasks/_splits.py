"""Deterministic splits of a benchmark into train, dev, accept and final, and JSONL files.

``make_splits(task, benchmark, secret)`` depends only on its arguments: the same lab secret
gives the same splits, another secret other splits. Every sample's id is re-keyed with the
secret into ``s-<12 hex digits>``: a private id cannot be guessed, so a harness cannot key
outputs on ids it has seen, and a public id is opaque, so it does not say which row of a
public source (``digit-17``, a docstring's digest) it is, nor so which rows are private. The
id does not name its tier either: a predict that could tell a private tier from dev by the
ids it is given could behave one way when the controller judges it and another elsewhere.
Private samples never go into a folder a sandbox sees: :func:`write_data_dir` refuses them.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pydantic import ValidationError

from rsilab.records import DataTier
from rsilab.tasks._samples import TIERS, FileSplits, GeneratedSplits, PoolSplits, Sample
from rsilab.tasks._secret import derive, derive_seed
from rsilab.tasks._spec import Benchmark, Task

Splits = dict[DataTier, list[Sample]]


class SplitError(ValueError):
    """Samples could not be read or split; the message names the file and line."""


def read_jsonl(path: Path) -> list[Sample]:
    """Samples from a JSON Lines file, one ``{id, input, target}`` object a line (a leading
    byte-order mark, Windows line ends and blank lines are read as an editor shows them)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SplitError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    try:
        lines = raw.decode("utf-8-sig").splitlines()
    except UnicodeDecodeError as exc:
        number = raw[: exc.start].count(b"\n") + 1
        raise SplitError(
            f"{path}:{number}: not UTF-8 (byte {raw[exc.start]:#04x}); save the file as UTF-8"
        ) from exc
    samples: list[Sample] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            samples.append(Sample.model_validate_json(line))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "line"
            raise SplitError(f"{path}:{number}: {where}: {first['msg']}") from exc
    return samples


def write_jsonl(path: Path, samples: Iterable[Sample]) -> None:
    """Write samples as JSON Lines (the form :func:`read_jsonl` reads)."""
    path.write_text("".join(s.model_dump_json() + "\n" for s in samples), "utf-8")


def content_hash(sample: Sample) -> str:
    """sha256 of the sample's canonical input JSON (for overlap checks across tiers)."""
    text = json.dumps(sample.input, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _unique(samples: Sequence[Sample], where: str) -> None:
    """SplitError naming ``where`` (a file, or ``pool``) and the ids it repeats, if any."""
    repeated = sorted(i for i, n in Counter(s.id for s in samples).items() if n > 1)
    if repeated:
        shown = ", ".join(repr(i) for i in repeated[:5]) + (" ..." if len(repeated) > 5 else "")
        raise SplitError(
            f"{where} sample ids must be unique; {len(repeated)} repeated: {shown} "
            "(give each sample an id of its own)"
        )


def _partition(pool: Sequence[Sample], source: PoolSplits, key: bytes) -> Splits:
    _unique(pool, f"{source.pool}:" if source is not None and source.pool is not None else "pool")
    order = sorted(pool, key=lambda s: derive(key, s.id))
    counts = {t: int(source.fractions[t] * len(order)) for t in TIERS}
    counts[DataTier.TRAIN] += len(order) - sum(counts.values())
    splits: Splits = {}
    start = 0
    for tier in TIERS:
        splits[tier] = order[start : start + counts[tier]]
        start += counts[tier]
    return splits


def _rekey(
    secret: bytes, task: str, bench: str, tier: DataTier, samples: list[Sample]
) -> list[Sample]:
    out = []
    for sample in samples:
        token = derive(secret, task, bench, tier.value, "id", sample.id).hex()[:12]
        out.append(sample.model_copy(update={"id": f"s-{token}"}))
    return out


def make_splits(task: Task, benchmark: Benchmark, secret: bytes) -> Splits:
    """Every tier of ``benchmark``, deterministic in (task, benchmark, secret).

    Raises:
        SplitError: a file is unreadable or malformed, or the pool's ids are not unique.
    """
    source = benchmark.samples
    splits: Splits
    if isinstance(source, FileSplits):
        splits = {tier: read_jsonl(source.files[tier]) for tier in TIERS}
        for tier in TIERS:
            _unique(splits[tier], f"{source.files[tier]}:")
    elif isinstance(source, PoolSplits):
        pool = read_jsonl(source.pool) if source.pool is not None else list(source.build())  # type: ignore[misc]
        splits = _partition(pool, source, derive(secret, task.name, benchmark.name, "partition"))
    else:
        assert isinstance(source, GeneratedSplits)
        splits = {
            tier: list(source.generate(tier, derive_seed(secret, task.name, benchmark.name, tier)))
            for tier in TIERS
        }
    for tier in TIERS:
        splits[tier] = _rekey(secret, task.name, benchmark.name, tier, splits[tier])
        if len({s.id for s in splits[tier]}) != len(splits[tier]):
            raise SplitError(f"{benchmark.name}: sample ids repeat within the {tier} tier")
    return splits


PUBLIC_DRAW_SECRET = b"rsilab public draws"
"""The secret of :func:`public_draws`: fixed and public, so anyone can make the same draws."""


def public_draws(task: Task, benchmark: Benchmark, draws: int) -> list[Sample]:
    """Samples of the public tiers (train, dev) of ``benchmark`` drawn under ``draws`` seeds
    that no lab secret enters: what an improver can draw itself from a generated benchmark's
    public generator. Empty for file and pool sources (their public rows are the splits).

    The contamination guard reads them as public vocabulary: a value the generator gives a
    public tier under some seed (a dish of a small pool the lab's own draw happened to miss) is
    no private entity, whatever one draw holds.
    """
    source = benchmark.samples
    if not isinstance(source, GeneratedSplits):
        return []
    return [
        sample
        for draw in range(draws)
        for tier in TIERS
        if not tier.is_private
        for sample in source.generate(
            tier, derive_seed(PUBLIC_DRAW_SECRET, task.name, benchmark.name, tier, str(draw))
        )
    ]


def write_data_dir(folder: Path, splits: Mapping[DataTier, Sequence[Sample]]) -> list[Path]:
    """Write ``<tier>.jsonl`` for each given tier into ``folder`` (the ``--data DIR`` of train).

    Raises:
        ValueError: a private tier (accept, final) was given; those never leave the controller.
    """
    private = [t.value for t in splits if t.is_private]
    if private:
        raise ValueError(f"private tier(s) {', '.join(private)} must never reach a sandbox")
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for tier, samples in splits.items():
        path = folder / f"{tier.value}.jsonl"
        write_jsonl(path, samples)
        written.append(path)
    return written
