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
# The in-step checks of the partitioned layers declare the daily partitions
# (AssetCheckSpec(partitions_def=...), a preview in 1.13): only then does the
# UI show each evaluation's day in the check's Execution history (its
# Partition column) and the check's own Partitions tab. Deliberate, so this
# one preview message is silenced too.
warnings.filterwarnings("ignore", message=r"Specifying a partitions_def on an AssetCheckSpec", category=dg.PreviewWarning)


def package_assets() -> list:
    """Every asset and asset spec of this package's modules, as Dagster's package loader finds them.

    The code location is made of exactly these (``definitions.py``), so a new
    layer's module is loaded without a list to edit.
    """
    import sys  # local: the package loads itself, once all its modules can be imported

    return list(dg.load_assets_from_package_module(sys.modules[__name__], include_specs=True))
