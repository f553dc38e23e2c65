"""The built-in policy (no LLM): Main, Workers and a Reviewer (:mod:`.runner`), and a research
team of a Leader and researchers (:mod:`.team`).

Each role's rules (pure functions, no I/O) sit beside what the role does with them, in the
role's own subpackage. Every action goes through the Experiment OS tools, exactly as an LLM
agent's does, so the same roles, guards and ledger apply.

- **Search** (:mod:`._search`): one Optuna multivariate TPE study per campaign, rebuilt from
  every recorded run before each proposal, the non-targets as its constraint; a direction
  draws its open knobs and keeps the others at its base config (the reference or the best
  config found anywhere), never repeating a tried config. A task's code variants are one more
  choice knob of the study (``code_variant``: the head's code or a variant).
- **Worker** (:mod:`.worker`): runs one experiment (the chosen code variant applied to its
  workspace, the knobs written to the config file); ``propose_configs`` (mutation, crossover)
  is kept for the team's researchers.
- **The race** (:mod:`.main._race`): the last quarter of the budget re-runs the reference once
  and the best configs by successive halving; the winner is proposed once, if the Reviewer
  predicts the controller accepts it (:mod:`.reviewer._predict`).
- **Reviewer** (:mod:`.reviewer`): ``review_pair`` compares two experiments' per-sample dev
  scores with a paired interval and flags gains inside the noise floor, which
  :func:`~rsilab.stats.noise_floor_from` estimates from repeated runs of one config.
- **Main** (:mod:`.main`): ``choose_direction`` picks the next direction by UCB1 over reviewed
  gains (``gain_reward``), and ``next_move`` says continue, verify, branch, revise or stop.
- **Team researchers** (:mod:`.team`): the moves each orientation of a research team makes
  (wide moves on the least explored knobs, local moves along a finding, one-knob contrasts)
  and the knob groups an analyst tests.

Defaults are tuned on the synthetic task family only, never on another task's dev or private
tiers.
"""

from rsilab.orchestrator.builtin.ablation import Ablation
from rsilab.orchestrator.builtin.runner import BuiltinPolicy, run_campaign
from rsilab.orchestrator.builtin.team import TeamPolicy, TeamSettings, run_team_campaign

__all__ = [
    "Ablation",
    "BuiltinPolicy",
    "TeamPolicy",
    "TeamSettings",
    "run_campaign",
    "run_team_campaign",
]
