"""``python -m rsilab.mcp``: serve the Experiment OS over MCP on stdio (``rsilab mcp`` does too).

Only MCP messages go to stdout; logs and errors go to stderr. A problem found before serving
(no lab, no campaign) is printed as one line with its hint, and the exit status is 2.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from rsilab.errors import UserError
from rsilab.mcp.server import run_stdio_server
from rsilab.records import Role


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: role, campaign, workspace, actor and lab."""
    parser = argparse.ArgumentParser(
        prog="python -m rsilab.mcp", description="Serve the Experiment OS tools over MCP (stdio)."
    )
    parser.add_argument("--role", required=True, choices=[str(r) for r in Role])
    parser.add_argument("--campaign", help="campaign id or 'latest' (agent roles need one)")
    parser.add_argument("--workspace", type=Path, help="the only folder path arguments may name")
    parser.add_argument("--actor", help="name recorded in the ledger (default: mcp-ROLE)")
    parser.add_argument("--lab", type=Path, help="lab folder (default: $RSILAB_LAB or ./.rsilab)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the server; 0 when the client disconnects, 2 for a problem the user can fix."""
    args = parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    role = Role(args.role)
    try:
        run_stdio_server(args.lab, role, args.campaign, args.workspace, args.actor or f"mcp-{role}")
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
