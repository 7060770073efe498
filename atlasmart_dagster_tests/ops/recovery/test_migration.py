"""Moving up: an embedded home migrated into a team deployment serves and verifies exactly what it did.

Against the real PostgreSQL (scratch databases). The sample is loaded once
into an embedded home and migrated once; the tests then read the team
deployment (verify, status, recomputed fingerprints and controls at the
certified snapshots), prove the embedded home was only read, that a second
migrate is refused without a change, that a failure before the commit leaves
the target empty, and that the deployment keeps working after the move.
"""

from __future__ import annotations

import ast
import io
import json
import sqlite3
from contextlib import ExitStack, redirect_stderr, redirect_stdout
from pathlib import Path
from types import SimpleNamespace

import psycopg2
import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.ops.recovery import migration
from atlasmart_dagster.product.published_controls import controls_of, fingerprints_of
from atlasmart_dagster.store.ledger.postgres_engine import SCHEMA
from atlasmart_dagster.store.platform import Platform
from atlasmart_dagster.store.raw_store import sha256_file
from atlasmart_dagster.store.tables import CERTIFIED_ASSETS, METRIC_GROSS_REVENUE, TABLES_BY_NAME
from atlasmart_dagster_tests.environment import Env
from atlasmart_dagster_tests.team_database import scratch_database

TEAM_ENV = ("ATLASMART_DATABASE_URL", "ATLASMART_WAREHOUSE")
PACKAGE = Path(__file__).resolve().parents[3] / "atlasmart_dagster"


def run(env: Env, *args: str) -> tuple[int, str, str]:
    """One ``atlasmart`` command on the env's home: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["--home", str(env.home), "--landing", str(env.landing), "--ephemeral-instance", *args])
    return code, out.getvalue(), err.getvalue()


def certified(platform: Platform) -> dict[tuple[str, str], dict]:
    """Per certified partition: the ledger's snapshot, fingerprint and controls, and both recomputed from the table."""
    out = {}
    for asset in CERTIFIED_ASSETS:
        spec = TABLES_BY_NAME[asset]
        for partition, served in platform.ledger.partitions.served_map(asset).items():
            cert = served.certification
            recomputed = fingerprints_of(platform.warehouse, spec, [partition], cert.snapshot_id)[partition]
            controls = (controls_of(platform.warehouse, spec, [partition], cert.snapshot_id)[partition]
                        if spec != METRIC_GROSS_REVENUE else cert.controls)
            out[(asset, partition)] = {"snapshot_id": cert.snapshot_id, "fingerprint": cert.fingerprint,
                                       "controls": cert.controls, "recomputed": (recomputed, controls)}
    return out


def data_hashes(home: Path) -> dict[str, str]:
    """SHA-256 of every file of the embedded home's data: ledger, catalog, table files, raw batches."""
    files = [home / "ledger.db", home / "catalog.db", *(home / "warehouse").rglob("*"), *(home / "raw").rglob("*")]
    return {str(p.relative_to(home)): sha256_file(p) for p in sorted(files) if p.is_file()}


def target_state(url: str, shared: Path) -> dict:
    """Everything a migration writes: ledger contents per table, catalog rows, shared files."""
    con = psycopg2.connect(url)
    try:
        with con.cursor() as cur:
            cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s ORDER BY 1", (SCHEMA,))
            ledger = {}
            for (name,) in cur.fetchall():
                cur.execute(f"SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t._seq), '')) "
                            f"FROM {SCHEMA}.{name} t")
                ledger[name] = cur.fetchone()
            cur.execute("SELECT to_regclass('iceberg_tables') IS NOT NULL")
            catalog = []
            if cur.fetchone()[0]:
                cur.execute("SELECT * FROM iceberg_tables ORDER BY table_name")
                catalog = cur.fetchall()
    finally:
        con.close()
    files = {str(p.relative_to(shared)): sha256_file(p) for p in sorted(shared.rglob("*")) if p.is_file()}
    return {"ledger": ledger, "catalog": catalog, "files": files}


