"""The ``rsilab`` command line (Typer + Rich), one module per command group.

Commands: ``init``, ``campaign new|list``, ``tools``, ``call``, ``log``, ``show``, ``verify``,
``schema``, ``mcp``, ``runtime install|show``, ``doctor``, ``task list|check``, ``baseline``,
``versions``, ``rollback``, ``gc``, ``run``, ``resume``, ``guide``, ``report``, ``agent``.
Every command accepts ``--lab DIR``
(default ``$RSILAB_LAB``, else ``./.rsilab``).

Exit codes:

- 0: ok
- 1: user error; ``error: <message>`` and ``hint: <hint>`` on stderr, no traceback
- 2: bad command line (usage error from Typer/Click)
- 3: ledger verification failed (``rsilab verify``)
- 4: the called tool returned an error (``rsilab call``; the error JSON is still printed)

JSON output (``call``, ``tools --json``, ``schema``, ``verify --json``) is plain JSON, never
Rich markup, so it parses when piped.
"""

from rsilab.cli._app import app, main

__all__ = ["app", "main"]
