"""A served asset's checks, executed from the UI or reported by two paths at once: one complete row per decision.

*Execute all* on a served asset is a run of its checks with no partition;
selecting the served asset's checks with a mart and a day (the asset graph's
*Materialize*) is a partitioned run of them. Both are run here with
``dagster.materialize`` and read back from the instance's check history, as
the UI lists it.
"""

import threading

import dagster as dg

from atlasmart_dagster.defs.assets.served import served_asset
from atlasmart_dagster.defs.checks.certification_checks import (
    CERTIFICATION_STATE,
    report_certification_states,
    report_day_states,
)
from atlasmart_dagster.defs.checks.slo_checks import SLO_CHECK_KEYS
from atlasmart_dagster.defs.checks.open_incidents import OPEN_INCIDENTS
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster_tests.defs.checks.graph_runs import certify_via_sensor, check_history
from atlasmart_dagster_tests.environment import Env

DAYS = ["2026-09-19", "2026-09-20"]
MART = "mart_finance_daily_sales"
SERVED = dg.AssetKey(served_asset(MART))


def served_checks(env: Env) -> list[dg.AssetCheckKey]:
    return sorted((k for k in env.defs.resolve_asset_graph().asset_check_keys if k.asset_key == SERVED), key=str)


def materialize(env: Env, selection: dg.AssetSelection, **kwargs) -> dg.ExecuteInProcessResult:
    """``dagster.materialize`` over the code location's assets and checks (what the UI launches)."""
    result = dg.materialize([*env.defs.assets, *env.defs.asset_checks], selection=selection, instance=env.instance,
                            resources=env.defs.resources, **kwargs)
    assert result.success
    return result


def rows_of_run(env: Env, key: dg.AssetCheckKey, run_id: str) -> dict[str | None, str]:
    """The run's rows of the check's history: partition -> status (PLANNED is what the UI shows as Skipped)."""
    return {r.partition: r.status.value for r in check_history(env, key.asset_key.to_user_string(), key.name)
            if r.run_id == run_id}


def newest_evaluation(env: Env, key: dg.AssetCheckKey) -> dg.AssetCheckEvaluation:
    return env.instance.get_latest_asset_check_evaluation_record(key).event.dagster_event.asset_check_evaluation_data


def certified(tmp_path, on_disk: bool = False) -> Env:
    """2026-09-19 and 2026-09-20 certified, from a backfill; ``on_disk``: an instance threads can share."""
    env = Env(tmp_path)  # system clock: the sample days are history, delivered by a backfill
    if on_disk:
        (tmp_path / "dagster").mkdir()
        env.instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    assert run_chain(env.defs, env.instance, env.platform, DAYS, lane="backfill").certified == DAYS
    return env


def test_execute_all_runs_every_check_it_offers_and_the_slos_state_every_day(tmp_path):
    env = certified(tmp_path)
    keys = served_checks(env)
    graph = env.defs.resolve_asset_graph()
    # "Execute all" offers a check the UI can execute on its own: all of them, the SLOs too
    assert all(len(graph.get_execution_set_asset_and_check_keys(k)) == 1 for k in keys)
    run = materialize(env, dg.AssetSelection.checks_for_assets(SERVED))
    for key in keys:
        rows = rows_of_run(env, key, run.run_id)
        assert list(rows) == [None] and rows[None] != "PLANNED", (key, rows)  # evaluated once, nothing Skipped
    for key in (k for k in keys if k in SLO_CHECK_KEYS):
        evaluation = newest_evaluation(env, key)
        objective = key.name.removeprefix("slo_")
        assert evaluation.severity == dg.AssetCheckSeverity.WARN
        assert evaluation.description.startswith(f"**{objective}: 0 of 5 days met, 0 missed, 5 not measured**")
        assert "- 2026-09-19...2026-09-20 NOT MEASURED: delivered by a backfill" in evaluation.description
        assert set(evaluation.metadata["days"].value) == {"2026-09-17", "2026-09-18", *DAYS, "2026-09-21"}
    headline = newest_evaluation(env, dg.AssetCheckKey(SERVED, CERTIFICATION_STATE))
    assert headline.description.startswith("**2 of 5 due days served")


