"""Backup, restore, verify and partition rollback on a real home."""

import shutil
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.expressions import In

from atlasmart_dagster.ops import recovery
from atlasmart_dagster.ops.runs.chains import run_chain, run_reference
from atlasmart_dagster.product.serving import partition_status
from atlasmart_dagster.store.platform import Platform
from atlasmart_dagster.store.tables import FACT_SALES, TABLES_BY_NAME
from atlasmart_dagster_tests.environment import SAMPLE_DAYS
from atlasmart_dagster_tests.warehouse_tampering import publish_changed


@pytest.fixture
def loaded_env(env):
    run_reference(env.defs, env.instance)
    assert run_chain(env.defs, env.instance, env.platform, SAMPLE_DAYS, lane="backfill").success
    return env


def reopen(env) -> Platform:
    return Platform.open(home=env.home, landing=env.landing)


def test_restore_into_an_empty_home_brings_back_every_certified_partition(loaded_env, tmp_path):
    env = loaded_env
    sha = recovery.fact_rows_sha256(env.platform)
    manifest = recovery.backup(env.platform, tmp_path / "backups")
    assert {"atlasmart.fact_sales", "atlasmart.dim_customer"} <= set(manifest["tables"])
    shutil.rmtree(env.home)  # the whole home is gone
    report = recovery.restore(tmp_path / "backups" / manifest["backup_id"], env.platform.home, env.platform.clock.now())
    assert report["moved_aside"] == []
    platform = reopen(env)
    result = recovery.verify(platform)
    assert result["ok"], result["problems"]
    assert result["checked"] == {"certified_partitions": 15, "raw_batches": 5, "days": 5}
    assert recovery.fact_rows_sha256(platform) == sha
    assert {partition_status(platform, d).state for d in SAMPLE_DAYS} == {"CERTIFIED"}


def test_verify_detects_damage_and_a_partition_rolls_back_without_a_restore(loaded_env):
    env = loaded_env
    sha = recovery.fact_rows_sha256(env.platform)
    env.warehouse.table(FACT_SALES).delete(In("order_id", ["O1004", "O1005"]))
    assert str(recovery.total_fact_controls(env.platform)) == "(7, 6, 8, 635, 365, 270)"
    result = recovery.verify(env.platform)
    assert not result["ok"] and result["certified_ok"]  # consumers' certified versions are intact
    assert result["by_kind"]["layers"] == [
        "2026-09-20: fact_sales disagree with controls recomputed from raw (3, 2, 4, 185, 130, 55)"]
    rolled = recovery.rollback_partition(env.platform, "fact_sales", "2026-09-20", "oncall", "deleted by mistake")
    assert rolled["rows"] == 3
    assert recovery.fact_rows_sha256(env.platform) == sha and recovery.verify(env.platform)["ok"]


def test_a_corrupt_backup_or_the_wrong_home_is_refused(loaded_env, tmp_path):
    env = loaded_env
    manifest = recovery.backup(env.platform, tmp_path / "backups")
    folder = tmp_path / "backups" / manifest["backup_id"]
    with pytest.raises(recovery.RecoveryError, match="belongs to home"):
        recovery.restore(folder, Platform.open(home=tmp_path / "elsewhere").home, env.platform.clock.now())
    victim = next((folder / "files" / "warehouse").rglob("*.parquet"))
    victim.write_bytes(b"not parquet")
    with pytest.raises(recovery.RecoveryError, match="corrupt"):
        recovery.restore(folder, env.platform.home, env.platform.clock.now())


