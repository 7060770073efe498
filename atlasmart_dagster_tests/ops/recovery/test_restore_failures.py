"""Restore is all or nothing: a bad backup, a full disk or a read-only home never leaves a half-restored home.

Tests run as root, where ``chmod`` stops no write, so a full disk and a
read-only file system are injected through ``recovery.FILE_HOOKS``: the seam
every copy and rename of backup and restore passes, empty in production.
"""

import errno
from contextlib import contextmanager
import json
import os
import re
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest
from pyiceberg.expressions import In

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.ops import recovery
from atlasmart_dagster.ops.runs.chains import run_chain, run_reference
from atlasmart_dagster.store.platform import Platform
from atlasmart_dagster.store.raw_store import sha256_file
from atlasmart_dagster.store.tables import FACT_SALES
from atlasmart_dagster_tests.environment import SAMPLE_DAYS, Env


def tree(root: Path) -> dict[str, str]:
    """Every path under ``root`` with its content hash: equal trees mean an untouched folder."""
    return {str(p.relative_to(root)): sha256_file(p) if p.is_file() else "folder" for p in sorted(root.rglob("*"))}


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    """A certified home, backed up, then damaged (so a restore would change it): (env, backup folder).

    Read-only for the tests that share it: each proves a failed restore left it as it was.
    """
    env = Env(tmp_path_factory.mktemp("damaged"))
    run_reference(env.defs, env.instance)
    assert run_chain(env.defs, env.instance, env.platform, SAMPLE_DAYS, lane="backfill").success
    manifest = recovery.backup(env.platform, env.root / "backups")
    env.warehouse.table(FACT_SALES).delete(In("order_id", ["O1004", "O1005"]))
    return env, Path(manifest["path"])


@contextmanager
def hooked(*hooks):
    """Register ``hooks`` on the seam backup and restore share (the one ``FILE_HOOKS`` list), then remove them."""
    recovery.FILE_HOOKS.extend(hooks)
    try:
        yield
    finally:
        del recovery.FILE_HOOKS[:]


def _raise_on(errno_code: int, after: int = 0):
    """A hook failing every copy or rename after the first ``after`` with ``errno_code``; it records each call."""
    calls = []

    def hook(source: Path, destination: Path) -> None:
        calls.append(destination)
        if len(calls) > after:
            raise OSError(errno_code, os.strerror(errno_code))

    hook.calls = calls
    return hook


def _assert_untouched(env, before_home, before_parent):
    assert tree(env.home) == before_home
    assert sorted(p.name for p in env.home.parent.iterdir()) == before_parent  # no staging or aside folder left
    result = recovery.verify(Platform.open(home=env.home, landing=env.landing))  # queries and verify still work
    assert result["certified_ok"] and [f["partition"] for f in result["findings"]] == ["2026-09-20"]


def test_a_backup_missing_a_file_is_refused_before_anything_is_touched(damaged, tmp_path):
    env, backup = damaged
    incomplete = tmp_path / backup.name
    shutil.copytree(backup, incomplete)
    victim = next((incomplete / "files" / "warehouse").rglob("*.parquet"))
    victim.unlink()
    before_home, before_parent = tree(env.home), sorted(p.name for p in env.home.parent.iterdir())
    copies = _raise_on(errno.ENOSPC, after=10**9)  # never fails; counts what restore wrote

    with hooked(copies):
        with pytest.raises(recovery.RecoveryError) as refused:
            recovery.restore(incomplete, env.platform.home, env.platform.clock.now())

    message = str(refused.value)
    assert "missing" in message and str(victim.relative_to(incomplete)) in message and "\n" not in message
    assert copies.calls == []  # refused before a single file was copied
    _assert_untouched(env, before_home, before_parent)


@pytest.mark.parametrize("failure, after, says", [
    (errno.ENOSPC, 7, "No space left on device"),  # the disk fills up mid-copy
    (errno.EROFS, 0, "Read-only file system"),  # nothing can be written next to the home
])
def test_a_failure_while_staging_leaves_the_home_untouched(damaged, failure, after, says):
    env, backup = damaged
    before_home, before_parent = tree(env.home), sorted(p.name for p in env.home.parent.iterdir())
    hook = _raise_on(failure, after)

    with hooked(hook):
        with pytest.raises(recovery.RecoveryError) as stopped:
            recovery.restore(backup, env.platform.home, env.platform.clock.now())

    message = str(stopped.value)
    assert says in message and "untouched" in message and "\n" not in message
    assert len(hook.calls) == after + 1 and all(env.home not in p.parents and p != env.home for p in hook.calls)
    _assert_untouched(env, before_home, before_parent)


def test_a_corrupt_backup_is_refused_after_staging_and_the_staging_folder_removed(damaged, tmp_path):
    env, backup = damaged
    corrupt = tmp_path / backup.name
    shutil.copytree(backup, corrupt)
    victim = next((corrupt / "files" / "raw").rglob("*.jsonl"))
    victim.write_bytes(victim.read_bytes() + b"\n")
    before_home, before_parent = tree(env.home), sorted(p.name for p in env.home.parent.iterdir())

    with pytest.raises(recovery.RecoveryError, match="corrupt") as refused:
        recovery.restore(corrupt, env.platform.home, env.platform.clock.now())

    assert str(victim.relative_to(corrupt)) in str(refused.value)
    _assert_untouched(env, before_home, before_parent)


