"""Flows that check the project against the outside world: `config check --probe` (checks/probe.py:
the roles and the training targets)."""
