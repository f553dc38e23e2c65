"""The ``rsilab`` command line (Typer + Rich), one module per command group.

Every command is listed in the README's table and documented, generated from this app, in
docs/reference/commands.md (built by ``make docs``). Every command accepts ``--lab DIR`` (default
``$RSILAB_LAB``, else ``./.rsilab``).

Exit codes, the same for every command (``EXIT_CODES_HELP`` in ``_common``): 0 done; 1 a
runtime failure or a campaign that stopped on an error; 2 a usage error (``error: <message>``
and ``hint: <hint>`` on stderr, no traceback); 3 a verification failure (``rsilab verify``);
74 the disk refused a write (full, over quota, read-only: ``errors.WriteRefused``); 130
interrupted (Ctrl-C).

JSON output (``call``, ``tools --json``, ``schema``, ``verify --json``) is plain JSON, never
Rich markup, so it parses when piped.
"""

from rsilab.cli._app import app, main

__all__ = ["app", "main"]
