"""Two runs writing different partitions of the same tables at the same time both land."""

import multiprocessing as mp

from atlasmart_dagster.domain.controls import ControlTuple
from atlasmart_dagster.product.published_controls import controls_of
from atlasmart_dagster.store.tables import FACT_SALES, MART_FINANCE_DAILY_SALES


def _load(home: str, landing: str, partition: str, start, results) -> None:
    import warnings

    warnings.filterwarnings("ignore")
    import dagster as dg

    from atlasmart_dagster.definitions import build_definitions
    from atlasmart_dagster.defs.resources import AtlasmartResource
    from atlasmart_dagster.ops.runs.chains import run_chain

    resource = AtlasmartResource(home=home, landing=landing)
    defs = build_definitions(resource)
    start.wait(timeout=60)
    outcome = run_chain(defs, dg.DagsterInstance.ephemeral(), resource.platform, [partition], lane="backfill")
    results.put((partition, outcome.success, outcome.certified, outcome.failures))


def test_parallel_runs_on_different_partitions_both_land(env):
    ctx = mp.get_context("spawn")
    start, results = ctx.Barrier(2), ctx.Queue()
    days = ["2026-09-18", "2026-09-20"]
    procs = [ctx.Process(target=_load, args=(str(env.home), str(env.landing), d, start, results)) for d in days]
    for p in procs:
        p.start()
    outcomes = sorted(results.get(timeout=240) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    assert outcomes == [(d, True, [d], []) for d in days]
    fact = controls_of(env.warehouse, FACT_SALES, days)
    assert fact == {"2026-09-18": ControlTuple(4, 3, 5, 395, 220, 175), "2026-09-20": ControlTuple(3, 2, 4, 185, 130, 55)}
    for d in days:
        assert env.ledger.partitions.served(MART_FINANCE_DAILY_SALES.name, d).certification.controls == fact[d]
