"""A consumer report joining a held re-send's incident does not make containment withdraw the good v1 (issue 35, finding 3).

A report is a signal about what consumers see: containment withdraws the
served version for it only when the report disputes that version's own
figures and triage finds them wrong.
"""

import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from atlasmart_dagster.product.serving import partition_status
from atlasmart_dagster.store.tables import TABLES_BY_NAME

from .test_containment_keeps_good import bi_revenue
from .test_restatement_incident import DAY, ONCALL, cli, held  # noqa: F401 - the fixture


def report(env, capsys, *extra: str) -> str:
    code, out = cli(env, capsys, "incident", "report", "--actor", "finance-analyst@atlasmart.example", "--json",
                    "--partition", DAY, *extra)
    assert code == 0, out
    return json.loads(out)["incident"]


def contain_day(env, capsys) -> dict:
    code, out = cli(env, capsys, "incident", "contain", env.incident, "--from", DAY, "--to", DAY, "--actor", ONCALL,
                    "--json")
    assert code == 0, out
    return json.loads(out)


def test_a_report_joining_a_held_resend_keeps_v1_served(held, capsys):  # noqa: F811
    assert report(held, capsys, "--text", "Revenue of 19 September looks off, is a correction coming?") == held.incident
    contained = contain_day(held, capsys)
    assert contained["withdrawn"] == []
    assert {k["version"] for k in contained["kept"]} == {1}
    assert bi_revenue(held, capsys) == ["100.00"]
    status = partition_status(held.platform, DAY)
    assert (status.state, status.certified_version) == ("RESTATEMENT_HELD", 1)


def test_a_report_disputing_a_served_figure_triage_confirms_correct_keeps_v1(held, capsys):  # noqa: F811
    """The report names the served figure; the served version still equals its own raw evidence: kept."""
    report(held, capsys, "--asset", "mart_finance_daily_sales", "--text", "Revenue of 19 September should be 300")
    contained = contain_day(held, capsys)
    assert contained["withdrawn"] == [] and bi_revenue(held, capsys) == ["100.00"]


def rewrite_served_revenue(platform, asset: str, day: str, revenue: str) -> None:
    """A disk fault under the served version: its data file, rewritten in place with another revenue."""
    served = platform.ledger.partitions.states([day], [asset]).served(asset, day)
    spec = TABLES_BY_NAME[asset]
    (path,) = platform.warehouse.data_files(spec, [day], served.certification.snapshot_id)
    path = Path(path)
    table = pq.read_table(path)
    column = table.schema.get_field_index("revenue_usd")
    changed = pa.array([Decimal(revenue)] * table.num_rows, table.schema.field(column).type)
    path.chmod(0o644)
    pq.write_table(table.set_column(column, table.schema.field(column), changed), path)


def test_a_report_whose_served_figures_triage_finds_wrong_withdraws(held, capsys):  # noqa: F811
    """The served mart no longer reads as certified: the report is confirmed by triage, v1 is withdrawn."""
    rewrite_served_revenue(held.platform, "mart_finance_daily_sales", DAY, "300.00")
    report(held, capsys, "--asset", "mart_finance_daily_sales", "--text", "Revenue of 19 September is wrong")
    code, out = cli(held, capsys, "incident", "triage", held.incident, "--json")
    assert "served version 1 is wrong: mart_finance_daily_sales v1" in json.loads(out)["triage"]["served"][DAY]
    contained = contain_day(held, capsys)
    assert {w["asset"] for w in contained["withdrawn"]} == {
        "metric_gross_revenue", "mart_finance_daily_sales", "mart_executive_revenue"}
    assert bi_revenue(held, capsys) == []
