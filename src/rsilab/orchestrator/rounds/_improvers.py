"""Who improves in an evolution's rounds: the ``--improver`` specs and the harness check.

- ``self``: the lineage head's harness, each round the head that round starts from (RSI-Env's
  *Self*: the accepted system improves itself next round);
- ``teacher``: the starting system's harness, frozen as it was at round 1, every round;
- ``teacher:builtin``: rsilab's built-in research policy;
- ``teacher:openai:MODEL``, ``teacher:anthropic:MODEL``: rsilab's LLM agents.

A harness improver is its harness's ``improve`` entry point, run in the sandbox; rsilab never
imports its code.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from rsilab.errors import UserError
from rsilab.records import SystemVersion
from rsilab.sandbox.owners import owned_prefix
from rsilab.store import Lab
from rsilab.tasks import Manifest, ManifestError, Task, load_manifest

SPECS_HINT = (
    "use --improver self, teacher, teacher:builtin, teacher:openai:MODEL or teacher:anthropic:MODEL"
)


class ImproverKind(StrEnum):
    """Who acts: a system's harness (``self``, ``teacher``) or one of rsilab's runners."""

    SELF = "self"
    TEACHER = "teacher"
    BUILTIN = "builtin"
    LLM = "llm"

    @property
    def is_harness(self) -> bool:
        """True when a version's harness acts through its ``improve`` entry point."""
        return self in (ImproverKind.SELF, ImproverKind.TEACHER)


@dataclass(frozen=True)
class ImproverSpec:
    """A parsed ``--improver``: its kind, and for an LLM teacher the agents spec."""

    text: str
    kind: ImproverKind
    agents: str = ""
    """``openai:MODEL`` or ``anthropic:MODEL`` for an LLM teacher; else ``builtin`` or ''."""

    def describe(self, version: SystemVersion | None = None) -> str:
        """The improver in words, naming the version whose harness acts where one does."""
        if version is not None:
            return f"{self.kind}: {version.label} {version.id}"
        if self.kind is ImproverKind.BUILTIN:
            return "teacher: builtin policy"
        return f"teacher: {self.agents}"


def parse_improver(text: str) -> ImproverSpec:
    """The spec ``text`` names.

    Raises:
        UserError: not one of the specs (the hint lists them).
    """
    spec = text.strip()
    if spec in ("self", "teacher"):
        return ImproverSpec(spec, ImproverKind(spec))
    head, _, rest = spec.partition(":")
    if head == "teacher" and rest == "builtin":
        return ImproverSpec(spec, ImproverKind.BUILTIN, "builtin")
    provider, _, model = rest.partition(":")
    if head == "teacher" and provider in ("openai", "anthropic") and model.strip():
        return ImproverSpec(spec, ImproverKind.LLM, rest)
    raise UserError(f"--improver {text!r} is not an improver rsilab knows", SPECS_HINT)


def version_manifest(lab: Lab, version: SystemVersion) -> Manifest:
    """The manifest of ``version``'s harness, read from the artifact store.

    Raises:
        ManifestError: the stored harness has no usable ``harness.toml``.
    """
    with tempfile.TemporaryDirectory(prefix=owned_prefix("manifest")) as tmp:
        tree = lab.artifacts.materialize(version.harness_sha256, Path(tmp) / "h", "tree")
        return load_manifest(tree)


def require_improve(manifest: Manifest | None, spec: ImproverSpec, whose: str) -> None:
    """Refuse a harness improver whose harness declares no ``improve`` entry point.

    Raises:
        UserError: saying whose harness it is, and naming a teacher that needs none.
    """
    if manifest is not None and manifest.improves:
        return
    why = "declares no improve entry point" if manifest is not None else "has no usable manifest"
    raise UserError(
        f"--improver {spec.text}: {whose} harness {why}, so it cannot act as the improver",
        "use --improver teacher:builtin (rsilab's built-in policy) or "
        "--improver teacher:openai:MODEL, or give the harness an `improve` command in "
        "harness.toml",
    )


def starting_manifest(lab: Lab, task: Task, head: SystemVersion | None) -> Manifest | None:
    """The manifest of the system round 1 starts from: the head, else the task's harness
    (before its baseline); None where it cannot be read."""
    try:
        if head is None:
            return load_manifest(task.harness)
        return version_manifest(lab, head)
    except ManifestError:
        return None
