"""A home copied to another path (``cp -a``), or a backup restored at another path, is refused naming the command
that relocates it; relocated, it verifies and serves exactly what the original serves, and the original is untouched.

The sample is loaded and certified with ``atlasmart demo`` once per module;
each test works on copies of it.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from atlasmart_dagster.product.published_controls import fingerprints_of
from atlasmart_dagster.store.platform import Platform
from atlasmart_dagster.store.tables import TABLES_BY_NAME
from atlasmart_dagster_tests.store.damaged_home import EMBEDDED_UNSET, QUERY, demo_home, one_line, run


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    """The certified sample in an embedded home with its Dagster folder prepared (its dagster.yaml names the home)."""
    root = tmp_path_factory.mktemp("relocation")
    env = demo_home(root)
    code, out, err = run(env.home, env.landing, "dagster-home")
    assert code == 0 and out.strip() == str(env.home / "dagster"), err
    return SimpleNamespace(home=env.home, landing=env.landing)


@pytest.fixture
def source(original, monkeypatch):
    """The original home, each test in the embedded deployment whatever the environment says."""
    for name in EMBEDDED_UNSET:
        monkeypatch.delenv(name, raising=False)
    return original


def tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` with its SHA-256 (the lock files' holder notes left out). A SQLite database is
    hashed by its contents, its write-ahead log included: when a reader checkpoints the log into the file is
    SQLite's business, not a change of what the home holds."""
    return {str(p.relative_to(root)): _digest(p) for p in sorted(root.rglob("*"))
            if p.is_file() and p.parent.name != "locks" and not p.name.endswith(("-wal", "-shm"))}


def _digest(path: Path) -> str:
    if path.suffix != ".db":
        return hashlib.sha256(path.read_bytes()).hexdigest()
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return hashlib.sha256("\n".join(con.iterdump()).encode()).hexdigest()
    finally:
        con.close()


def status(home: Path, landing: Path) -> list[dict]:
    code, out, err = run(home, landing, "--json", "status")
    assert code == 0, err
    return json.loads(out)


def recomputed_fingerprints(home: Path, landing: Path, served: list[dict]) -> dict[tuple[str, str], str]:
    """Each certified version's fingerprint recomputed from the table files, at the snapshot the status names."""
    platform = Platform.open(home=home, landing=landing)
    try:
        return {(a["asset"], day["partition"]): fingerprints_of(platform.warehouse, TABLES_BY_NAME[a["asset"]],
                                                               [day["partition"]], a["snapshot_id"])[day["partition"]]
                for day in served for a in day["assets"]}
    finally:
        platform.ledger.close()


def naming(root: Path, old: Path) -> list[str]:
    """The files under ``root`` whose bytes name the path ``old`` (as a folder)."""
    needle = f"{old}/".encode()
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def assert_same_product(copy: Path, source) -> None:
    served = status(source.home, source.landing)
    assert status(copy, source.landing) == served
    assert {d["state"] for d in served} == {"CERTIFIED"}
    before = recomputed_fingerprints(source.home, source.landing, served)
    assert recomputed_fingerprints(copy, source.landing, served) == before
    assert before == {(a["asset"], d["partition"]): a["fingerprint"] for d in served for a in d["assets"]}
    code, out, err = run(copy, source.landing, "--json", "verify")
    assert code == 0 and json.loads(out)["ok"], err


def test_a_copied_home_is_refused_naming_relocate_then_relocated_it_serves_the_same(source, tmp_path):
    untouched = tree(source.home)
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(source.home), str(copy)], check=True)
    code, _, err = run(copy, source.landing, "status")
    line = one_line(err)
    assert code == 1 and f"the home was copied or moved here from {source.home}" in line
    assert "run `atlasmart relocate`" in line

    code, out, err = run(copy, source.landing, "--json", "relocate")
    assert code == 0, err
    report = json.loads(out)
    assert report["relocated"] and report["from"] == str(source.home) and report["to"] == str(copy)
    assert report["tables"] == 10 and report["dagster_config"] and report["verify"]["ok"]
    assert naming(copy, source.home) == []  # no metadata, catalog row or config reads the original any more
    assert_same_product(copy, source)
    assert run(copy, source.landing, *QUERY)[0] == 0  # writes (its access-log row) go to the copy
    assert tree(source.home) == untouched

    code, out, err = run(copy, source.landing, "--json", "relocate")  # again: nothing to do
    assert code == 0 and not json.loads(out)["relocated"], err


def test_a_moved_home_is_relocated_without_its_old_path(source, tmp_path):
    """Moved (its old path gone), relocation reads only the home's own files."""
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(source.home), str(copy)], check=True)
    assert run(copy, source.landing, "relocate")[0] == 0
    moved = tmp_path / "moved"
    copy.rename(moved)
    code, out, err = run(moved, source.landing, "--json", "relocate")
    assert code == 0 and json.loads(out)["from"] == str(copy), err
    assert naming(moved, copy) == []
    assert_same_product(moved, source)


def test_a_copy_missing_a_data_file_is_refused_and_left_as_it_was(source, tmp_path):
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(source.home), str(copy)], check=True)
    lost = next((copy / "warehouse" / "atlasmart" / "fact_sales" / "data").rglob("*.parquet"))
    lost.unlink()
    before = tree(copy)
    code, _, err = run(copy, source.landing, "relocate")
    line = one_line(err)
    assert code == 1 and f"{lost} is missing: the copy lacks a data file" in line and "nothing was changed" in line
    assert tree(copy) == before


def test_a_backup_taken_at_another_path_restores_here_with_relocate(source, tmp_path):
    code, out, err = run(source.home, source.landing, "--json", "backup", "--to", str(tmp_path / "backups"))
    assert code == 0, err
    untouched = tree(source.home)  # (the backup's id is allocated in its ledger)
    backup = json.loads(out)["path"]
    elsewhere = tmp_path / "elsewhere"
    code, _, err = run(elsewhere, source.landing, "restore", backup)
    line = one_line(err)
    assert code == 1 and f"belongs to home {source.home}" in line
    assert f"run `atlasmart restore {backup} --relocate`" in line
    assert not (elsewhere / "catalog.db").exists()

    code, out, err = run(elsewhere, source.landing, "--json", "restore", backup, "--relocate")
    assert code == 0, err
    report = json.loads(out)
    assert report["relocated_from"] == str(source.home) and report["verify"]["ok"]
    assert naming(elsewhere, source.home) == []
    assert_same_product(elsewhere, source)
    with sqlite3.connect(elsewhere / "catalog.db") as con:
        locations = [r[0] for r in con.execute("SELECT metadata_location FROM iceberg_tables")]
    assert locations and all(loc.startswith(f"file://{elsewhere}/warehouse/") for loc in locations)
    assert tree(source.home) == untouched
