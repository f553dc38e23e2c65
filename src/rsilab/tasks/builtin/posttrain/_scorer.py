"""Scorers for generated text: the controller extracts the answer, never the harness.

- ``number_match``: the first integer in the output equals the target (a number as text).
- ``json_call``: the first JSON object in the output is ``{"name", "arguments"}`` with the
  target's name, exactly the target's argument names, each of the target's JSON type and
  value. A call with the right name but wrong values scores 0 and is valid; text with no
  parsable object is invalid.
- ``short_answer``: the output's first line, lower-cased and stripped of punctuation, equals
  the target's.
- ``choice_letter``: the first of A-D standing alone in the output is the target letter.
"""

from __future__ import annotations

import json
import re

from pydantic import JsonValue

from rsilab.tasks import Sample, Scored, register_scorer

_INT = re.compile(r"-?\d+")
_LETTER = re.compile(r"\b([ABCD])\b")


def _text(sample: Sample, output: JsonValue) -> str | Scored:
    if not isinstance(output, str):
        return Scored(sample.id, 0.0, False, "output is not text")
    return output


@register_scorer("number_match", description="1 when the first integer in the text is the answer.")
def number_match(sample: Sample, output: JsonValue) -> Scored:
    """1 when the first integer in the output equals the target number, else 0."""
    text = _text(sample, output)
    if isinstance(text, Scored):
        return text
    found = _INT.search(text)
    if found is None:
        return Scored(sample.id, 0.0, True, "no number")
    return Scored(sample.id, 1.0 if int(found.group()) == int(str(sample.target)) else 0.0)


def first_object(text: str) -> object:
    """The first JSON object that parses in ``text``, or None."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _same(expected: JsonValue, got: object) -> bool:
    # bool is an int to Python, not to a schema: a type mismatch is a wrong argument
    return type(expected) is type(got) and expected == got


@register_scorer("json_call", description="1 when the first JSON object is the expected call.")
def json_call(sample: Sample, output: JsonValue) -> Scored:
    """1 when the output's first JSON object is the target call (see the module docstring)."""
    text = _text(sample, output)
    if isinstance(text, Scored):
        return text
    call, target = first_object(text), sample.target
    if not isinstance(call, dict) or not isinstance(target, dict):
        return Scored(sample.id, 0.0, False, "no JSON object")
    want, got = target.get("arguments"), call.get("arguments")
    if call.get("name") != target.get("name") or not isinstance(want, dict):
        return Scored(sample.id, 0.0, True, "wrong function")
    if not isinstance(got, dict) or set(got) != set(want):
        return Scored(sample.id, 0.0, True, "arguments do not fit the schema")
    ok = all(_same(want[k], got[k]) for k in want)
    return Scored(sample.id, 1.0 if ok else 0.0, True, "" if ok else "wrong argument values")


def _norm(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return re.sub(r"[^\w ]", "", first).lower().strip()


@register_scorer("short_answer", description="1 when the first line, normalised, is the answer.")
def short_answer(sample: Sample, output: JsonValue) -> Scored:
    """1 when the normalised first line of the output equals the normalised target."""
    text = _text(sample, output)
    if isinstance(text, Scored):
        return text
    return Scored(sample.id, 1.0 if _norm(text) == _norm(str(sample.target)) else 0.0)


@register_scorer("choice_letter", description="1 when the first option letter is the answer.")
def choice_letter(sample: Sample, output: JsonValue) -> Scored:
    """1 when the first standalone letter A-D in the output is the target letter."""
    text = _text(sample, output)
    if isinstance(text, Scored):
        return text
    found = _LETTER.search(text)
    return Scored(sample.id, 1.0 if found and found.group(1) == sample.target else 0.0)


SCORERS = ("number_match", "json_call", "short_answer", "choice_letter")
