"""Built-in tasks, one subpackage each, every one with its harness folder as package data.

Each subpackage's ``__init__`` defines an ``@task`` function named like the task; the registry
imports every subpackage here on first use (see ``rsilab.tasks._registry``).
"""
