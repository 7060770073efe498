"""The team deployment on object storage, against a real S3 server: the warehouse and the raw store in a bucket.

The ledger and the catalog are in a scratch Postgres database, table files
and raw batches under a fresh prefix of the server's bucket (Ceph RGW,
``atlasmart_dagster_tests/s3_server.py``). One sample load (reference, the
five sample days) is shared by the read-only tests; the tests that change
the store make their own.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from atlasmart_dagster.errors import EnvironmentFault, RawEvidenceConflict, TransientError
from atlasmart_dagster.product.access.gateway import Gateway
from atlasmart_dagster.ops.recovery import verify
from atlasmart_dagster.ops.runs.chains import run_chain, run_reference
from atlasmart_dagster.product.published_controls import fingerprints_of
from atlasmart_dagster.product.serving import partition_status
from atlasmart_dagster.store.object_store import S3Location, S3Store, object_store_fault
from atlasmart_dagster.store.raw_store import MANIFEST_NAME
from atlasmart_dagster.store.tables import CERTIFIED_ASSETS, FACT_SALES, MART_FINANCE_DAILY_SALES, TABLES_BY_NAME
from atlasmart_dagster_tests.environment import SAMPLE_DAYS, Env
from atlasmart_dagster_tests.s3_server import s3_team_environment

pytestmark = pytest.mark.slow
DAY = "2026-09-18"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The five sample days loaded and certified in a team deployment on S3 (shared by the read-only tests)."""
    with pytest.MonkeyPatch.context() as monkeypatch, s3_team_environment(monkeypatch) as prefix:
        env = Env(tmp_path_factory.mktemp("team-s3"))
        assert run_reference(env.defs, env.instance)
        assert run_chain(env.defs, env.instance, env.platform, SAMPLE_DAYS, lane="backfill").success
        env.prefix = prefix
        yield env
        env.platform.ledger.close()


def _bytes(env: Env, spec, day: str) -> list[str]:
    store = env.platform.home.objects
    return sorted(hashlib.sha256(store.read_bytes(f)).hexdigest() for f in env.warehouse.data_files(spec, [day]))


def test_tables_and_raw_batches_are_in_the_bucket_and_nothing_of_them_in_the_home(world):
    store = world.platform.home.objects
    data = store.list(f"{world.prefix}/warehouse", suffix=".parquet")
    metadata = store.list(f"{world.prefix}/warehouse", suffix=".metadata.json")
    manifests = store.list(f"{world.prefix}/raw", suffix="/" + MANIFEST_NAME)
    assert data and metadata and len(manifests) == 5
    assert all(f.startswith(f"{world.prefix}/warehouse/atlasmart/") for f in world.warehouse.data_files(FACT_SALES))
    home = world.home
    assert not (home / "catalog.db").exists() and not (home / "ledger.db").exists()
    assert not (home / "warehouse").exists() and not list((home / "uploads").rglob("*.parquet"))
    assert {partition_status(world.platform, d).state for d in SAMPLE_DAYS} == {"CERTIFIED"}


def test_certified_marts_are_served_through_the_gateway_from_the_bucket(world):
    gateway = Gateway(world.platform)
    revenue = gateway.query("bi_reader", "SELECT sum(revenue_usd) AS r FROM mart_finance_daily_sales")
    assert revenue.column("r").to_pylist() == [820]
    governed = gateway.query("cfo@atlasmart.example", "SELECT sum(value_usd) AS v FROM metric_gross_revenue")
    assert governed.column("v").to_pylist() == [820]


def test_a_rerun_on_s3_writes_byte_identical_files_with_the_same_fingerprints(world):
    before = _bytes(world, FACT_SALES, DAY)
    fingerprint = fingerprints_of(world.warehouse, MART_FINANCE_DAILY_SALES, [DAY])[DAY]
    snapshot = world.warehouse.current_snapshot_id(FACT_SALES)
    again = run_chain(world.defs, world.instance, world.platform, [DAY], lane="backfill")
    assert again.success and again.certified == [DAY]
    assert world.warehouse.current_snapshot_id(FACT_SALES) != snapshot  # a new commit ...
    assert _bytes(world, FACT_SALES, DAY) == before  # ... of the same bytes
    assert fingerprints_of(world.warehouse, MART_FINANCE_DAILY_SALES, [DAY])[DAY] == fingerprint
    assert partition_status(world.platform, DAY).certified_version == 1


def test_verify_on_s3_is_ok_and_hashes_the_raw_objects_in_the_bucket(world):
    report = verify(world.platform)
    assert report["ok"], report["problems"]
    assert report["checked"]["raw_batches"] == 5
    assert report["checked"]["certified_partitions"] == 5 * len(CERTIFIED_ASSETS)


