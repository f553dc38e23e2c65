"""The built-in tools, one module per category; importing this package registers them all."""

from rsilab.expos.tools import data, discovery, evidence, execution, review
from rsilab.expos.tools._base import REGISTRY

__all__ = ["REGISTRY", "data", "discovery", "evidence", "execution", "review"]
