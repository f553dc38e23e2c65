"""Tests of the Experiment OS served over MCP."""