def test_verify_finds_a_certified_file_and_a_raw_batch_lost_from_the_bucket(tmp_path, monkeypatch):
    with s3_team_environment(monkeypatch) as prefix:
        env = Env(tmp_path)
        assert run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill").success
        store = env.platform.home.objects
        lost = env.warehouse.data_files(MART_FINANCE_DAILY_SALES, [DAY])[0]
        store.delete(lost)
        raw = next(u for u in store.list(f"{prefix}/raw") if not u.endswith(MANIFEST_NAME))
        store.delete(raw)
        report = verify(env.platform)
        kinds = {(f["scope"], f["kind"]) for f in report["findings"]}
        assert ("certified", "missing_file") in kinds and ("raw", "raw_missing") in kinds
        assert any(lost in m for m in report["problems"])
        env.platform.ledger.close()


def test_the_raw_store_on_s3_is_write_once_and_keeps_the_first_evidence(world, tmp_path):
    raw = world.platform.raw_store
    stored = raw.batches(DAY)[0]
    first = raw.stored_sha256(stored)
    landed = tmp_path / stored.data_file
    landed.write_bytes(stored.data_path.read_bytes() + b"\n")
    staged = raw.stage(DAY, stored.batch_id, landed, stored.manifest_path.read_bytes())
    with pytest.raises(RawEvidenceConflict, match="already in the raw store"):
        raw.commit(staged)
    assert raw.stored_sha256(stored) == first == stored.manifest["data_sha256"]
    landed.write_bytes(stored.data_path.read_bytes())  # the same bytes again: a no-op
    same = raw.stage(DAY, stored.batch_id, landed, stored.manifest_path.read_bytes())
    assert raw.commit(same) == (raw.get(DAY, stored.batch_id), False)


def test_a_conditional_put_never_replaces_an_object_even_with_other_bytes(world, tmp_path):
    """The server refuses ``If-None-Match: *`` on an existing key (412): the first bytes stay."""
    store = world.platform.home.objects
    url = f"{world.prefix}/raw/once/evidence.bin"
    (tmp_path / "first").write_bytes(b"first")
    (tmp_path / "second").write_bytes(b"second, longer")
    assert store.put_once(url, tmp_path / "first") is True
    assert store.put_once(url, tmp_path / "second") is False
    assert store.read_bytes(url) == b"first"


def test_a_raw_commit_killed_between_its_two_puts_is_completed_by_the_next_one(world, tmp_path):
    """The data object without its manifest: the batch is not in the store, and the same bytes complete it."""
    raw = world.platform.raw_store
    landed = tmp_path / "orders.jsonl"
    landed.write_bytes(b'{"x": 1}\n')
    manifest = json.dumps({"data_file": "orders.jsonl", "data_sha256": hashlib.sha256(landed.read_bytes())
                           .hexdigest()}).encode()
    staged = raw.stage("2026-09-30", "half-1", landed, manifest)
    assert raw.store.put_once(raw._url("2026-09-30", "half-1", "orders.jsonl"), staged.data_path)
    assert raw.get("2026-09-30", "half-1") is None and not raw.holds("2026-09-30", "half-1")
    stored, newly = raw.commit(staged)
    assert newly and raw.holds("2026-09-30", "half-1") and stored.data_path.read_bytes() == landed.read_bytes()


def test_a_refused_credential_is_permanent_and_says_what_to_fix(world):
    location = world.platform.home.object_root
    wrong = S3Store(location)
    from pyarrow.fs import S3FileSystem
    from urllib.parse import urlsplit

    endpoint = urlsplit(location.endpoint)
    wrong.__dict__["filesystem"] = S3FileSystem(access_key="TESTACCESSKEY0000000", secret_key="not-the-secret",
                                                endpoint_override=endpoint.netloc, scheme=endpoint.scheme,
                                                region=location.region)
    with pytest.raises(EnvironmentFault, match=r"refused access \(HTTP 403\): check the AWS credentials") as caught:
        wrong.list(f"{world.prefix}/warehouse")
    assert "not-the-secret" not in str(caught.value)


