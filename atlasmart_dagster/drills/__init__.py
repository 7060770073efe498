"""Drills: whole incident scenarios replayed on logical time against real Dagster runs.

Each drill builds a scratch home, plays the ERP and the clock, drives the same
schedule, sensors, jobs, certification gate and CLI-level operations that
production uses, and writes its evidence (summary, runs, ledger excerpt,
operator notes, runbook) so the scenario can be audited and repeated.
"""
