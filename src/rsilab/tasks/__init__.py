"""What a task is: the spec, its loaders, scorers, splits and the harness contract.

Public names are listed in ``__all__``; import them from here (``from rsilab.tasks import
Task``), never from the private modules.

How a built-in task registers itself: add a subpackage ``rsilab/tasks/builtin/<name>/`` whose
``__init__.py`` defines a function named ``<name>`` decorated with ``@task`` that returns a
:class:`Task` (its ``harness`` a folder inside that subpackage, listed as package data in
``pyproject.toml``). The registry imports every subpackage of ``rsilab.tasks.builtin`` the
first time :func:`get_task` or :func:`task_names` is called; nothing else needs editing.
"""

from rsilab.store.secret import SECRET_FILE
from rsilab.tasks._budget import Budget, parse_budget, parse_count, parse_duration
from rsilab.tasks._check import (
    Problem,
    check_knob_values,
    check_run,
    check_task,
    check_toml,
    check_variants,
)
from rsilab.tasks._code_scorer import PROGRAM_LIMITS, Program, ProgramLimits, run_programs
from rsilab.tasks._conditions import active_names, deciding_first, is_active, with_deciding
from rsilab.tasks._data_places import data_files, data_places
from rsilab.tasks._drivers import (
    Driver,
    driver_names,
    get_driver,
    register_driver,
    task_predict_spec,
)
from rsilab.tasks._experiment import ExperimentFailed, Outcome, run_experiment
from rsilab.tasks._harness import (
    DATA_DIR,
    MANIFEST,
    MODEL_SUFFIX,
    HarnessOutputError,
    Manifest,
    ManifestError,
    encode_inputs,
    load_manifest,
    parse_predictions,
    predict_argv,
    predict_spec,
    train_argv,
    train_spec,
)
from rsilab.tasks._init import KINDS as TASK_KINDS
from rsilab.tasks._init import init_task
from rsilab.tasks._limits import CEILINGS as LIMIT_CEILINGS
from rsilab.tasks._limits import CONTROLLER_LIMITS, EXPERIMENT_LIMITS, TaskLimits
from rsilab.tasks._limits import describe as describe_limits
from rsilab.tasks._order import Declared, metric_order, shown_order
from rsilab.tasks._origin import command_argument
from rsilab.tasks._registry import TaskFactory, ensure_builtins, get_task, task, task_names
from rsilab.tasks._samples import (
    TIERS,
    FileSplits,
    GeneratedSplits,
    PoolSplits,
    Sample,
    SampleSource,
)
from rsilab.tasks._scorers import (
    Scored,
    ScoreFn,
    ScorerFamily,
    ScorerInfo,
    ScorerUnavailable,
    chrf_score,
    get_scorer,
    pass_at_k,
    register_batch_scorer,
    register_scorer,
    score_outputs,
    scorer_families,
    scorer_names,
)
from rsilab.tasks._secret import checked_lab_secret, derive_seed, lab_secret
from rsilab.tasks._source import load_ref
from rsilab.tasks._spec import (
    Benchmark,
    Knob,
    KnobCondition,
    KnobType,
    Setting,
    Task,
    Trap,
    TrapKind,
)
from rsilab.tasks._splits import (
    SplitError,
    Splits,
    content_hash,
    make_splits,
    public_draws,
    read_jsonl,
    write_data_dir,
    write_jsonl,
)
from rsilab.tasks._toml import TaskLoadError, load_python, load_task, load_toml
from rsilab.tasks._traps import leaked_final_tier, plant_traps
from rsilab.tasks._variants import (
    HEAD,
    VARIANT_KNOB,
    CodeEdit,
    CodeVariant,
    VariantError,
    apply_variant,
)

__all__ = [
    "CONTROLLER_LIMITS",
    "DATA_DIR",
    "EXPERIMENT_LIMITS",
    "HEAD",
    "LIMIT_CEILINGS",
    "MANIFEST",
    "MODEL_SUFFIX",
    "PROGRAM_LIMITS",
    "SECRET_FILE",
    "TASK_KINDS",
    "TIERS",
    "VARIANT_KNOB",
    "Benchmark",
    "Budget",
    "CodeEdit",
    "CodeVariant",
    "Declared",
    "Driver",
    "ExperimentFailed",
    "FileSplits",
    "GeneratedSplits",
    "HarnessOutputError",
    "Knob",
    "KnobCondition",
    "KnobType",
    "Manifest",
    "ManifestError",
    "Outcome",
    "PoolSplits",
    "Problem",
    "Program",
    "ProgramLimits",
    "Sample",
    "SampleSource",
    "ScoreFn",
    "Scored",
    "ScorerFamily",
    "ScorerInfo",
    "ScorerUnavailable",
    "Setting",
    "SplitError",
    "Splits",
    "Task",
    "TaskFactory",
    "TaskLimits",
    "TaskLoadError",
    "Trap",
    "TrapKind",
    "VariantError",
    "active_names",
    "apply_variant",
    "check_knob_values",
    "check_run",
    "check_task",
    "check_toml",
    "check_variants",
    "checked_lab_secret",
    "chrf_score",
    "command_argument",
    "content_hash",
    "data_files",
    "data_places",
    "deciding_first",
    "derive_seed",
    "describe_limits",
    "driver_names",
    "encode_inputs",
    "ensure_builtins",
    "get_driver",
    "get_scorer",
    "get_task",
    "init_task",
    "is_active",
    "lab_secret",
    "leaked_final_tier",
    "load_manifest",
    "load_python",
    "load_ref",
    "load_task",
    "load_toml",
    "make_splits",
    "metric_order",
    "parse_budget",
    "parse_count",
    "parse_duration",
    "parse_predictions",
    "pass_at_k",
    "plant_traps",
    "predict_argv",
    "predict_spec",
    "public_draws",
    "read_jsonl",
    "register_batch_scorer",
    "register_driver",
    "register_scorer",
    "run_experiment",
    "run_programs",
    "score_outputs",
    "scorer_families",
    "scorer_names",
    "shown_order",
    "task",
    "task_names",
    "task_predict_spec",
    "train_argv",
    "train_spec",
    "with_deciding",
    "write_data_dir",
    "write_jsonl",
]