@pytest.mark.parametrize("message,kind", [
    ("AWS Error SLOW_DOWN during PutObject operation: Please reduce your request rate.", TransientError),
    ("AWS Error UNKNOWN (HTTP status 503) during GetObject operation: HTTP response code: 503", TransientError),
    ("When reading information for key 'k': AWS Error NETWORK_CONNECTION during HeadObject: curlCode: 7", TransientError),
    ("AWS Error ACCESS_DENIED during PutObject operation: Access Denied", EnvironmentFault),
    ("AWS Error SIGNATURE_DOES_NOT_MATCH during ListObjectsV2 operation:  (Request ID: tx0)", EnvironmentFault),
    ("AWS Error NO_SUCH_BUCKET during HeadObject operation: The specified bucket does not exist", EnvironmentFault),
    ("AWS Error UNKNOWN (HTTP status 403) during HeadObject: HTTP response code: 403", EnvironmentFault),
    ("Path does not exist 'warehouse/x'", type(None)),
])
def test_object_store_errors_are_classified_for_retries(message, kind):
    assert isinstance(object_store_fault(OSError(message), S3Location("warehouse", "p").where), kind)


def test_the_certified_tables_are_readable_by_another_engine_through_the_catalog(world):
    """What Trino or Spark do with the JDBC catalog: the catalog's current metadata, then the files in the bucket."""
    from pyiceberg.catalog.sql import SqlCatalog

    from atlasmart_dagster.store.home import sqlalchemy_postgres_url

    home = world.platform.home
    catalog = SqlCatalog("atlasmart", uri=sqlalchemy_postgres_url(home.database_url),
                         **home.object_root.iceberg_properties())
    table = catalog.load_table(TABLES_BY_NAME["mart_finance_daily_sales"].identifier)
    assert table.metadata_location.startswith(f"{world.prefix}/warehouse/")
    assert sum(table.scan().to_arrow().column("revenue_usd").to_pylist()) >= 820


def test_orphan_files_in_the_bucket_are_removed_and_referenced_ones_kept(world, tmp_path):
    """A data object no snapshot references (a worker killed between its upload and its commit) is removed."""
    from atlasmart_dagster.ops.recovery.maintenance import remove_orphan_files

    store = world.platform.home.objects
    orphan = f"{world.warehouse.data_uri(FACT_SALES)}/killed-writer/sales_date={DAY}.parquet"
    (tmp_path / "o.parquet").write_bytes(store.read_bytes(world.warehouse.data_files(FACT_SALES, [DAY])[0]))
    store.upload(tmp_path / "o.parquet", orphan)
    assert remove_orphan_files(world.platform, min_age_seconds=3600)[FACT_SALES.name] == 0  # too young
    before = set(store.list(f"{world.prefix}/warehouse", ".parquet")) - {orphan}
    removed = remove_orphan_files(world.platform, min_age_seconds=0)
    assert removed[FACT_SALES.name] >= 1 and not store.exists(orphan)
    for spec in (FACT_SALES, MART_FINANCE_DAILY_SALES):
        assert all(store.exists(f) for f in world.warehouse.data_files(spec))
    assert verify(world.platform)["ok"]
    assert before >= set(store.list(f"{world.prefix}/warehouse", ".parquet"))


def test_an_embedded_home_migrates_into_a_team_deployment_on_s3_and_verifies_the_same(tmp_path, monkeypatch):
    """``atlasmart migrate --to team --warehouse s3://...``: the same certified snapshots, fingerprints and controls."""
    from atlasmart_dagster_tests.ops.recovery.test_migration import certified, run

    with s3_team_environment(monkeypatch) as prefix:
        url = __import__("os").environ["ATLASMART_DATABASE_URL"]
        for name in ("ATLASMART_DATABASE_URL", "ATLASMART_WAREHOUSE"):
            monkeypatch.delenv(name)
        env = Env(tmp_path / "embedded")
        assert run(env, "demo")[0] == 0
        before = certified(env.platform)
        code, out, err = run(env, "--json", "migrate", "--to", "team", "--database-url", url, "--warehouse", prefix)
        assert code == 0, err
        report = json.loads(out)
        assert report["shared_folder"] == prefix and report["verify"]["ok"], report["verify"]["problems"]
        assert not list(tmp_path.glob("embedded/home/.atlasmart-migration-*"))

        monkeypatch.setenv("ATLASMART_DATABASE_URL", url)
        monkeypatch.setenv("ATLASMART_WAREHOUSE", prefix)
        code, out, _ = run(env, "--json", "verify")
        assert code == 0 and json.loads(out)["ok"]
        from atlasmart_dagster.store.platform import Platform

        platform = Platform.open(home=env.home, landing=env.landing)
        assert platform.home.object_root is not None
        moved = certified(platform)
        assert moved == before and len(moved) == 15
        assert all(f.startswith(prefix) for f in platform.warehouse.data_files(FACT_SALES))
        code, _, err = run(env, "--json", "migrate", "--to", "team", "--database-url", url, "--warehouse", prefix)
        assert code != 0 and "is not empty" in err
        platform.ledger.close()
