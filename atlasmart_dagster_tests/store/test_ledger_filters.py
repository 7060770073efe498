"""Ledger filters behave the same on both engines: an empty list matches nothing, on Postgres too."""

from datetime import datetime, timezone

from atlasmart_dagster.store.ledger.partition_states import CERTIFIED
from atlasmart_dagster_tests.environment import Env
from atlasmart_dagster_tests.team_database import deployment  # noqa: F401 - embedded and team

AT = datetime(2026, 9, 22, 8, 10, tzinfo=timezone.utc)


def test_an_empty_filter_list_matches_nothing_instead_of_failing(env):
    partitions = env.ledger.partitions
    partitions.append("mart_finance_daily_sales", "2026-09-20", CERTIFIED, AT, actor="test")
    # Postgres refused "partition IN ()" (a syntax error); status on a fresh database and a second
    # `atlasmart certify --run` built such a filter.
    assert partitions.events(partitions=[]) == []
    assert partitions.events(assets=[], states=(CERTIFIED,)) == []
    assert len(partitions.events(partitions=["2026-09-20"])) == 1
    assert env.ledger.checks.results(partitions=[]) == []


def test_status_and_a_second_certify_work_on_a_fresh_home(tmp_path, deployment, capsys):  # noqa: F811
    from atlasmart_dagster.cli.main import main
    from atlasmart_dagster.ops.runs.chains import run_chain

    env = Env(tmp_path)
    assert main(["--home", str(env.home), "--landing", str(env.landing), "--ephemeral-instance", "status"]) == 0
    outcome = run_chain(env.defs, env.instance, env.platform, ["2026-09-20"], lane="backfill")
    assert outcome.certified == ["2026-09-20"]
    from atlasmart_dagster.product.run_certification import certify_run

    assert certify_run(env.platform, outcome.run_id, True) == []  # decided already: nothing, and no error
