"""The Experiment OS tools served over MCP: on stdio (:mod:`rsilab.mcp.server`), and on a Unix
socket bound into the sandbox for `rsilab agent` (:mod:`rsilab.mcp.agent_run`)."""

from rsilab.mcp.server import build_server, run_stdio_server

__all__ = ["build_server", "run_stdio_server"]