@pytest.fixture(scope="module")
def moved(tmp_path_factory):
    """The sample loaded into an embedded home, then migrated with ``atlasmart migrate --to team``."""
    root = tmp_path_factory.mktemp("migration")
    with ExitStack() as stack:
        patch = stack.enter_context(pytest.MonkeyPatch.context())
        for name in TEAM_ENV:
            patch.delenv(name, raising=False)
        env = Env(root / "embedded")
        assert run(env, "demo")[0] == 0
        code, out, _ = run(env, "--json", "status")
        assert code == 0
        embedded_status = json.loads(out)
        code, out, _ = run(env, "--json", "verify")
        embedded_verify = json.loads(out)
        assert code == 0 and embedded_verify["ok"], embedded_verify["problems"]
        embedded_certified = certified(Platform.open(home=env.home, landing=env.landing))
        # Settle the WAL into ledger.db first, so that only a write could change the file.
        con = sqlite3.connect(env.home / "ledger.db")
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.close()
        hashes = data_hashes(env.home)

        url = stack.enter_context(scratch_database())
        shared = root / "shared"
        code, out, err = run(env, "--json", "migrate", "--to", "team", "--database-url", url, "--warehouse", str(shared))
        assert code == 0, err
        yield SimpleNamespace(env=env, url=url, shared=shared, report=json.loads(out), status=embedded_status,
                              verify=embedded_verify, certified=embedded_certified, hashes=hashes)


@pytest.fixture
def team(moved, monkeypatch):
    """This test runs in the migrated team deployment (the env vars set, the same home folder)."""
    monkeypatch.setenv("ATLASMART_DATABASE_URL", moved.url)
    monkeypatch.setenv("ATLASMART_WAREHOUSE", str(moved.shared))
    return moved


def test_every_certified_partition_verifies_with_the_same_snapshot_fingerprint_and_controls(team):
    assert team.report["verify"]["ok"], team.report["verify"]["problems"]
    code, out, _ = run(team.env, "--json", "verify")
    result = json.loads(out)
    assert code == 0 and result["ok"], result["problems"]
    assert result["checked"] == team.verify["checked"] == {"certified_partitions": 15, "raw_batches": 5, "days": 5}

    platform = Platform.open(home=team.env.home, landing=team.env.landing)
    assert platform.home.team and platform.home.warehouse_dir == team.shared / "warehouse"
    moved_up = certified(platform)
    assert moved_up == team.certified and len(moved_up) == 15
    for partition in moved_up.values():
        assert partition["recomputed"] == (partition["fingerprint"], partition["controls"])


def test_status_in_team_mode_shows_the_same_certified_versions(team):
    code, out, _ = run(team.env, "--json", "status")
    assert code == 0
    status = json.loads(out)
    assert {p["state"] for p in status} == {"CERTIFIED"}
    assert status == team.status  # versions, snapshot ids, fingerprints, controls, times


def test_migrated_days_show_as_served_in_the_teams_dagster_ui(team, tmp_path):
    """Dagster's run history is not migrated, but what consumers are served is: the team instance's
    certification_sensor (on by default) shows every migrated certified day on the served_* assets."""
    import dagster as dg

    from atlasmart_dagster.defs.assets.served import SERVED_ASSETS
    from atlasmart_dagster.defs.automation.certification_sensor import certification_tick
    from atlasmart_dagster.store.instance.dagster_instance import packaged_instance_config

    home = tmp_path / "team-dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text(packaged_instance_config(team=True).read_text())
    instance = dg.DagsterInstance.from_config(str(home))  # the team's instance, on the team database
    try:
        platform = Platform.open(home=team.env.home, landing=team.env.landing)
        for asset in SERVED_ASSETS:
            assert instance.get_materialized_partitions(dg.AssetKey(asset)) == set()  # no history came along
        certification_tick(instance, platform, None, actor="certification_sensor")
        days = {p["partition"] for p in team.status}
        for asset in SERVED_ASSETS:
            assert instance.get_materialized_partitions(dg.AssetKey(asset)) == days, asset
    finally:
        instance.dispose()


def test_the_migration_copies_every_table_snapshot_and_batch_and_leaves_the_embedded_home_untouched(moved):
    report = moved.report
    assert len(report["tables"]) == 10 and report["raw_batches"] == 5
    assert report["ledger_rows"]["partition_events"] > 0 and report["ledger_rows"]["batches"] == 5
    for name, table in report["tables"].items():
        assert table["metadata_location"].startswith(f"file://{moved.shared}/warehouse/atlasmart/{name}/metadata/")
    assert data_hashes(moved.env.home) == moved.hashes
    leftovers = [p.name for p in moved.shared.iterdir() if p.name not in ("warehouse", "raw")]
    assert leftovers == []  # no staging folder stays behind
    for metadata in (moved.shared / "warehouse").rglob("*.metadata.json"):
        assert str(moved.env.home) not in metadata.read_text()


def test_a_second_migrate_into_the_same_target_is_refused_and_changes_nothing(moved):
    before = target_state(moved.url, moved.shared)
    code, out, err = run(moved.env, "migrate", "--to", "team", "--database-url", moved.url,
                         "--warehouse", str(moved.shared))
    assert code == 1 and out == ""
    assert "is not empty" in err and "never merges" in err and "the ledger (schema" in err and "AtlasMart tables" in err
    assert target_state(moved.url, moved.shared) == before
    assert data_hashes(moved.env.home) == moved.hashes