def test_the_checks_selected_with_a_mart_and_a_day_complete_that_day_and_add_no_row(tmp_path):
    env = certified(tmp_path)
    day = DAYS[1]
    run = materialize(env, dg.AssetSelection.assets(MART) | dg.AssetSelection.checks_for_assets(SERVED),
                      partition_key=day, tags={"atlasmart/lane": "backfill"})
    for key in served_checks(env):
        rows = rows_of_run(env, key, run.run_id)
        assert list(rows) == [day] and rows[day] != "PLANNED", (key, rows)  # no Skipped day, no unpartitioned row
    slo = newest_evaluation(env, SLO_CHECK_KEYS[0])
    assert slo.partition == day and slo.description.startswith(f"{day} NOT MEASURED")


def test_after_execute_all_the_same_state_reported_again_writes_no_row(tmp_path):
    env = certified(tmp_path)
    materialize(env, dg.AssetSelection.checks_for_assets(SERVED))
    keys = [dg.AssetCheckKey(SERVED, CERTIFICATION_STATE), dg.AssetCheckKey(SERVED, OPEN_INCIDENTS)]
    before = {k: len(check_history(env, SERVED.to_user_string(), k.name)) for k in keys}
    certify_via_sensor(env)  # two ticks: the ended runs' days, then nothing new
    certify_via_sensor(env)
    report_day_states(env.instance, env.platform, DAYS)  # and a command reporting the same days
    assert {k: len(check_history(env, SERVED.to_user_string(), k.name)) for k in keys} == before

    assert run_chain(env.defs, env.instance, env.platform, ["2026-09-21"], lane="backfill").certified
    after = newest_evaluation(env, keys[0])  # a new decision: a new row, not shadowed by the run's
    assert after.description.startswith("**3 of 5 due days served") and len(
        check_history(env, SERVED.to_user_string(), CERTIFICATION_STATE)) == before[keys[0]] + 1


def test_two_paths_reporting_one_decision_at_the_same_moment_write_one_row(tmp_path, monkeypatch):
    """A command and the daemon's sensor both ask "said already?" before either writes: one of them waits."""
    env = certified(tmp_path, on_disk=True)
    assert run_chain(env.defs, env.instance, env.platform, ["2026-09-21"], lane="backfill", certify=False).success
    key = dg.AssetCheckKey(SERVED, CERTIFICATION_STATE)
    both_asked = threading.Barrier(2)
    asked = env.instance.get_latest_asset_check_evaluation_record

    def asked_together(check_key, *args, **kwargs):
        record = asked(check_key, *args, **kwargs)
        if check_key == key:
            try:
                both_asked.wait(timeout=2)  # unlocked, both paths get here before either writes
            except threading.BrokenBarrierError:
                pass  # the other path waits for the lock: this one goes on alone
        return record

    monkeypatch.setattr(env.instance, "get_latest_asset_check_evaluation_record", asked_together)
    from atlasmart_dagster.product.run_certification import certify_run

    last_run = env.instance.get_run_records(limit=1)[0].dagster_run.run_id
    certify_run(env.platform, last_run, True, actor="atlasmart")
    before = len(check_history(env, SERVED.to_user_string(), CERTIFICATION_STATE))
    paths = [threading.Thread(target=report_certification_states, args=(env.instance, env.platform, ["2026-09-21"]))
             for _ in range(2)]
    for path in paths:
        path.start()
    for path in paths:
        path.join()
    assert len(check_history(env, SERVED.to_user_string(), CERTIFICATION_STATE)) == before + 1


def test_a_ui_launched_run_certified_by_its_command_then_two_sensor_ticks_is_one_row_per_check(tmp_path):
    """``atlasmart certify --run ID`` (the gate, then report_day_states) and then the sensor's ticks: one decision."""
    from atlasmart_dagster.product.run_certification import certify_run
    from atlasmart_dagster_tests.defs.checks.graph_runs import graph_backfill

    env = Env(tmp_path)
    run = graph_backfill(env, DAYS)  # launched from the asset graph, nothing certified yet
    decisions = certify_run(env.platform, run.run_id, True, actor="atlasmart")
    report_day_states(env.instance, env.platform, sorted({d.partition for d in decisions}))
    certify_via_sensor(env)
    certify_via_sensor(env)
    for key in served_checks(env):
        rows = check_history(env, SERVED.to_user_string(), key.name)
        assert len(rows) == 1, (key.name, [r.event.dagster_event.asset_check_evaluation_data.description for r in rows])
