"""Code variants: named changes to a harness's files that a task offers as candidate ideas.

A task may declare :class:`CodeVariant` s besides its knobs: each is a list of exact text
replacements in the harness's files (``old`` occurs once in the file at ``path`` and becomes
``new``). They are the task author's list of code ideas (a faster kernel, a learning-rate
warm-up), for improvers that do not write code themselves: the built-in policy searches them
like a choice knob (:data:`VARIANT_KNOB`), applying one to its workspace before each run. An
LLM improver edits code itself and never needs them; the variants are not in the harness, so
they are not shown in a workspace.

Applying is idempotent on a system that already holds the variant (every ``new`` present once,
no ``old`` left): an accepted variant is part of the next head, so asking for it again changes
nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import Field, model_validator

from rsilab.records import Model

VARIANT_KNOB = "code_variant"
"""The name under which the built-in policy searches a task's variants (a choice of
:data:`HEAD` and the variants' names); a task with variants may not have a knob of that name."""
HEAD = "head"
"""The choice of :data:`VARIANT_KNOB` that leaves the system's code as it is."""


class VariantError(ValueError):
    """A variant does not apply to the files given (what is wrong and where)."""


class CodeEdit(Model):
    """One exact replacement in one harness file."""

    path: str = Field(min_length=1, description="The file, relative to the harness folder.")
    old: str = Field(min_length=1, description="Text found exactly once in the file.")
    new: str = Field(description="What replaces it.")

    @model_validator(mode="after")
    def _relative(self) -> CodeEdit:
        parts = self.path.replace("\\", "/").split("/")
        if self.path.startswith("/") or ".." in parts:
            raise ValueError(f"edit path {self.path!r} must stay inside the harness folder")
        if self.old == self.new:
            raise ValueError(f"an edit of {self.path!r} must change something")
        return self


class CodeVariant(Model):
    """A named code change: one or more edits, applied together."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,39}$", description="Unique within the task.")
    description: str = Field(default="", description="What it changes, in a line.")
    edits: list[CodeEdit] = Field(min_length=1, description="The replacements, in order.")

    @model_validator(mode="after")
    def _not_head(self) -> CodeVariant:
        if self.name == HEAD:
            raise ValueError(f"{HEAD!r} names the unchanged system; pick another variant name")
        return self


def check_variants(variants: Sequence[CodeVariant], knobs: Sequence[str]) -> None:
    """Raise ValueError when variant names repeat or a knob takes :data:`VARIANT_KNOB`."""
    names = [v.name for v in variants]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"code variant names must be unique; repeated: {', '.join(dupes)}")
    if variants and VARIANT_KNOB in knobs:
        raise ValueError(f"a task with code variants may not have a knob named {VARIANT_KNOB!r}")


def apply_variant(variant: CodeVariant, read: Callable[[str], str]) -> dict[str, str]:
    """The new text of every file ``variant`` changes, reading each file once with ``read``
    (path -> text). A file that already holds the variant's ``new`` text once and no ``old``
    is left as it is (see the module docstring).

    Raises:
        VariantError: an ``old`` text occurs zero or several times (and the file does not hold
            the variant already): the variant does not fit this system's code.
    """
    texts: dict[str, str] = {}
    for edit in variant.edits:
        if edit.path not in texts:
            texts[edit.path] = read(edit.path)
        text = texts[edit.path]
        found = text.count(edit.old)
        if found == 1:
            texts[edit.path] = text.replace(edit.old, edit.new, 1)
        elif found == 0 and edit.new and text.count(edit.new) == 1:
            continue  # applied already: this system holds the variant
        else:
            where = "not found" if found == 0 else f"found {found} times"
            raise VariantError(
                f"code variant {variant.name!r} does not fit {edit.path}: the text it replaces "
                f"is {where}"
            )
    return texts
