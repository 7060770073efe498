"""Runs as the UI launches them from the asset graph: the chain with every check of its assets."""

from __future__ import annotations

from typing import Sequence

import dagster as dg

from atlasmart_dagster.store.tables import DAILY_CHAIN
from atlasmart_dagster.defs.partitions import range_tags
from atlasmart_dagster.product.lanes import DAGSTER_BACKFILL_TAG
from atlasmart_dagster_tests.environment import Env


def graph_selection_job(env: Env, only_checks: Sequence[dg.AssetCheckKey] | None = None) -> dg.JobDefinition:
    """The implicit asset job narrowed to the chain and all its checks (what selecting the chain includes).

    With ``only_checks``: just those checks, nothing materialized (an asset's *Execute checks* button).
    """
    if only_checks is not None:
        assets, checks = set(), set(only_checks)
    else:
        assets = {dg.AssetKey(a) for a in DAILY_CHAIN}
        checks = {k for k in env.defs.resolve_asset_graph().asset_check_keys if k.asset_key in assets}
    job = env.defs.resolve_implicit_global_asset_job_def()
    return job.get_subset(asset_selection=assets, asset_check_selection=checks)


def graph_backfill(env: Env, days: Sequence[str], backfill_id: str = "uigraph1") -> dg.ExecuteInProcessResult:
    """One run of a range backfill launched from the asset graph (tags as Dagster's daemon sets them)."""
    days = sorted(days)
    tags = {DAGSTER_BACKFILL_TAG: backfill_id, **range_tags(days[0], days[-1])}
    result = graph_selection_job(env).execute_in_process(instance=env.instance, tags=tags, raise_on_error=False)
    assert result.success
    return result


def checks_over_range(env: Env, days: Sequence[str], checks: Sequence[dg.AssetCheckKey]) -> dg.ExecuteInProcessResult:
    """Execute ``checks`` over a range of days, nothing materialized (a served asset's *Execute checks*)."""
    days = sorted(days)
    result = graph_selection_job(env, checks).execute_in_process(instance=env.instance,
                                                                  tags=range_tags(days[0], days[-1]))
    assert result.success
    return result


def check_only_run(env: Env, day: str, checks: Sequence[dg.AssetCheckKey]) -> dg.ExecuteInProcessResult:
    """Execute ``checks`` for one day, nothing materialized."""
    result = graph_selection_job(env, checks).execute_in_process(instance=env.instance, partition_key=day)
    assert result.success
    return result


def evaluations(result: dg.ExecuteInProcessResult, check_name_prefix: str) -> list[dg.AssetCheckEvaluation]:
    return [e for e in result.get_asset_check_evaluations() if e.check_name.startswith(check_name_prefix)]


def certify_via_sensor(env: Env, run_id: str | None = None):
    """One tick of certification_sensor, as the daemon would evaluate it after runs ended (cursor kept)."""
    from atlasmart_dagster.defs.automation.certification_sensor import certification_sensor

    context = dg.build_sensor_context(instance=env.instance, resources={"atlasmart": env.resource},
                                      cursor=getattr(env, "certification_cursor", None))
    result = certification_sensor(context)
    env.certification_cursor = context.cursor
    return result


def check_history(env: Env, asset: str, check_name: str) -> list:
    """The check's execution records as the UI lists them (newest first)."""
    key = dg.AssetCheckKey(dg.AssetKey(asset), check_name)
    return list(env.instance.event_log_storage.get_asset_check_execution_history(key, limit=100))
