"""The dispatcher: the one door through which every tool call passes.

Order of checks for ``ExperimentOS.call``: known tool -> role allowed -> arguments valid ->
guards -> tool body -> one ledger event (with the records the body staged, atomically).
Nothing raises out of :meth:`ExperimentOS.call` except ``KeyboardInterrupt``/``SystemExit``:
every failure is returned as a :class:`~rsilab.errors.ToolError` in the result and recorded as
an event; refusals by role or guard also record a :class:`~rsilab.records.ProtocolFlag`.

A message an MCP transport refused before it could become a call (too long, too deep, not
JSON...: :mod:`rsilab.mcp.wire`) is recorded here too, by :meth:`ExperimentOS.refused_message`:
one denied event and one flag, as for a guard's refusal, so every message an agent sends
leaves a trace in the ledger.
"""

from __future__ import annotations

import difflib
import json
import logging
import math
import reprlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from rsilab.errors import ConflictError, NotFoundError, RsilabError, ToolError, UserError
from rsilab.expos import policy
from rsilab.expos.context import CallContext, ToolEnv
from rsilab.expos.guards import GuardRefusal, resolve_workspace_path
from rsilab.expos.registry import Tool, ToolRegistry
from rsilab.records import EventDraft, FlagStage, Outcome, ProtocolFlag, Record, Resources, Role
from rsilab.store.artifacts import ArtifactStore
from rsilab.store.base import Store
from rsilab.store.ledger import args_digest

if TYPE_CHECKING:
    from rsilab.expos.services import LabServices

log = logging.getLogger(__name__)

MAX_ARG_DEPTH = 64
"""How deeply argument values may nest (records are serialised with a bounded depth)."""
MESSAGE_REFUSED = "mcp_message_refused"
"""The action of the event, and the rule of the flag, recording an MCP message refused at
the wire (:meth:`ExperimentOS.refused_message`)."""
MAX_PROBLEM_CHARS = 500
"""The longest problem text a refused message's event and flag keep."""
_MAX_JSON_INT = 2**53 - 1  # beyond this, canonical JSON (RFC 8785) cannot represent an integer


def _json_problem(value: Any) -> str | None:
    """Why ``value`` cannot be kept as canonical JSON in a record or event; None if it can."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_ARG_DEPTH:
            return f"it nests deeper than {MAX_ARG_DEPTH} levels"
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "it holds text that is not valid Unicode (a lone surrogate)"
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int) and abs(item) > _MAX_JSON_INT:
            return f"it holds an integer beyond +/-{_MAX_JSON_INT}"
        elif isinstance(item, float) and not math.isfinite(item):
            return "it holds NaN or infinity"
        elif isinstance(item, dict):
            if not all(isinstance(k, str) for k in item):
                return "it has an object key that is not text"
            stack.extend((x, depth + 1) for x in (*item.keys(), *item.values()))
        elif isinstance(item, list | tuple):
            stack.extend((x, depth + 1) for x in item)
    return None


def _label(name: Any) -> str:
    """A tool name as messages and the ledger show it: valid, bounded text, whatever was sent."""
    if isinstance(name, str) and _json_problem(name) is None:
        return name
    return reprlib.repr(name)


@dataclass(frozen=True)
class ToolResult:
    """Outcome of one call: ``value`` on success, ``error`` otherwise; ``seq`` of its event."""

    tool: str
    value: dict[str, Any] | None
    error: ToolError | None
    seq: int | None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form: the value, or the error payload."""
        if self.error is not None:
            return self.error.to_dict()
        return self.value or {}


def _expected(model: type[BaseModel], field: str) -> str | None:
    """A short description of what a field accepts, from the JSON schema."""
    prop = model.model_json_schema().get("properties", {}).get(field.split(".")[0])
    if not isinstance(prop, dict):
        return None
    if "enum" in prop:
        return "one of " + ", ".join(map(str, prop["enum"]))
    if "type" in prop:
        return str(prop["type"])
    if "anyOf" in prop:
        return " or ".join(str(p.get("type", p.get("$ref", "?"))) for p in prop["anyOf"])
    if "$ref" in prop:
        return "an object (see the tool's schema)"
    return None


