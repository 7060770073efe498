"""Structured logs and Prometheus metrics: signals that can tell a late source from a semantic bug."""
