"""Dagster assets, one module per layer of the data flow."""