@pytest.mark.parametrize("failing", ["home aside", "restored into place", "restored into place, then put back"])
def test_a_failed_swap_puts_the_home_back(damaged, failing):
    env, backup = damaged
    before_home, before_parent = tree(env.home), sorted(p.name for p in env.home.parent.iterdir())
    failed = []
    renames_into_home_failing = {"home aside": 0, "restored into place": 1, "restored into place, then put back": 2}

    def rename_fails(source: Path, destination: Path) -> None:
        aside = destination.name.startswith(f"{env.home.name}.damaged-")
        if (failing == "home aside" and aside) or (
                destination == env.home and len(failed) < renames_into_home_failing[failing]):
            failed.append(source)
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY))

    with hooked(rename_fails):
        with pytest.raises(recovery.RecoveryError) as stopped:
            recovery.restore(backup, env.platform.home, env.platform.clock.now())

    message = str(stopped.value)
    assert "\n" not in message and os.strerror(errno.EBUSY) in message
    if not failing.endswith("put back"):
        assert len(failed) == 1 and "untouched" in message
        _assert_untouched(env, before_home, before_parent)
        return
    # the home could not be put back either: the message says where both folders are, and nothing is lost
    staged, aside = failed
    assert not env.home.exists() and str(aside) in message and str(staged) in message
    assert tree(aside) == before_home
    staged.rename(env.home)  # what the message tells the operator to do
    assert recovery.verify(Platform.open(home=env.home, landing=env.landing))["ok"]
    shutil.rmtree(aside)  # leave the shared home as the other tests expect it: damaged again
    Platform.open(home=env.home, landing=env.landing).warehouse.table(FACT_SALES).delete(
        In("order_id", ["O1004", "O1005"]))


@pytest.mark.parametrize("manifest, says", [
    (None, "is not a backup (no manifest.json)"),
    ("{not json", "not valid JSON"),
    ('{"backup_id": "BK-0009", "files": []}', "it lacks home, ledger_sha256, catalog_sha256"),
])
def test_a_folder_that_is_no_backup_is_refused_in_one_line(tmp_path, manifest, says):
    folder = tmp_path / "BK-0009"
    folder.mkdir()
    if manifest is not None:
        (folder / "manifest.json").write_text(manifest)
    home = Platform.open(home=tmp_path / "home").home
    before = tree(home.root)
    with pytest.raises(recovery.RecoveryError, match=re.escape(says)) as refused:
        recovery.restore(folder, home, datetime(2026, 9, 23, tzinfo=timezone.utc))
    assert "\n" not in str(refused.value) and tree(home.root) == before


def test_restore_swaps_in_the_staged_home_and_keeps_the_damaged_one_beside_it(env, tmp_path, capsys):
    run_reference(env.defs, env.instance)
    assert run_chain(env.defs, env.instance, env.platform, SAMPLE_DAYS, lane="backfill").success
    manifest = recovery.backup(env.platform, tmp_path / "backups")
    env.warehouse.table(FACT_SALES).delete(In("order_id", ["O1004", "O1005"]))
    (env.home / "artifacts").mkdir()
    (env.home / "artifacts" / "notice.md").write_text("kept")  # not part of the product's data: stays with the home
    damaged_fact = tree(env.home / "warehouse")

    def locks_stuck(source: Path, destination: Path) -> None:
        if destination == env.home / "locks":
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY))

    base = ["--home", str(env.home), "--landing", str(env.landing), "--json"]
    with hooked(locks_stuck):
        assert main([*base, "restore", manifest["path"]]) == 0
    report = json.loads(capsys.readouterr().out)

    aside = Path(report["aside"])
    assert aside.parent == env.home.parent and aside.name.startswith(f"{env.home.name}.damaged-")
    assert set(report["moved_aside"]) <= {p.name for p in aside.iterdir()} and "warehouse" in report["moved_aside"]
    assert tree(aside / "warehouse") == damaged_fact  # the damaged state is evidence, never deleted
    assert (env.home / "artifacts" / "notice.md").read_text() == "kept"
    assert "artifacts" in report["carried_over"]
    # what could not be carried over stays with the evidence, and the restore says so
    assert report["left_aside"] == ["locks"] and (aside / "locks").is_dir()
    assert report["verify"]["ok"], report["verify"]["problems"]
    assert [p.name for p in env.home.parent.iterdir() if ".restoring-" in p.name] == []


def test_backup_on_a_full_disk_is_one_clean_error_and_leaves_no_partial_backup(loaded_env_for_backup):
    env = loaded_env_for_backup
    with hooked(_raise_on(errno.ENOSPC, after=3)):
        with pytest.raises(recovery.RecoveryError, match="No space left on device") as stopped:
            recovery.backup(env.platform, env.root / "full")
    assert "\n" not in str(stopped.value)
    assert list((env.root / "full").iterdir()) == []


@pytest.fixture
def loaded_env_for_backup(env):
    run_reference(env.defs, env.instance)
    assert run_chain(env.defs, env.instance, env.platform, SAMPLE_DAYS, lane="backfill").success
    return env
