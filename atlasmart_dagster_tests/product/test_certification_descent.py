"""Certifying a run is one descent over the ledger: its reads of the days do not grow with the days certified.

The gate reads the days it judges, records its decisions, and the days are
read once more as the decisions left them; that read is handed to the
certified branch, the deliveries' SLOs and everything ``report_day_states``
shows (the served assets, the headline, the SLO checks). Before, each of
those read the ledger again, and the deliveries read it once per day: a
year's certification read it 374 times.
"""

from __future__ import annotations

import pytest

from atlasmart_dagster.defs.checks.certification_checks import report_day_states
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.run_certification import certify_run_read
from atlasmart_dagster.store.ledger.day_states import DayStates
from atlasmart_dagster.store.tables import CERTIFIED_ASSETS
from atlasmart_dagster_tests.environment import SAMPLE_DAYS, Env


@pytest.fixture
def reads(monkeypatch) -> list[tuple]:
    """Every ``DayStates.read`` (the one query of the ledger's days), as (days, assets) asked; counted, not replaced."""
    seen: list[tuple] = []
    original = DayStates.read.__func__

    def counted(cls, engine, days=None, assets=None):
        seen.append((None if days is None else sorted(set(days)), None if assets is None else sorted(set(assets))))
        return original(cls, engine, days, assets)

    monkeypatch.setattr(DayStates, "read", classmethod(counted))
    return seen


def _certify_and_show(env: Env, days: list[str], reads: list[tuple]) -> tuple[int, int]:
    """Build ``days`` in one run, then certify it and show it as ``atlasmart certify`` does: (reads, reads to show)."""
    run = run_chain(env.defs, env.instance, env.platform, days, certify=False)
    assert run.success
    reads.clear()
    certified = certify_run_read(env.platform, run.run_id, run.success)
    assert {(d.asset, d.partition) for d in certified.decisions if d.certified} == {
        (a, d) for a in CERTIFIED_ASSETS for d in days}
    assert certified.states is not None
    for asset in CERTIFIED_ASSETS:  # the read handed on is the ledger as the decisions left it
        assert set(certified.states.served_map(asset)) >= set(days)
    certifying = len(reads)
    report_day_states(env.instance, env.platform, days, certified.states)
    return certifying, len(reads) - certifying


def test_certifying_reads_the_days_a_fixed_number_of_times_whatever_the_days(tmp_path, reads):
    env = Env(tmp_path)
    one = _certify_and_show(env, SAMPLE_DAYS[:1], reads)
    four = _certify_and_show(env, SAMPLE_DAYS[1:], reads)
    assert one == four, (one, four)
    certifying, showing = four
    assert showing == 0  # the served assets, the headline and the SLO checks read the one read handed to them
    assert certifying <= 6, reads
    # and what was shown is what the ledger says: every day served in the UI
    import dagster as dg

    from atlasmart_dagster.defs.assets.served import served_asset

    for asset in CERTIFIED_ASSETS:
        assert env.instance.get_materialized_partitions(dg.AssetKey(served_asset(asset))) == set(SAMPLE_DAYS)
