"""Conditional knobs: a knob that matters only when another knob's value allows it.

Many knobs act only in part of a search space: a learning rate when the model trains at all, a
sampling temperature when the decoding samples, a LoRA rank when LoRA is on. A knob declares
this with ``when`` (:class:`~rsilab.tasks.KnobCondition`: the deciding knob's value is one of a
list, or at least a number). A knob is *active* in a config when it has no condition, or its
condition holds on the deciding knob's value and that knob is itself active (conditions chain).
Searches use it to see that two configs which differ only in inactive knobs are one config
(:func:`active_names`): drawing a new learning rate for a model that does not train runs the
reference again under another name.

A config that lacks a knob runs it at the knob's default (the harness's starting value), so a
missing deciding knob is read at its default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pydantic import JsonValue

if TYPE_CHECKING:
    from rsilab.tasks._spec import Knob


def check_conditions(space: Sequence[Knob]) -> None:
    """``ValueError`` naming every faulty condition at once (joined by "; "): one that names a
    knob not in ``space`` or the knob itself, compares a non-numeric knob with ``at_least``,
    lists a value a choice or bool knob cannot take, and each cycle of conditions."""
    by_name = {k.name: k for k in space}
    problems: list[str] = []
    for knob in space:
        rule = knob.when
        if rule is None:
            continue
        deciding = by_name.get(rule.knob)
        if deciding is None or deciding.name == knob.name:
            what = "itself" if rule.knob == knob.name else f"{rule.knob!r}, not a knob here"
            problems.append(f"knob {knob.name!r}: its condition names {what}")
            continue
        numeric = deciding.type.value in ("float", "int")
        if rule.at_least is not None and not numeric:
            problems.append(
                f"knob {knob.name!r}: at_least needs a numeric knob; {rule.knob!r} is a "
                f"{deciding.type.value} knob (use one_of)"
            )
        if rule.one_of is not None and not numeric:
            allowed = [False, True] if deciding.type.value == "bool" else deciding.choices
            stray = [v for v in rule.one_of if not _among(v, allowed)]
            if stray:
                problems.append(
                    f"knob {knob.name!r}: {rule.knob!r} never takes {stray!r} (one of {allowed!r})"
                )
    cycles: set[frozenset[str]] = set()
    for knob in space:
        seen = [knob.name]
        rule = knob.when
        while rule is not None and rule.knob in by_name and rule.knob != seen[-1]:
            if rule.knob in seen:
                loop = seen[seen.index(rule.knob) :]
                if frozenset(loop) not in cycles:  # each cycle once, from where it was entered
                    cycles.add(frozenset(loop))
                    chain = " -> ".join([*loop, rule.knob])
                    problems.append(f"knobs {chain}: conditions form a cycle")
                break
            seen.append(rule.knob)
            rule = by_name[rule.knob].when
    if problems:
        raise ValueError("; ".join(problems))


def _among(value: JsonValue, allowed: Sequence[JsonValue]) -> bool:
    return any(type(a) is type(value) and a == value for a in allowed)


def is_active(knob: Knob, config: Mapping[str, JsonValue], space: Sequence[Knob]) -> bool:
    """Whether ``knob`` matters in ``config`` (see the module docstring). ``space`` holds the
    deciding knobs (validated by :func:`check_conditions`: no cycle, every name known)."""
    by_name = {k.name: k for k in space}
    current: Knob | None = knob
    while current is not None and current.when is not None:
        deciding = by_name.get(current.when.knob)
        if deciding is None:
            return True  # a condition on a knob outside this space cannot be judged: it matters
        if not current.when.holds(config.get(deciding.name, deciding.default)):
            return False
        current = deciding
    return True


def active_names(config: Mapping[str, JsonValue], space: Sequence[Knob]) -> list[str]:
    """The names of the knobs of ``space`` that matter in ``config``, in ``space``'s order."""
    return [k.name for k in space if is_active(k, config, space)]


def deciding_first(space: Sequence[Knob]) -> list[Knob]:
    """The knobs of ``space`` with every deciding knob before the knobs it decides (by the
    length of their chain of conditions; declaration order within a length), the order in
    which a search draws a config so that each knob's activity is known when it is reached.
    A condition on a knob outside ``space`` ends the chain (as in :func:`is_active`)."""
    by_name = {k.name: k for k in space}

    def chain(knob: Knob) -> int:
        n, rule = 0, knob.when
        while rule is not None and rule.knob in by_name:
            n, rule = n + 1, by_name[rule.knob].when
        return n

    return sorted(space, key=chain)  # sorted is stable: declaration order within a length


def with_deciding(
    names: Sequence[str], config: Mapping[str, JsonValue], space: Sequence[Knob]
) -> list[str]:
    """``names`` plus, for each of them that does not matter in ``config``, every knob along
    its chain of conditions whose value in ``config`` breaks the chain, in ``space``'s order:
    the knobs a search must be free to change from ``config`` for every one of ``names`` to be
    able to act. Searching a learning rate from a config that does not train changes nothing
    unless the number of epochs may change too. Names not in ``space`` are kept as they are."""
    by_name = {k.name: k for k in space}
    wanted = set(names)
    for name in names:
        knob = by_name.get(name)
        while knob is not None and knob.when is not None:
            deciding = by_name.get(knob.when.knob)
            if deciding is None:
                break  # a condition on a knob outside the space: it acts (see is_active)
            if not knob.when.holds(config.get(deciding.name, deciding.default)):
                wanted.add(deciding.name)
            knob = deciding
    order = {k.name: i for i, k in enumerate(space)}
    return sorted(wanted, key=lambda n: (order.get(n, len(order)), n))
