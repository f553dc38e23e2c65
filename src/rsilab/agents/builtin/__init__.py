"""The built-in research policy: the decisions of Main, Worker and Reviewer with no LLM.

Pure functions, no I/O; the orchestrator drives the Experiment OS tools with them, exactly as it
drives an LLM agent, so the same roles, guards and ledger apply.

- **Worker** (:mod:`~rsilab.agents.builtin.search`): :func:`propose_configs` proposes new configs
  of the task's declared search space from the direction's best experiments (mutation with a
  step that shrinks as the direction matures, uniform crossover, occasional fresh samples),
  never repeating a tried config; :func:`propose_variant` picks an untried code variant.
- **Reviewer** (:mod:`~rsilab.agents.builtin.review`): :func:`review_pair` compares two
  experiments' per-sample dev scores with a paired interval and flags gains inside the noise
  floor, which :func:`~rsilab.stats.noise_floor_from` estimates from repeated runs of one
  config.
- **Main** (:mod:`~rsilab.agents.builtin.select`): :func:`choose_direction` picks the next
  direction by UCB1 over reviewed gains (:func:`gain_reward`), and :func:`next_move` says
  continue, verify, branch, revise or stop.
- **Team researchers** (:mod:`~rsilab.agents.builtin.team`): the moves each orientation of a
  research team makes (wide moves on the least explored knobs, local moves along a finding,
  one-knob contrasts) and the knob groups an analyst tests.

Defaults are tuned on the synthetic task family only, never on another task's dev or private
tiers.
"""

from rsilab.agents.builtin.review import ReviewFinding, review_pair
from rsilab.agents.builtin.search import (
    DEFAULT_SETTINGS,
    Config,
    SearchSettings,
    config_key,
    is_valid,
    propose_configs,
    propose_variant,
    step_size,
)
from rsilab.agents.builtin.select import (
    DirectionStats,
    Move,
    choose_direction,
    gain_reward,
    next_move,
    stagnating,
)

__all__ = [
    "DEFAULT_SETTINGS",
    "Config",
    "DirectionStats",
    "Move",
    "ReviewFinding",
    "SearchSettings",
    "choose_direction",
    "config_key",
    "gain_reward",
    "is_valid",
    "next_move",
    "propose_configs",
    "propose_variant",
    "review_pair",
    "stagnating",
    "step_size",
]
