"""A Dagster folder this user cannot write is refused in one line naming the file and the fix, before Dagster opens it.

``atlasmart dagster-home`` is what an operator runs to get ``DAGSTER_HOME`` for
Dagster's own CLI, whose first write into such a folder is a traceback; every
atlasmart command that opens the instance probes the folder the same way.
Tests run as root, which ``chmod`` does not stop: the commands run without
root's override of file permissions (``setpriv``), as an ordinary user would.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.store.instance import dagster_instance
from atlasmart_dagster_tests.store.damaged_home import one_line


def _as_a_user(home: Path, *args: str) -> subprocess.CompletedProcess:
    """``atlasmart --home HOME ARGS`` as a process file permissions apply to."""
    atlasmart = [sys.executable, "-m", "atlasmart_dagster.cli.main", "--home", str(home), *args]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("needs setpriv(1) to run a command that file permissions apply to, as root")
        atlasmart = [setpriv, "--bounding-set=-dac_override,-dac_read_search", *atlasmart]
    return subprocess.run(atlasmart, capture_output=True, text=True, timeout=120, check=False,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


@pytest.fixture
def prepared(tmp_path, embedded, capsys) -> Path:
    """A home whose Dagster folder ``atlasmart dagster-home`` prepared (storage created)."""
    home = tmp_path / "home"
    assert main(["--home", str(home), "dagster-home"]) == 0
    assert capsys.readouterr().out.strip() == str(home / "dagster")
    assert (home / "dagster" / "history" / "runs.db").is_file()
    return home


def test_a_read_only_dagster_folder_or_database_is_refused_in_one_line_with_the_fix(prepared):
    dagster = prepared / "dagster"
    runs_db = dagster / "history" / "runs.db"
    cases = [(runs_db, 0o444, (f"cannot write {runs_db}: the file is read-only (mode 0444): make it writable "
                               f"(chmod u+w {runs_db})")),
             (dagster, 0o555, (f"cannot create files in {dagster} (mode 0555): make it writable by this user "
                               f"(chmod u+w {dagster})"))]
    for path, mode, fix in cases:
        before = path.stat().st_mode & 0o777
        path.chmod(mode)
        try:
            # dagster-home, and a command that opens the instance (certify reads the run it is given)
            for command in (("dagster-home",), ("certify", "--run", "abc")):
                done = _as_a_user(prepared, *command)
                line = one_line(done.stderr)
                assert done.returncode == 1 and not done.stdout, (command, done)
                assert f"the Dagster folder {dagster} (inside the AtlasMart home) is not writable " \
                       f"(permission denied)" in line
                assert fix in line and "or point $ATLASMART_HOME (or --home) elsewhere" in line
        finally:
            path.chmod(before)
    done = _as_a_user(prepared, "dagster-home")  # fixed: the folder is printed, and no probe file is left
    assert done.returncode == 0 and done.stdout.strip() == str(dagster), done.stderr
    assert not [p for p in dagster.rglob(".atlasmart-probe-*")]


@pytest.mark.parametrize("code, reason", [(errno.ENOSPC, "the disk is full"), (errno.EROFS, "read-only file system"),
                                          (errno.EACCES, "permission denied")])
@pytest.mark.parametrize("dagster_home_set", [False, True])
def test_a_full_or_read_only_disk_under_the_dagster_folder_is_one_line(prepared, monkeypatch, capsys, code, reason,
                                                                       dagster_home_set):
    """A full or read-only disk is hard to make here: the probe's write is refused as the machine would refuse it."""
    dagster = prepared / "dagster"
    if dagster_home_set:
        monkeypatch.setenv("DAGSTER_HOME", str(dagster))
    schedules = dagster / "schedules" / "schedules.db"
    probe = dagster_instance._probe

    def refused(path: Path) -> None:
        if path == schedules:
            raise OSError(code, os.strerror(code), str(path))
        probe(path)

    monkeypatch.setattr(dagster_instance, "_probe", refused)
    # dagster-home prepares the home's own folder; a command that opens the instance uses $DAGSTER_HOME when set
    command = ["certify", "--run", "abc"] if dagster_home_set else ["dagster-home"]
    assert main(["--home", str(prepared), *command]) == 1
    captured = capsys.readouterr()
    line = one_line(captured.err)
    assert not captured.out
    origin, where = ("$DAGSTER_HOME", "$DAGSTER_HOME") if dagster_home_set else \
        ("inside the AtlasMart home", "$ATLASMART_HOME (or --home)")
    assert f"the Dagster folder {dagster} ({origin}) is not writable ({reason}): cannot write {schedules}" in line
    assert line.endswith(f"; or point {where} elsewhere")


def test_a_wal_the_daemon_removes_while_the_folder_is_probed_is_no_error(prepared, monkeypatch, capsys):
    """SQLite deletes a ``-wal`` when the last connection closes: with ``dagster dev`` running, a command can list
    it and find it gone a moment later. That is no refusal (CI once saw "unexpected ... schedules.db-wal")."""
    dagster = prepared / "dagster"
    wal = dagster / "schedules" / "schedules.db-wal"
    wal.write_bytes(b"")
    probe = dagster_instance._probe

    def daemon_closes_first(path: Path) -> None:
        wal.unlink(missing_ok=True)  # after the listing, before the wal's own probe
        probe(path)

    monkeypatch.setattr(dagster_instance, "_probe", daemon_closes_first)
    assert main(["--home", str(prepared), "dagster-home"]) == 0
    assert capsys.readouterr().out.strip() == str(dagster)
    assert not wal.exists()
