"""MkDocs hooks of the rsilab documentation (``hooks:`` in mkdocs.yml).

- ``on_files``: add the generated reference pages (tools, task.toml, records, commands), made
  from the code at build time so that they cannot drift from it;
- ``on_page_markdown``: warn, which fails the strict build, on a stale reference (see
  ``check_refs``);
- ``on_page_content``: show the Sphinx roles some docstrings use (``:class:`~a.B```) as code.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import check_refs
import gen_cli
import gen_records
import gen_task_toml
import gen_tools
from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.rsilab")

GENERATED = {
    "reference/tools.md": gen_tools.render,
    "reference/task-toml.md": gen_task_toml.render,
    "reference/records.md": gen_records.render,
    "reference/commands.md": gen_cli.render,
}

_ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):<code>(~?)([^<]*)</code>")


def on_files(files: Files, config: Any) -> Files:
    """Add the generated pages; a hand-written file under the same name is an error."""
    for uri, render in GENERATED.items():
        if files.get_file_from_path(uri) is not None:
            raise ValueError(f"docs/{uri} is generated at build time; delete the file")
        files.append(File.generated(config, uri, content=render()))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Warn about each stale reference on the page."""
    for problem in check_refs.problems(markdown):
        log.warning("%s: stale reference %s", page.file.src_uri, problem)
    return markdown


def _role(match: re.Match[str]) -> str:
    short, target = match.groups()
    return f"<code>{target.rsplit('.', 1)[-1] if short else target}</code>"


def on_page_content(html: str, page: Any, config: Any, files: Files) -> str:
    """``:class:`~a.b.C``` in a docstring reads as ``C`` in code, not as a raw role."""
    return _ROLE.sub(_role, html)
