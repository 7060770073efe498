"""Dagster assets, one module per layer of the data flow."""

import warnings

import dagster as dg

# Every partitioned asset declares BackfillPolicy.single_run() so a range
# backfill is one set-based run instead of one run per day (and so that
# `dagster asset materialize --partition-range` works at all). The parameter
# is beta in Dagster 1.13 and warns once per asset at import; the choice is
# deliberate, so this one message is silenced here and nothing else is.
warnings.filterwarnings(
    "ignore", message=r"Parameter `backfill_policy` of function `(multi_)?asset`", category=dg.BetaWarning
)
# The project's dagster.yaml routes run logs through Dagster's python_logs
# config (JSON lines, see ops/observability/logs.py), which Dagster 1.13 also marks
# beta and announces in every run process.
warnings.filterwarnings(
    "ignore", message=r"Handling yaml-defined logging configuration is currently in beta", category=dg.BetaWarning
)
