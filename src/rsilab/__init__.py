"""rsilab: agents improve an AI system through an audited Experiment OS.

The public surface for Python callers; everything else lives in subpackages
(``rsilab.records``, ``rsilab.store``, ``rsilab.tasks``, ``rsilab.expos``, ``rsilab.mcp``,
``rsilab.cli``).
"""

from rsilab.errors import ConflictError, LabError, NotFoundError, RsilabError, ToolError, UserError
from rsilab.expos import CallContext, ExperimentOS, ToolResult, default_registry, open_campaign
from rsilab.records import SCHEMA_VERSION, Role, TaskRef
from rsilab.store import Lab, verify_store
from rsilab.tasks import Task, task

__version__ = "0.1.0"

__all__ = [
    "SCHEMA_VERSION",
    "CallContext",
    "ConflictError",
    "ExperimentOS",
    "Lab",
    "LabError",
    "NotFoundError",
    "Role",
    "RsilabError",
    "Task",
    "TaskRef",
    "ToolError",
    "ToolResult",
    "UserError",
    "__version__",
    "default_registry",
    "open_campaign",
    "task",
    "verify_store",
]
