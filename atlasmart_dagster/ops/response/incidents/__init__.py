"""Incident response: detect, contain, blast radius, triage, communicate, repair, verify, postmortem.

An incident is an append-only record in the ledger (``incidents`` and
``incident_events``); its state is derived from its events, and nothing is
ever deleted, so the evidence survives resolution.
"""
