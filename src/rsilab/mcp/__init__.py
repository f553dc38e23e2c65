"""The Experiment OS tools served over MCP (stdio); see :mod:`rsilab.mcp.server`."""

from rsilab.mcp.server import build_server, run_stdio_server

__all__ = ["build_server", "run_stdio_server"]
