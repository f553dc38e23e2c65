"""What a role definition is, and the rules every role's text ends with."""

from __future__ import annotations

from dataclasses import dataclass

from rsilab.records import Role

TOOL_RULES = """\
How your tools work: every call is checked against your role and recorded in the lab's ledger; \
you act on the lab only through them. A failed call returns a JSON error naming the argument at \
fault and what was expected: correct it and go on. Each tool result ends with one line \
{"budget_left": ...} giving the wall seconds, tokens, turns (and experiments) you have left. \
When that line says "wrap_up", start nothing new: record your state and end your step. A reply \
without tool calls ends your step, so call tools until your work for the step is done."""


@dataclass(frozen=True)
class RoleDefinition:
    """A role of the research loop and the text that first orients an agent in it.

    The text here is only the seed of version 1: agents are driven by the stored
    :class:`~rsilab.records.Orientation` (see ``ensure_role_orientations``), which later
    campaigns may revise.
    """

    role: Role
    text: str

    @property
    def orientation_name(self) -> str:
        """Name of the role's Orientation records: ``role:<role>``."""
        return f"role:{self.role}"
