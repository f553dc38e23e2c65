"""The model-use checks: after the controller's evaluation, is the trained model really used?

:func:`model_use_check` reads a candidate's evaluation and its parent version's records and
names the first check it fails:

- ``model_ignored``: the model-use probe found predict answering alike with the model
  emptied (checked first: such a predict also answers alike under every seed);
- ``seed_ignored``, by either of two clauses: the candidate's controller seeds all gave the
  same **predictions** on every private sample while the parent's evaluation shows that its
  seeds matter (a private sample scored differently under two of its seeds); or they all gave
  one model file while the parent's seeds gave different ones. The acceptance rule relies on
  the seed spread; with one answer for every seed the gain is a single draw the author picked
  (a lucky seed pinned in ``train.py``). The predictions clause catches a model made to differ
  per seed (the seed written into it) that answers alike; a deterministic parent (its scores
  never vary) or a learner deterministic by design whose predict draws on the seed (the
  parent's models alike too) is never flagged. A candidate that trains nothing (no model
  under some seed) is not judged by it.

Neither message holds a private number.
"""

from __future__ import annotations

from rsilab.controller.evaluation import PRIVATE_TIERS, SystemEvaluation
from rsilab.controller.lineage import version_evaluations
from rsilab.records import Candidate, FlagStage, SystemVersion
from rsilab.store.base import StoreReader

__all__ = ["model_use_check", "seeds_matter"]


def seeds_matter(store: StoreReader, version: SystemVersion) -> bool:
    """Whether ``version``'s own evaluation shows a private sample scored differently under
    two of its seeds (so its predictions do vary with the training seed)."""
    for tier in PRIVATE_TIERS:
        for evaluation in version_evaluations(store, version, tier).values():
            scores: dict[str, set[float]] = {}
            for sample in evaluation.samples:
                scores.setdefault(sample.sample_id, set()).add(sample.score)
            if any(len(values) > 1 for values in scores.values()):
                return True
    return False


def model_use_check(
    store: StoreReader, candidate: Candidate, result: SystemEvaluation
) -> tuple[FlagStage, str, str, str] | None:
    """(stage, rule, detail, public note) of the first model-use check ``result`` fails.

    ``model_ignored`` comes first: a predict that ignores its model also answers alike under
    every seed, and the probe names the cause."""
    if result.model_ignored:
        detail = (
            "predict's outputs do not depend on the trained model: with the model file "
            "emptied it gave the same output for every accept-tier sample"
        )
        public = (
            "predict does not use the model the controller trained (its outputs stayed the "
            "same with the model file emptied)"
        )
        return FlagStage.EVALUATION, "model_ignored", detail, public
    seeds = len(result.seeds)
    if seeds >= 2 and all(result.models):  # a system that trains nothing ignores no seed
        parent = store.get_as(candidate.parent_version_id, SystemVersion)
        predictions, models = result.predictions, result.models
        alike = len(predictions) == seeds and all(predictions) and len(set(predictions)) == 1
        parent_models = {m for m in parent.model_sha256s if m}
        what = ""
        if alike and seeds_matter(store, parent):
            what = "the same predictions on every private sample"
            why = "the parent's scores vary across its seeds"
        elif len(set(models)) == 1 and len(parent_models) >= 2:
            what = "one model"
            why = f"the parent's seeds gave {len(parent_models)} different models"
        if what:
            detail = f"training ignored the controller's seed: its {seeds} seeds gave {what}, {why}"
            public = (
                f"training ignored the controller's seed (every seed gave {what}, while the "
                "parent's seeds give different results): train must use --seed"
            )
            return FlagStage.TRAINING, "seed_ignored", detail, public
    return None
