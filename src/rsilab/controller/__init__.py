"""The Host Controller: what counts.

It alone writes counted scores. :class:`HostController` evaluates a task's initial system
(``baseline``), records proposals (``propose``) and judges them (``judge``): guards, re-training
with its own seeds, private evaluation, the acceptance rule and a compare-and-swap on the
lineage. Modules: ``evaluation`` (re-train and score), ``acceptance`` (the rule, on the
intervals of :mod:`rsilab.stats`), ``guards`` (what is checked before a candidate runs),
``content`` (the content guard: private items and raw sources in training data, joining
``unpack`` for containers, ``readers`` and ``safe_pickle`` for serialisations, ``overlap``
for text and ``numeric`` for near-duplicate rows), ``model_use`` (the seed and model checks),
``jobs`` (recorded jobs, their reuse, and model provenance), ``blame`` (whether a failed
controller job is the candidate's failure or the infrastructure's), ``lineage`` (versions,
labels, rollback), ``settings`` (what each setting allows), ``gc`` (blob garbage collection
with tombstones).
"""

from rsilab.controller.acceptance import Decision, decide
from rsilab.controller.blame import EvaluationFault
from rsilab.controller.evaluation import Recipe, SystemEvaluator, SystemInvalid, public_data
from rsilab.controller.host import HostController
from rsilab.controller.lineage import find_lineage, lineage_versions, require_lineage, rollback
from rsilab.controller.settings import SETTINGS, SettingRules, rules_for

__all__ = [
    "SETTINGS",
    "Decision",
    "EvaluationFault",
    "HostController",
    "Recipe",
    "SettingRules",
    "SystemEvaluator",
    "SystemInvalid",
    "decide",
    "find_lineage",
    "lineage_versions",
    "public_data",
    "require_lineage",
    "rollback",
    "rules_for",
]
