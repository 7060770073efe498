"""Incident response: ``incidents`` (detect, triage, contain, repair, verify, postmortem) and
``notifications`` (telling on-call and consumers). Notifications read incidents; incidents never import
notifications; ``incident_tick`` is the one place both meet (the incident sensor's work)."""
