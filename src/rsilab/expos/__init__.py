"""The Experiment OS: the only door agents have. Tools, roles, guards, one ledger event a call."""

from rsilab.expos import policy
from rsilab.expos.campaigns import find_campaign, open_campaign
from rsilab.expos.context import CallContext, ToolEnv
from rsilab.expos.dispatch import ExperimentOS, ToolResult
from rsilab.expos.guards import GuardRefusal, PathArg
from rsilab.expos.registry import Category, Tool, ToolRegistry


def default_registry() -> ToolRegistry:
    """The registry holding every built-in tool."""
    from rsilab.expos.tools import REGISTRY

    return REGISTRY


__all__ = [
    "CallContext",
    "Category",
    "ExperimentOS",
    "GuardRefusal",
    "PathArg",
    "Tool",
    "ToolEnv",
    "ToolRegistry",
    "ToolResult",
    "default_registry",
    "find_campaign",
    "open_campaign",
    "policy",
]
