"""Source readiness: a day enters only when its manifest is present and truthful."""

import json
import re
from datetime import datetime, timezone

import pytest

from atlasmart_dagster.errors import RawEvidenceConflict, SourceNotReady
from atlasmart_dagster.product.readiness import prepare_partition, prepare_partitions
from atlasmart_dagster.store.warehouse import duckdb_connection
from atlasmart_dagster_tests.environment import SAMPLE_DAYS, Env
from atlasmart_dagster_tests.landing_batches import patch_manifest, read_rows, write_batch

NOW = datetime(2026, 11, 1, tzinfo=timezone.utc)
DAY = "2026-09-20"


def prepare(env, partition=DAY, now=NOW):
    return prepare_partition(env.platform, partition, now, duckdb_connection())


def problems_of(env, partition=DAY, now=NOW) -> str:
    with pytest.raises(SourceNotReady) as info:
        prepare(env, partition, now)
    assert info.value.partition == partition
    assert f"sales_date={partition}" in str(info.value)
    return str(info.value)


def test_a_truthful_batch_is_committed_write_once_to_the_raw_store(env):
    source = prepare(env)
    (batch,) = source.batches
    assert batch.manifest.batch_id == "ERP-20260920-01" and batch.newly_landed
    assert batch.stored.data_path.read_bytes() == (env.day_dir(DAY) / "order_lines.jsonl").read_bytes()
    assert not batch.stored.data_path.stat().st_mode & 0o222  # read-only evidence
    again = prepare(env)
    assert not again.batches[0].newly_landed  # a re-run adds nothing


def test_missing_manifest_is_not_ready_whatever_the_clock_says(env):
    (env.day_dir(DAY) / "_manifest.json").unlink()
    text = problems_of(env)
    assert "manifest _manifest.json missing" in text and "order_lines.jsonl" in text


def test_missing_landing_folder_is_not_ready(env):
    assert "no landing folder" in problems_of(env, "2026-09-25")


def test_hash_that_lies_is_not_ready(env):
    patch_manifest(env.day_dir(DAY), data_sha256="0" * 64)
    assert "data_sha256 mismatch" in problems_of(env)
    assert not list((env.home / "raw").rglob("batch_id=*"))  # nothing entered the raw store


def test_row_count_that_lies_is_not_ready(env):
    patch_manifest(env.day_dir(DAY), expected_rows=4)
    assert "expected_rows is 4 but order_lines.jsonl has 3 rows" in problems_of(env)


def test_sequence_range_that_lies_is_not_ready(env):
    patch_manifest(env.day_dir(DAY), source_seq_low=100, source_seq_high=150)
    assert "source_seq range 204..206" in problems_of(env)


def test_malformed_file_is_not_ready(env):
    write_batch(env.day_dir(DAY), data=b'{"source_seq": 204, "order_id": "O1004"\n{"oops"\n', expected_rows=2)
    assert "is malformed" in problems_of(env)


def test_unknown_schema_version_is_not_ready(env):
    patch_manifest(env.day_dir(DAY), schema_version="v9")
    assert "schema_version 'v9' is unknown" in problems_of(env)


def test_manifest_declared_ready_later_than_now_is_not_ready(env):
    text = problems_of(env, now=datetime(2026, 9, 21, 8, 0, tzinfo=timezone.utc))
    assert "ready_at 2026-09-21T08:04:00Z, later than now 2026-09-21T08:00:00Z" in text


@pytest.mark.parametrize("broken,problem", [
    (b"not json", "not valid JSON"),
    (json.dumps({"source_system": "atlasmart_erp"}).encode(), "batch_id missing"),
])
def test_unusable_manifest_is_not_ready(env, broken, problem):
    (env.day_dir(DAY) / "_manifest.json").write_bytes(broken)
    assert problem in problems_of(env)


def test_manifest_for_another_day_is_not_ready(env):
    patch_manifest(env.day_dir(DAY), partition="2026-09-19")
    assert "manifest is for partition 2026-09-19" in problems_of(env)


def test_same_batch_id_with_different_bytes_is_not_readmitted_and_evidence_kept(env):
    prepare(env)
    rows = read_rows(env.day_dir(DAY))
    rows[0]["line_amount_usd"] = "999.00"
    write_batch(env.day_dir(DAY), rows)  # keeps batch id ERP-20260920-01
    source = prepare(env)
    assert source.replayed_from_raw_store and not source.batches[0].newly_landed
    (note,) = source.notes
    assert note.startswith("landing copy of batch ERP-20260920-01 no longer matches the raw store")
    stored = env.platform.raw_store.get(DAY, "ERP-20260920-01")
    assert b"999.00" not in stored.data_path.read_bytes()


