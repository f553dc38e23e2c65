"""Job tools: run train, dev-eval and fold-eval jobs of an experiment in the sandbox, follow
them, bring the experiment up to date with them and compare their per-sample scores.

The tools are the public face; the modules behind them are private: ``_run`` (``run_job``),
``_follow`` (``job_status``, ``job_logs``, ``cancel_job``), ``_results``
(``state_sync_results``, ``compare_eval_samples``); ``_args`` checks what ``run_job`` is given,
``_work`` plans and runs a train or dev-eval job, ``_folds`` and ``_foldwork`` a fold
evaluation, and ``_records`` computes the views and records the tools share. What a job
produces is written by the controller's :class:`~rsilab.controller.jobs.JobRecorder` (see
``_run`` for why it is not staged with the call).
"""

# Importing registers the tools; the order of registration is the order agents see them
# listed in, so these imports are kept in it rather than sorted.
from rsilab.expos.tools.jobs._run import run_job

# isort: split
from rsilab.expos.tools.jobs._follow import cancel_job, job_logs, job_status

# isort: split
from rsilab.expos.tools.jobs._results import compare_eval_samples, state_sync_results

__all__ = [
    "cancel_job",
    "compare_eval_samples",
    "job_logs",
    "job_status",
    "run_job",
    "state_sync_results",
]
