"""The built-in tools, one module per category; importing this package registers them all."""

from rsilab.expos.tools import (
    candidates,
    data,
    discovery,
    evidence,
    execution,
    jobs,
    memory,
    review,
    team,
    workspace,
)
from rsilab.expos.tools._base import REGISTRY

__all__ = [
    "REGISTRY",
    "candidates",
    "data",
    "discovery",
    "evidence",
    "execution",
    "jobs",
    "memory",
    "review",
    "team",
    "workspace",
]
