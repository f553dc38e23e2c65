"""Agents: the LLM clients, the agent loop, the roles (main, worker, reviewer, leader) and the
built-in offline policy. Agents act only through the Experiment OS tools of :mod:`rsilab.expos`;
nothing here computes or writes a score that counts.
"""
