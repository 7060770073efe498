"""The data product's rules, free of Dagster: what may be loaded, what reconciles, what is certified.

Source contracts and readiness, control tuples and fingerprints, the
certification gate, what consumers are served, SLOs, the governed metric,
dashboards, lanes and PII redaction.
"""