def test_a_failure_before_the_commit_leaves_the_target_empty_and_the_deployment_works_after_a_retry(
        moved, tmp_path, monkeypatch):
    shared = tmp_path / "shared"

    def fail(*args, **kwargs):
        raise OSError("the shared folder went away")

    with scratch_database() as url:
        with monkeypatch.context() as patch:
            patch.setattr(migration, "_check_table", fail)  # after the ledger rows, catalog rows and folders
            code, _, err = run(moved.env, "migrate", "--to", "team", "--database-url", url, "--warehouse", str(shared))
        assert code == 1 and "the shared folder went away" in err and "left as it was" in err
        state = target_state(url, shared)
        assert all(rows == 0 for rows, _ in state["ledger"].values())
        assert state["catalog"] == [] and state["files"] == {}
        assert sorted(p.name for p in shared.iterdir()) == ["raw", "warehouse"]  # empty, as a new deployment's

        code, out, err = run(moved.env, "--json", "migrate", "--to", "team", "--database-url", url,
                             "--warehouse", str(shared))
        assert code == 0 and json.loads(out)["verify"]["ok"], err

        # The deployment carries on: a rollback writes an Iceberg commit and a ledger row with the next id.
        monkeypatch.setenv("ATLASMART_DATABASE_URL", url)
        monkeypatch.setenv("ATLASMART_WAREHOUSE", str(shared))
        platform = Platform.open(home=moved.env.home, landing=moved.env.landing)
        last_id = platform.ledger.partitions.events()[-1].id
        code, _, err = run(moved.env, "--json", "rollback", "--asset", "fact_sales", "--partition", "2026-09-20",
                           "--actor", "oncall", "--reason", "after the move")
        assert code == 0, err
        events = platform.ledger.partitions.events(asset="fact_sales", partition="2026-09-20")
        assert events[-1].state == "ROLLED_BACK" and events[-1].id == last_id + 1
        assert run(moved.env, "verify")[0] == 0
        platform.ledger.close()
    assert data_hashes(moved.env.home) == moved.hashes


def test_backup_and_restore_are_refused_in_team_mode_with_what_to_do_instead(team, tmp_path):
    for args in (["backup", "--to", str(tmp_path / "backups")], ["restore", str(tmp_path / "BK-0001")]):
        with pytest.raises(SystemExit) as refused:
            run(team.env, *args)
        assert "pg_dump" in str(refused.value.code) and str(team.shared) in str(refused.value.code)
    assert not (tmp_path / "backups").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "needs the team deployment's database and shared folder"),
        (["--database-url", "mysql://x@127.0.0.1/db", "--warehouse", "{tmp}"], "must be a postgresql:// URL"),
        (["--database-url", "postgresql://x@127.0.0.1/db", "--warehouse", "{home}/warehouse/x"], "inside its"),
    ],
)
def test_a_missing_or_wrong_target_is_a_usage_error(moved, monkeypatch, tmp_path, args, message):
    for name in TEAM_ENV:
        monkeypatch.delenv(name, raising=False)
    args = [a.format(tmp=tmp_path, home=moved.env.home) for a in args]
    code, _, err = run(moved.env, "migrate", "--to", "team", *args)
    assert code == 2 and message in err


def test_a_folder_that_is_not_an_embedded_home_is_a_usage_error(tmp_path, capsys):
    code = main(["--home", str(tmp_path), "migrate", "--to", "team", "--database-url",
                 "postgresql://x@127.0.0.1/db", "--warehouse", str(tmp_path / "shared")])
    assert code == 2 and "is not an embedded AtlasMart home" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing created in it


def test_a_ledger_table_no_declaration_knows_stops_the_migration(tmp_path):
    for name in ("ledger.db", "catalog.db"):
        sqlite3.connect(tmp_path / name).close()
    con = sqlite3.connect(tmp_path / "ledger.db")
    con.execute("CREATE TABLE mystery_events (id INTEGER PRIMARY KEY)")
    con.commit()
    con.close()
    with pytest.raises(migration.MigrationError, match="does not declare \\(mystery_events\\)"):
        migration.read_ledger(migration.embedded_source(tmp_path))


def test_every_ledger_table_declared_in_the_package_is_migrated():
    declared = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "LedgerTable" and node.args:
                declared.add(node.args[0].value)
    assert declared == {t.name for t in migration.LEDGER_TABLES}
