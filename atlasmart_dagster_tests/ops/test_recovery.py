"""Backup, restore, verify and partition rollback on a real home."""

import shutil

import pytest
from pyiceberg.expressions import In

from atlasmart_dagster.ops import recovery
from atlasmart_dagster.ops.runs import run_chain, run_reference
from atlasmart_dagster.product.serving import partition_status
from atlasmart_dagster.store.platform import Platform
from atlasmart_dagster.store.tables import FACT_SALES
from atlasmart_dagster_tests.conftest import SAMPLE_DAYS


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