def test_backup_and_verify_commands(loaded_env, capsys, tmp_path):
    import json

    from atlasmart_dagster.cli.main import main

    base = ["--home", str(loaded_env.home), "--landing", str(loaded_env.landing), "--json"]
    assert main([*base, "verify"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"]
    assert main([*base, "backup", "--to", str(tmp_path / "b")]) == 0
    backup_id = json.loads(capsys.readouterr().out)["backup_id"]
    assert main([*base, "restore", str(tmp_path / "b" / backup_id)]) == 0
    assert json.loads(capsys.readouterr().out)["verify"]["ok"]


def _cli(argv, capsys) -> tuple[int, str]:
    """Run the command line; (exit code, everything it printed), whether it returns or exits."""
    from atlasmart_dagster.cli.main import main

    try:
        code, message = main(argv), ""
    except SystemExit as exc:
        code, message = (exc.code if isinstance(exc.code, int) else 1), ("" if isinstance(exc.code, int) else str(exc.code))
    captured = capsys.readouterr()
    return code, captured.out + captured.err + message


def _findings(result, **match) -> list[dict]:
    return [f for f in result["findings"] if all(f[k] == v for k, v in match.items())]


def test_verify_reports_a_missing_certified_file_per_partition_and_carries_on(loaded_env, capsys):
    env = loaded_env
    mart = TABLES_BY_NAME["mart_finance_daily_sales"]
    certified = env.ledger.partitions.served(mart.name, "2026-09-19").certification.snapshot_id
    [victim] = env.warehouse.data_files(mart, ["2026-09-19"], certified)
    Path(victim).unlink()  # the certified Parquet file is gone; the ledger still says CERTIFIED
    env.warehouse.table(FACT_SALES).delete(In("order_id", ["O1004", "O1005"]))  # damage on another day
    raw_batch = env.platform.raw_store.batches("2026-09-18")[0]
    raw_batch.data_path.unlink()  # and raw evidence of a third day is gone
    assert partition_status(env.platform, "2026-09-19").state == "CERTIFIED"

    result = recovery.verify(env.platform)

    assert not result["ok"] and not result["certified_ok"]
    relative = str(Path(victim).relative_to(env.platform.home.root))
    [missing] = _findings(result, scope="certified", partition="2026-09-19", asset=mart.name)
    assert missing["kind"] == "missing_file" and relative in missing["message"]
    assert "Traceback" not in missing["message"] and "\n" not in missing["message"]
    # every other certified partition was still read, and found intact
    assert result["checked"]["certified_partitions"] == 15
    assert {f["partition"] for f in _findings(result, scope="certified")} == {"2026-09-19"}
    # the layers of the other days were still reconciled: the damaged day is reported too
    assert _findings(result, scope="layers", kind="missing_file", partition="2026-09-19", asset=mart.name)
    assert _findings(result, scope="layers", kind="mismatch", partition="2026-09-20", asset="fact_sales")
    assert {f["partition"] for f in _findings(result, scope="layers")} == {"2026-09-19", "2026-09-20"}
    [raw] = _findings(result, scope="raw")
    assert (raw["kind"], raw["partition"]) == ("raw_missing", "2026-09-18") and raw_batch.batch_id in raw["message"]

    base = ["--home", str(env.home), "--landing", str(env.landing)]
    code, out = _cli([*base, "verify"], capsys)
    assert code == 1 and "PROBLEMS" in out and relative in out and "Traceback" not in out


def test_verify_reports_overflowing_sums_per_partition(loaded_env):
    env = loaded_env
    # A fact day whose sums overflow DECIMAL(18,2), as a load before the contract's bounds could write it.
    rows = env.warehouse.read(FACT_SALES, ["2026-09-21"])
    big = Decimal("9999999999999999.99")
    huge = [dict(rows.to_pylist()[0], order_id=f"O90{i}", revenue_usd=big, gross_profit_usd=big) for i in range(3)]
    env.warehouse.overwrite(FACT_SALES, pa.Table.from_pylist(huge, schema=rows.schema), ["2026-09-21"])
    env.warehouse.table(FACT_SALES).delete(In("order_id", ["O1004", "O1005"]))  # damage on another day

    result = recovery.verify(env.platform)

    assert not result["ok"]
    assert result["certified_ok"]  # the certified versions consumers read are intact
    [overflow] = _findings(result, scope="layers", partition="2026-09-21")
    assert overflow["kind"] == "overflow" and overflow["asset"] == "fact_sales"
    assert "out of range" in overflow["message"] and "\n" not in overflow["message"]
    assert _findings(result, scope="layers", kind="mismatch", partition="2026-09-20", asset="fact_sales")
    assert {f["partition"] for f in result["findings"]} == {"2026-09-20", "2026-09-21"}


BAD_DAY = ("partition must be a day like 2026-09-20", "is not a date in YYYY-MM-DD form")  # library, command line


@pytest.mark.parametrize("asset, partition, messages", [
    ("nope", "2026-09-20", ("unknown asset 'nope'",) * 2),
    ("stg_order_lines", "2026-09-20", ("cannot roll back stg_order_lines",) * 2),
    ("fact_sales", "20-09-2026", BAD_DAY),
    ("fact_sales", "2026-02-30", BAD_DAY),
])
def test_rollback_refuses_an_unknown_asset_or_partition_in_one_line(loaded_env, capsys, asset, partition, messages):
    env = loaded_env
    library_message, message = messages
    with pytest.raises(recovery.RecoveryError, match=library_message):
        recovery.rollback_partition(env.platform, asset, partition, "oncall", "test")
    base = ["--home", str(env.home), "--landing", str(env.landing)]
    code, out = _cli([*base, "rollback", "--asset", asset, "--partition", partition, "--actor", "oncall",
                      "--reason", "test"], capsys)
    assert code != 0 and message in out and "Traceback" not in out


@pytest.mark.parametrize("damage, message", [("expire", "no longer in the table"), ("delete", "files missing")])
def test_rollback_refuses_a_certified_version_it_cannot_read(loaded_env, damage, message):
    env = loaded_env
    mart = TABLES_BY_NAME["mart_finance_daily_sales"]
    before = env.warehouse.read(mart, ["2026-09-20"])
    pinned = env.ledger.partitions.served(mart.name, "2026-09-20").certification.snapshot_id
    [certified_file] = env.warehouse.data_files(mart, ["2026-09-20"], pinned)
    # the day is rewritten with other figures: its current file is a new one (files are named by their bytes)
    publish_changed(env.platform, mart, "2026-09-20",
                    lambda rows: [{**r, "revenue_usd": r["revenue_usd"] + 1} for r in rows], "restated")
    if damage == "expire":  # behind the ledger's back (maintenance would have kept it)
        table = env.warehouse.table(mart)
        with table.manage_snapshots() as refs:  # the certified-version tag protects it: removed as well
            for name, ref in table.metadata.refs.items():
                if ref.snapshot_id == pinned and name != "main":
                    refs.remove_tag(name)
        env.warehouse.table(mart).maintenance.expire_snapshots().by_ids([pinned]).commit()
    else:
        Path(certified_file).unlink()
    with pytest.raises(recovery.RecoveryError, match=message):
        recovery.rollback_partition(env.platform, mart.name, "2026-09-20", "oncall", "test")
    assert env.warehouse.read(mart, ["2026-09-20"]).num_rows == before.num_rows == 1  # not replaced by nothing
