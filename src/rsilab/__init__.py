"""rsilab: agents improve an AI system through an audited Experiment OS.

The public surface for Python callers: :func:`run` and :func:`resume` run a campaign as
``rsilab run`` and ``rsilab resume`` do; everything else lives in subpackages
(``rsilab.records``, ``rsilab.store``, ``rsilab.tasks``, ``rsilab.expos``, ``rsilab.mcp``,
``rsilab.cli``).
"""

from rsilab.errors import ConflictError, LabError, NotFoundError, RsilabError, ToolError, UserError
from rsilab.expos import CallContext, ExperimentOS, ToolResult, default_registry, open_campaign
from rsilab.orchestrator.api import resume, run
from rsilab.orchestrator.campaign import (
    AcceptedVersion,
    CampaignResult,
    LeaseHeld,
    Progress,
    StopRequest,
)
from rsilab.records import SCHEMA_VERSION, EndReason, Role, TaskRef
from rsilab.store import Lab, verify_store
from rsilab.tasks import Budget, Task, task

__version__ = "0.1.0"

__all__ = [
    "SCHEMA_VERSION",
    "AcceptedVersion",
    "Budget",
    "CallContext",
    "CampaignResult",
    "ConflictError",
    "EndReason",
    "ExperimentOS",
    "Lab",
    "LabError",
    "LeaseHeld",
    "NotFoundError",
    "Progress",
    "Role",
    "RsilabError",
    "StopRequest",
    "Task",
    "TaskRef",
    "ToolError",
    "ToolResult",
    "UserError",
    "__version__",
    "default_registry",
    "open_campaign",
    "resume",
    "run",
    "task",
    "verify_store",
]
