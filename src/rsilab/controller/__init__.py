"""The Host Controller: what counts.

It alone writes counted scores. :class:`HostController` evaluates a task's initial system
(``baseline``), records proposals (``propose``) and judges them (``judge``): guards, re-training
with its own seeds, private evaluation, the acceptance rule and a compare-and-swap on the
lineage. Modules: ``evaluation`` (re-train and score), ``acceptance`` (the rule, on the
intervals of :mod:`rsilab.stats`), ``overlap`` (private-data guard), ``jobs`` (recorded jobs
and model provenance), ``lineage`` (versions, labels, rollback), ``settings`` (what each
setting allows), ``gc`` (blob garbage collection with tombstones).
"""

from rsilab.controller.acceptance import Decision, decide
from rsilab.controller.evaluation import Recipe, SystemEvaluator, SystemInvalid, public_data
from rsilab.controller.host import HostController
from rsilab.controller.lineage import find_lineage, lineage_versions, require_lineage, rollback
from rsilab.controller.settings import SETTINGS, SettingRules, rules_for

__all__ = [
    "SETTINGS",
    "Decision",
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
