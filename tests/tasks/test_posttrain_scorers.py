"""posttrain's scorers extract the answer from generated text themselves."""

from __future__ import annotations

from rsilab.tasks import Sample, get_scorer, get_task

get_task("posttrain")  # registers the scorers
CALL = {"name": "send_note", "arguments": {"to": "Mira", "count": 3}}


def _score(scorer: str, target: object, output: object) -> tuple[float, bool]:
    scored = get_scorer(scorer).fn(Sample(id="s", input={}, target=target), output)  # type: ignore[arg-type]
    return scored.score, scored.valid


def test_number_match_takes_the_first_integer() -> None:
    assert _score("number_match", "12", " 12 apples") == (1.0, True)
    assert _score("number_match", "12", "7 then 12") == (0.0, True)
    assert _score("number_match", "12", "twelve") == (0.0, True)
    assert _score("number_match", "12", 12) == (0.0, False)


def test_json_call_matches_name_schema_and_values() -> None:
    good = 'call: {"name": "send_note", "arguments": {"count": 3, "to": "Mira"}} done'
    assert _score("json_call", CALL, good) == (1.0, True)
    wrong_type = '{"name": "send_note", "arguments": {"to": "Mira", "count": "3"}}'
    assert _score("json_call", CALL, wrong_type) == (0.0, True)
    extra_arg = '{"name": "send_note", "arguments": {"to": "Mira", "count": 3, "x": 1}}'
    assert _score("json_call", CALL, extra_arg) == (0.0, True)
    assert _score("json_call", CALL, '{"name": "play_song", "arguments": {}}') == (0.0, True)
    assert _score("json_call", CALL, '{"name": "send_note", "arg') == (0.0, False)


def test_short_answer_and_choice_letter() -> None:
    assert _score("short_answer", "Arlow", " arlow.\nmore") == (1.0, True)
    assert _score("short_answer", "Arlow", "Arlow Brenmoor") == (0.0, True)
    assert _score("choice_letter", "B", "B. Quarry") == (1.0, True)
    assert _score("choice_letter", "B", "Answer C") == (0.0, True)
    assert _score("choice_letter", "B", "Bob") == (0.0, True)
