"""Hostile landing structure: a data file or manifest that is not a regular file inside its day folder is
refused at readiness with the reason, and nothing enters the raw store; a manifest repeating a key is refused."""

import json
import os
import shutil
import stat

import pytest

from atlasmart_dagster.defs.automation.sensors import plan_manifest_runs
from atlasmart_dagster.errors import SourceNotReady
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.readiness import prepare_partition
from atlasmart_dagster.store.landing import parse_manifest
from atlasmart_dagster.store.raw_store import NotARegularFile
from atlasmart_dagster.store.warehouse import duckdb_connection
from atlasmart_dagster_tests.landing_batches import read_manifest

DAY = "2026-09-20"
DATA = "order_lines.jsonl"


def refusal(env, day=DAY) -> str:
    with pytest.raises(SourceNotReady) as info:
        prepare_partition(env.platform, day, env.platform.clock.now(), duckdb_connection())
    assert not list((env.home / "raw").rglob(f"sales_date={day}/batch_id=*"))  # nothing admitted
    assert not any((env.home / "raw" / ".staging").glob("*")) if (env.home / "raw" / ".staging").exists() else True
    return str(info.value)


def move_outside(env, name: str):
    """Move the day's file out of the landing zone (same bytes, so the manifest's hash still matches)."""
    outside = env.root / "outside" / name
    outside.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(env.day_dir(DAY) / name, outside)
    return outside


def test_a_data_file_that_links_to_a_file_outside_the_landing_zone_is_refused(env):
    outside = move_outside(env, DATA)
    (env.day_dir(DAY) / DATA).symlink_to(outside)
    text = refusal(env)
    assert f"data file {DATA} is a symbolic link (to {outside}), not a regular file inside the landing folder" in text
    assert "nothing was admitted" in text


def test_a_loaded_chain_certifies_nothing_from_a_linked_data_file(env):
    outside = move_outside(env, DATA)
    (env.day_dir(DAY) / DATA).symlink_to(outside)
    outcome = run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill")
    assert not outcome.success and outcome.certified == []
    assert "is a symbolic link" in outcome.failures[0]
    assert env.ledger.batches.list(DAY) == []


def test_a_data_file_linked_inside_its_own_folder_is_refused_too(env):
    folder = env.day_dir(DAY)
    (folder / DATA).rename(folder / "real.jsonl")
    (folder / DATA).symlink_to("real.jsonl")
    assert "is a symbolic link (to real.jsonl)" in refusal(env)


def test_a_named_pipe_is_refused_without_blocking_the_reader(env):
    folder = env.day_dir(DAY)
    (folder / DATA).unlink()
    os.mkfifo(folder / DATA)  # opening it for reading would wait for a writer for ever
    assert f"data file {DATA} is a named pipe, not a regular file" in refusal(env)


def test_a_device_is_refused(env):
    folder = env.day_dir(DAY)
    (folder / DATA).unlink()
    try:
        os.mknod(folder / DATA, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # /dev/null's numbers
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD")
    assert f"data file {DATA} is a device, not a regular file" in refusal(env)


def test_a_data_file_that_is_a_folder_is_refused(env):
    folder = env.day_dir(DAY)
    (folder / DATA).unlink()
    (folder / DATA).mkdir()
    assert f"data file {DATA} is a folder, not a regular file" in refusal(env)


def test_a_day_folder_that_links_outside_the_landing_zone_is_refused(env):
    elsewhere = env.root / "elsewhere"
    shutil.move(env.day_dir(DAY), elsewhere)
    env.day_dir(DAY).symlink_to(elsewhere, target_is_directory=True)
    text = refusal(env)
    assert f"the landing folder sales_date={DAY}/ is a symbolic link (to {elsewhere})" in text


def test_a_manifest_that_links_elsewhere_is_refused_and_the_sensor_says_why(env):
    outside = move_outside(env, "_manifest.json")
    (env.day_dir(DAY) / "_manifest.json").symlink_to(outside)
    assert "_manifest.json is a symbolic link" in refusal(env)
    _, skipped = plan_manifest_runs(env.platform)
    assert any(s.startswith(f"{DAY}: manifest unusable (_manifest.json is a symbolic link") for s in skipped)


def test_the_raw_store_never_copies_a_link_swapped_in_after_the_checks(env, tmp_path):
    target = tmp_path / "secret.jsonl"
    target.write_text('{"x": 1}\n')
    link = tmp_path / DATA
    link.symlink_to(target)
    with pytest.raises(NotARegularFile):
        env.platform.raw_store.stage(DAY, "ERP-20260920-01", link, b"{}")
    assert not any((env.home / "raw" / ".staging").glob("*"))


@pytest.mark.parametrize("repeated", ["expected_rows", "batch_id", "data_sha256"])
def test_a_manifest_repeating_a_key_is_refused(env, repeated):
    manifest = read_manifest(env.day_dir(DAY))
    text = json.dumps(manifest, indent=2)
    value = json.dumps(0 if repeated == "expected_rows" else "X" * 64)
    (env.day_dir(DAY) / "_manifest.json").write_text(text[:-2] + f',\n  "{repeated}": {value}\n}}')
    parsed, problems = parse_manifest((env.day_dir(DAY) / "_manifest.json").read_bytes(), DAY)
    assert parsed is None
    assert problems == [f"manifest repeats the key {repeated} (which value would count is ambiguous)"]
    assert "manifest repeats the key" in refusal(env)
