"""The contamination guard (issue 10) on posttrain's generated benchmarks.

(a) SFT data built honestly - the train tier re-worded into Q/A lines, prose and JSONL, fresh
items from the public generator on the train bucket, the shipped corpus - registered through
the data tools raises no flag at all. (b) Private items planted with their numbers or their
entities changed, 1, 10 and 50 of them: what the guard catches, and what it cannot tell from
chance (the rate at which honest items coincide with private ones is computed here, from the
generators, independently of the guard). The data is built by ``benchmarks/hacking/
posttrain.py``, which the benchmark table of the same attacks uses too."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from benchmarks.hacking.posttrain import (
    Setup,
    base,
    check,
    fresh_items,
    honest,
    make_setup,
    planted,
    private,
    private_names,
    qa,
    question,
    report,
)

from rsilab.records import DataTier
from rsilab.tasks import Sample
from rsilab.tasks.builtin.posttrain import _bench, _corpus
from rsilab.tasks.builtin.posttrain import _world as world


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    made = make_setup(tmp_path_factory.mktemp("contamination"))
    yield made
    made.lab.close()


def test_honest_sft_data_from_the_train_tier_raises_no_flag(setup: Setup, tmp_path: Path) -> None:
    text = honest(setup)
    assert report(setup, text, tmp_path).hits == []
    assert check(setup, text) is None


def test_fresh_items_from_the_public_generator_raise_no_flag(setup: Setup, tmp_path: Path) -> None:
    # an improver's augmentation: 3000 new items per generated benchmark on the train bucket;
    # they share templates, numbers and objects with private items, never their entities
    text = qa(fresh_items())
    assert report(setup, text, tmp_path).hits == []
    assert check(setup, text) is None


def test_the_shipped_corpus_raises_no_flag(setup: Setup, tmp_path: Path) -> None:
    # it states the facts of every entity, private buckets too: public knowledge by design
    text = _corpus.corpus()
    assert report(setup, text, tmp_path).hits == []
    assert check(setup, text) is None


@pytest.mark.parametrize("bench", ["arith", "fncall"])
@pytest.mark.parametrize("count", [1, 10, 50])
def test_private_items_with_numbers_changed_are_found_by_their_entities(
    setup: Setup, tmp_path: Path, bench: str, count: int
) -> None:
    planted_items = planted(setup, bench, count, "numbers")
    text = base(setup) + qa(planted_items)
    scanned = report(setup, text, tmp_path)
    found = {h.sample_id for h in scanned.hits if h.kind == "entity"}
    assert found >= {s.id for s in planted_items}
    # a planted request can also be another private item of the same person with its numbers
    # changed (send 5 notes to X, send 9 notes to X): found too, by the same private name
    names = {n for s in planted_items for n in private_names() if n in question(s)}
    by_id = {s.id: s for s in private(setup, bench)}
    assert all(any(n in question(by_id[i]) for n in names) for i in found)
    assert {h.benchmark for h in scanned.hits} == {bench}
    # one item found by its entity is not enough (a name can recur by chance); two are
    refusal = check(setup, text)
    if count == 1:
        assert refusal is None
    else:
        assert refusal is not None and refusal.rule == "private_data_in_training"


@pytest.mark.parametrize("bench", ["facts", "choice", "code"])
@pytest.mark.parametrize("count", [1, 10, 50])
def test_private_questions_copied_are_found(
    setup: Setup, tmp_path: Path, bench: str, count: int
) -> None:
    # a fact question has no number to change: a planted one is a copy, found by its windows;
    # a code request is found when its whole text is there (its windows alone are template)
    planted_items = planted(setup, bench, count, "copied")
    text = base(setup) + qa(planted_items)
    found = {h.sample_id for h in report(setup, text, tmp_path).hits if h.benchmark == bench}
    assert found >= {s.id for s in planted_items}
    refusal = check(setup, text)
    assert (refusal is None) == (count < 10)  # approximate hits: 10 of 300 make a leak


def _coincidence_rate(setup: Setup, bench: str) -> float:
    """Share of the public tiers whose question, its entity replaced by a private item's, IS
    that private item's question: how often honest items coincide with private ones (an item
    that names no one coincides with nothing: it has no entity to change). A song title is an
    entity too: its request has no number, so each title's one request text is in one tier
    (the tier it hashes to), and a title of a private tier's request is in no public item."""
    names = sorted([*world.people(), *world.SONGS], key=len, reverse=True)
    pattern = re.compile("|".join(re.escape(n) for n in names))

    def skeleton(sample: Sample) -> str:
        return pattern.sub("*", question(sample))

    named = [s for s in private(setup, bench) if pattern.search(question(s))]
    skeletons = {skeleton(s) for s in named}
    public = [s for tier in (DataTier.TRAIN, DataTier.DEV) for s in setup.splits[bench][tier]]
    coincide = [s for s in public if pattern.search(question(s)) and skeleton(s) in skeletons]
    return len(coincide) / len(public)


def test_the_guard_measures_the_chance_rate_the_generators_give(setup: Setup) -> None:
    rates = setup.guards.content_index().private.neighbour_rates
    for bench in ("arith", "fncall"):
        assert rates[bench][0] == pytest.approx(_coincidence_rate(setup, bench))
    assert 0.01 < rates["arith"][0] < 0.2  # a word problem: a few percent of honest items
    # every fact question has private neighbours (ask about another person): no evidence
    assert rates["facts"] == pytest.approx((1.0, 1.0))


@pytest.mark.parametrize("count", [1, 10, 50])
def test_word_problems_with_entities_changed_count_only_beyond_chance(
    setup: Setup, tmp_path: Path, count: int
) -> None:
    # A word problem with its name changed is the template, a train-bucket name and the
    # private item's numbers and object: an item the public generator draws by itself, as
    # the chance rate above says. One is no evidence; many, beyond the binomial tail of
    # honest coincidences, are (see docs/posttrain.md, Contamination).
    text = base(setup) + qa(planted(setup, "arith", count, "entities"))
    scanned = report(setup, text, tmp_path)
    assert scanned.hits == []
    in_private, _, p_value = scanned.excess()["arith"]
    assert in_private >= count
    refusal = check(setup, text)
    if count < 50:  # 10 of 10 neighbours private: P = q^10, about 0.002 - not beyond 1e-4
        assert refusal is None and p_value > 1e-4
    else:
        assert refusal is not None and refusal.rule == "private_data_in_training"
        assert p_value < 1e-10
        assert re.fullmatch(
            r"arith: \d+ of \d+ items that equal a tier item but for its "
            r"entity match private ones \(P = .+ by chance\)",
            refusal.detail,
        )


def test_honest_augmentation_stays_within_chance(setup: Setup, tmp_path: Path) -> None:
    rng = random.Random(11)
    fresh = [_bench.arith_item(rng, DataTier.TRAIN) for _ in range(3000)]
    in_private, neighbours, p_value = report(setup, qa(fresh), tmp_path).excess()["arith"]
    assert neighbours > 100 and 0 < in_private < neighbours  # coincidences happen, at chance
    assert p_value > 0.01