def validation_error(model: type[BaseModel], exc: ValidationError) -> ToolError:
    """Turn a pydantic error into a ToolError naming the first bad field and what it expects."""
    errors = exc.errors(include_url=False, include_input=False)
    # An unknown argument usually explains a missing one (a typo), so name it first.
    errors.sort(key=lambda e: e["type"] != "extra_forbidden")
    first = errors[0]
    field = ".".join(str(p) for p in first["loc"]) or None
    details = [
        {"field": ".".join(str(p) for p in e["loc"]), "problem": e["msg"]} for e in errors[:10]
    ]
    expected = _expected(model, field) if field else None
    where = f"argument {field!r}: " if field else ""
    if first["type"] == "extra_forbidden":
        expected = "only these arguments: " + ", ".join(model.model_fields)
        where = f"unknown argument {field!r}: "
    return ToolError(
        "invalid_arguments",
        f"{where}{first['msg']}",
        field=field,
        expected=expected,
        details=details,
    )


class ExperimentOS:
    """Tool registry + permissions + guards + ledger over one lab."""

    def __init__(
        self,
        store: Store,
        artifacts: ArtifactStore,
        registry: ToolRegistry,
        services: LabServices | None = None,
    ) -> None:
        self.store = store
        self.artifacts = artifacts
        self.registry = registry
        self.services = services

    def tools_for(self, role: Role) -> list[Tool]:
        """The tools ``role`` may call, in registry order."""
        return [t for t in self.registry.all() if policy.may_call(role, t.name)]

    def call(self, ctx: CallContext, name: str, args: Any = None) -> ToolResult:
        """Run one tool call end to end; never raises for bad input (see module docstring)."""
        started = time.perf_counter()
        flag: ProtocolFlag | None = None
        env: ToolEnv | None = None
        try:
            tool = self._lookup(name)
            if not policy.may_call(ctx.role, tool.name):
                raise GuardRefusal(
                    rule="tool_not_allowed_for_role",
                    stage=FlagStage.ACCESS,
                    message=f"the {ctx.role} role may not call {tool.name!r}",
                    code="permission_denied",
                )
            # the environment first: a misplaced workspace is refused before any path argument
            # is resolved, so a call cannot learn whether a file in the lab exists
            env = ToolEnv(ctx, self.store, self.artifacts, lab_services=self.services)
            kwargs = self._validate(env, tool, args)
            value = tool.fn(env, **kwargs)
            json.dumps(value)  # a tool must return JSON; fail here, not in a client
            error: ToolError | None = None
        except GuardRefusal as refusal:
            error, value = refusal, None
            flag = self._flag(ctx, name, refusal)
        except ToolError as exc:
            error, value = exc, None
        except Exception as exc:  # the dispatcher's promise: a result, never a crash
            error, value = self._convert(name, exc), None
        writes: list[Record] = list(env.writes) if env is not None and error is None else []
        if flag is not None:
            writes = [flag]
        return self._record(ctx, name, args, value, error, writes, started)

    def refused_message(self, ctx: CallContext, problem: str) -> int:
        """Record one MCP message refused at the wire for ``ctx``'s caller; its event's seq.

        Commits one event (action :data:`MESSAGE_REFUSED`, outcome denied, ``problem`` in its
        error as code ``message_refused``) with one blocked :class:`ProtocolFlag` at the access
        stage under the same rule, both naming ``ctx``'s actor, role and campaign. ``problem``
        is the wire's one line about what was wrong (cut to :data:`MAX_PROBLEM_CHARS`); the
        message's own bytes are never stored (they may be megabytes, or not text at all).

        Raises:
            RsilabError: the ledger could not take the event (nothing was written); the
                transport logs it and still answers the client with its JSON-RPC error.
        """
        # the problem quotes at most a field name of the message; made storable whatever it holds
        text = " ".join(problem.split())[:MAX_PROBLEM_CHARS] or "refused at the wire"
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
        error = ToolError("message_refused", text)
        flag = ProtocolFlag(
            campaign_id=ctx.campaign_id,
            stage=FlagStage.ACCESS,
            rule=MESSAGE_REFUSED,
            detail=f"an MCP message was refused at the wire: {text}",
            actor=ctx.actor,
            role=str(ctx.role),
            blocked=True,
        )
        draft = EventDraft(
            actor=ctx.actor,
            role=str(ctx.role),
            action=MESSAGE_REFUSED,
            campaign_id=ctx.campaign_id,
            outcome=Outcome.DENIED,
            error=error.to_dict(),
            detail="an MCP message was refused before it became a call",
        )
        return self.store.commit(draft, [flag]).seq

    def _lookup(self, name: Any) -> Tool:
        tool = self.registry.get(name) if isinstance(name, str) else None
        if tool is None:
            close = difflib.get_close_matches(_label(name), self.registry.names(), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ToolError(
                "unknown_tool",
                f"there is no tool {_label(name)!r}{hint}",
                field="name",
                expected="one of the listed tool names",
            )
        return tool

    def _validate(self, env: ToolEnv, tool: Tool, args: Any) -> dict[str, Any]:
        if args is None:
            args = {}
        if isinstance(args, str | bytes):
            try:  # LLMs often send the arguments object as a JSON string
                args = json.loads(args or "{}")
            except (ValueError, RecursionError):
                raise ToolError(
                    "invalid_arguments",
                    "arguments are not valid JSON (or nest too deeply)",
                    expected="a JSON object of named arguments",
                ) from None
        if not isinstance(args, dict):
            raise ToolError(
                "invalid_arguments",
                f"arguments must be an object, got {type(args).__name__}",
                expected="a JSON object of named arguments",
            )
        try:
            parsed = tool.args_model.model_validate(args)
        except ValidationError as exc:
            raise validation_error(tool.args_model, exc) from None
        kwargs = {name: getattr(parsed, name) for name in tool.args_model.model_fields}
        for name, value in kwargs.items():
            problem = _json_problem(value)
            if problem is not None:  # it would fail to be stored, after the tool had run
                raise ToolError(
                    "invalid_arguments",
                    f"argument {name!r}: {problem}",
                    field=name,
                    expected="JSON values: valid text, finite numbers, integers within 2^53, "
                    f"nested at most {MAX_ARG_DEPTH} levels",
                )
        for name, marker in tool.path_args:
            if kwargs.get(name) is not None:
                kwargs[name] = resolve_workspace_path(
                    env.workspace(), str(kwargs[name]), name, must_exist=marker.must_exist
                )
        return kwargs

    def _flag(self, ctx: CallContext, tool: str, refusal: GuardRefusal) -> ProtocolFlag:
        return ProtocolFlag(
            campaign_id=ctx.campaign_id,
            stage=refusal.stage,
            rule=refusal.rule,
            detail=refusal.message,
            actor=ctx.actor,
            role=str(ctx.role),
            tool=tool if isinstance(tool, str) else None,
            blocked=True,
        )

    @staticmethod
    def _convert(name: Any, exc: Exception) -> ToolError:
        if isinstance(exc, NotFoundError):
            return ToolError("not_found", str(exc))
        if isinstance(exc, ConflictError):
            return ToolError("conflict", str(exc))
        if isinstance(exc, ValidationError):
            return ToolError("invalid_arguments", f"a value was out of range: {exc.errors()[0]}")
        if isinstance(exc, UserError):
            return ToolError("tool_failed", exc.message)
        if isinstance(exc, RsilabError):
            return ToolError("tool_failed", str(exc))
        log.exception("tool %r failed with an unexpected error", name)
        return ToolError(
            "internal_error",
            f"the tool failed unexpectedly ({type(exc).__name__}); this is a bug in rsilab",
        )

    def _record(
        self,
        ctx: CallContext,
        name: Any,
        args: Any,
        value: dict[str, Any] | None,
        error: ToolError | None,
        writes: list[Record],
        started: float,
    ) -> ToolResult:
        outcome = Outcome.OK
        if error is not None:
            outcome = Outcome.DENIED if isinstance(error, GuardRefusal) else Outcome.ERROR
        draft = EventDraft(
            actor=ctx.actor,
            role=str(ctx.role),
            action="tool_call",
            campaign_id=ctx.campaign_id,
            tool=_label(name),
            args_digest=args_digest(args),
            outcome=outcome,
            error=error.to_dict() if error is not None else None,
            cost=Resources(wall_s=round(time.perf_counter() - started, 6)),
        )
        try:
            event = self.store.commit(draft, writes)
        except ConflictError as exc:  # a concurrent writer won the race: report, record
            failure = ToolError("conflict", str(exc))
            draft = draft.model_copy(update={"outcome": Outcome.ERROR, "error": failure.to_dict()})
            return self._record_failure(draft, _label(name), failure)
        except RsilabError as exc:
            return ToolResult(_label(name), None, ToolError("lab_unavailable", str(exc)), None)
        return ToolResult(_label(name), value, error, event.seq)

    def _record_failure(self, draft: EventDraft, name: str, failure: ToolError) -> ToolResult:
        try:
            event = self.store.commit(draft)
        except RsilabError as exc:
            return ToolResult(name, None, ToolError("lab_unavailable", str(exc)), None)
        return ToolResult(name, None, failure, event.seq)
