"""Replays are built from immutable raw evidence, never from the landing zone again.

After a day was certified its landing copy may change (the ERP rewrites the
file, or rewrites file and manifest under the same batch id) or disappear.
A re-run of the day is then a replay from the raw store: the same published
bytes, the same fingerprints and certified version, the raw store untouched,
and a note that the landing copy no longer matches. Only the raw evidence
itself changing stops a replay.
"""

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.published_controls import fingerprints_of
from atlasmart_dagster.store.ledger.partition_states import BUILT
from atlasmart_dagster.store.tables import FACT_SALES, MART_FINANCE_DAILY_SALES, RAW_ORDER_LINES, STG_ORDER_LINES
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch

DAY = "2026-09-20"
BATCH = "ERP-20260920-01"
SPECS = (RAW_ORDER_LINES, STG_ORDER_LINES, FACT_SALES, MART_FINANCE_DAILY_SALES)


def run(env):
    return run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill")


def published(env) -> dict:
    """What consumers and auditors can compare: fingerprints and data file bytes per layer, the served version."""
    served = env.ledger.partitions.served(MART_FINANCE_DAILY_SALES.name, DAY)
    return {
        "fingerprints": {s.name: fingerprints_of(env.warehouse, s, [DAY])[DAY] for s in SPECS},
        "files": {s.name: sorted(hashlib.sha256(Path(f).read_bytes()).hexdigest()
                                 for f in env.warehouse.data_files(s, [DAY])) for s in SPECS},
        "served": (served.version, served.certification.fingerprint, served.certification.controls),
    }


def raw_store_bytes(env) -> dict[str, bytes]:
    root = env.home / "raw"
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def rewrite_data(day_dir: Path) -> None:
    """The landing file changes; the manifest still names the admitted hash."""
    data = day_dir / "order_lines.jsonl"
    data.write_bytes(data.read_bytes().replace(b'"100.00"', b'"900.00"'))


def rewrite_data_and_manifest(day_dir: Path) -> None:
    """The ERP re-sends other figures under the same batch id, with a manifest truthful for them."""
    rows = read_rows(day_dir)
    rows[0]["line_amount_usd"] = "900.00"
    write_batch(day_dir, rows)  # keeps batch id ERP-20260920-01


def delete_data(day_dir: Path) -> None:
    (day_dir / "order_lines.jsonl").unlink()


@pytest.mark.parametrize("change,difference", [
    (rewrite_data, "its order_lines.jsonl hashes to"),
    (rewrite_data_and_manifest, "its _manifest.json differs from the one stored at admission"),
    (delete_data, "its order_lines.jsonl is gone from the landing zone"),
], ids=["data-changed", "data-and-manifest-changed", "data-deleted"])
def test_a_replay_after_the_landing_copy_changed_is_rebuilt_byte_identical_from_the_raw_store(env, change, difference):
    first = run(env)
    assert first.certified == [DAY]
    before, evidence = published(env), raw_store_bytes(env)

    change(env.day_dir(DAY))
    again = run(env)

    assert again.success and again.certified == [DAY], again.failures
    assert published(env) == before  # same fingerprints, same Parquet bytes, still version 1
    assert raw_store_bytes(env) == evidence  # the changed landing copy was not admitted
    built = env.ledger.partitions.events(asset=RAW_ORDER_LINES.name, partition=DAY, states=(BUILT,))[-1]
    assert built.detail["batch_ids"] == [BATCH] and built.detail["new_batches"] == []
    (note,) = built.detail["readiness_notes"]
    assert note.startswith(f"landing copy of batch {BATCH} no longer matches the raw store: ") and difference in note
    assert "the day was built from the raw store and the landing copy was not re-admitted" in note


def test_a_replay_refuses_raw_evidence_changed_after_admission_and_consumers_keep_the_certified_day(env):
    assert run(env).certified == [DAY]
    before = published(env)
    shutil.rmtree(env.day_dir(DAY))  # landing retention expired: only the raw store has the day
    (stored,) = env.platform.raw_store.batches(DAY)
    stored.data_path.chmod(0o644)
    stored.data_path.write_bytes(stored.data_path.read_bytes().replace(b'"100.00"', b'"900.00"'))

    again = run(env)

    assert not again.success and again.certified == []
    failure = " | ".join(again.failures)
    assert f"raw store batch {BATCH} of sales_date={DAY} no longer hashes to its manifest's data_sha256" in failure
    assert again.result.get_asset_materialization_events() == []
    assert published(env) == before
    assert json.loads(stored.manifest_path.read_text())["batch_id"] == BATCH