def test_a_new_delivery_keeps_both_batches(env):
    prepare(env)
    rows = read_rows(env.day_dir(DAY))
    rows[2] = {**rows[2], "source_seq": 209, "line_amount_usd": "55.00"}
    write_batch(env.day_dir(DAY), [rows[2]], batch_id="ERP-20260920-02")
    source = prepare(env)
    assert [b.manifest.batch_id for b in source.batches] == ["ERP-20260920-01", "ERP-20260920-02"]
    assert source.expected_rows == 4


def test_a_day_missing_from_landing_replays_from_the_raw_store(env):
    prepare(env)
    for f in env.day_dir(DAY).iterdir():
        f.unlink()
    env.day_dir(DAY).rmdir()
    source = prepare(env)
    assert source.replayed_from_raw_store and source.batches[0].manifest.batch_id == "ERP-20260920-01"


def _outcomes(env, days, in_turn: bool) -> list:
    """What each day came to, comparable across homes: batches and flags, or the problems raised."""
    con = duckdb_connection()
    if in_turn:
        found = {}
        for day in days:
            try:
                found[day] = prepare_partition(env.platform, day, NOW, con)
            except SourceNotReady as exc:
                found[day] = exc
    else:
        found = prepare_partitions(env.platform, days, NOW, con)
    assert list(found) == days
    # a problem may name the private copy it read: its folder differs by home and by attempt
    private = re.compile(re.escape(str(env.home)) + r"/raw/\.staging/[^/]+/")
    return [
        (day, "refused", [private.sub("<staged>/", p) for p in o.problems]) if isinstance(o, SourceNotReady)
        else (day, o.replayed_from_raw_store, [(b.manifest.batch_id, b.fields, b.newly_landed) for b in o.batches])
        for day, o in found.items()
    ]


def _spoil(env) -> list[str]:
    """A range with a lying hash, a malformed file, a missing manifest and a day that never landed."""
    patch_manifest(env.day_dir("2026-09-18"), data_sha256="0" * 64)
    write_batch(env.day_dir("2026-09-19"), data=b'{"source_seq": 204\n{"oops"\n', expected_rows=2)
    (env.day_dir("2026-09-21") / "_manifest.json").unlink()
    return SAMPLE_DAYS + ["2026-09-22"]


def test_checking_a_range_concurrently_gives_what_checking_day_by_day_gives(tmp_path):
    one, other = Env(tmp_path / "a"), Env(tmp_path / "b")
    days = _spoil(one)
    _spoil(other)
    concurrent = _outcomes(one, days, in_turn=False)
    assert concurrent == _outcomes(other, days, in_turn=True)
    assert [d for d, kind, _ in concurrent if kind == "refused"] == ["2026-09-18", "2026-09-19", "2026-09-21", "2026-09-22"]
    # a second pass: the stored batches are found again, nothing is newly landed
    assert _outcomes(one, days, in_turn=False) == _outcomes(other, days, in_turn=True)
    assert not list((one.home / "raw" / ".staging").iterdir())  # refused copies were discarded


def test_an_error_in_a_range_stops_at_its_day_with_the_earlier_days_committed(env):
    prepare(env)  # 2026-09-20 is stored; then its stored evidence is changed behind the store's back
    (batch,) = env.platform.raw_store.batches(DAY)
    batch.data_path.chmod(0o644)
    batch.data_path.write_bytes(batch.data_path.read_bytes().replace(b"100.00", b"900.00"))
    with pytest.raises(RawEvidenceConflict, match="no longer hashes to its manifest"):
        prepare_partitions(env.platform, SAMPLE_DAYS, NOW, duckdb_connection())
    stored = {p.parent.name for p in (env.home / "raw").glob("sales_date=*/batch_id=*")}
    assert stored == {f"sales_date={d}" for d in SAMPLE_DAYS if d <= DAY}  # 2026-09-21 never committed
    assert not list((env.home / "raw" / ".staging").iterdir())


def test_a_lost_raw_copy_of_an_accepted_batch_is_refused_not_recopied_from_landing(env):
    import shutil

    source = prepare(env)
    (batch,) = source.batches
    manifest = json.loads(batch.stored.manifest_path.read_bytes())
    env.platform.ledger.batches.record(manifest, "v1", batch.fields, NOW, None)
    folder = batch.stored.data_path.parent
    for f in folder.iterdir():
        f.chmod(0o644)
    shutil.rmtree(folder)
    with pytest.raises(RawEvidenceConflict) as info:
        prepare(env)
    assert "ERP-20260920-01" in str(info.value) and "atlasmart restore" in str(info.value)
    assert not folder.exists()  # nothing re-created from the landing copy
