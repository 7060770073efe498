"""Environment faults name the file and the remedy in one line; commands that only read work on a read-only home.

The home lives on its own small file system (a tmpfs), so it can really be
full, and is made read-only by a read-only bind mount over it: tests run as
root, where ``chmod`` stops no write.
Without the right to mount they skip. A leftover ``-shm`` with the wrong
permissions is shown by a command run without root's override of file
permissions (``setpriv``), as an ordinary user would meet it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
import sqlalchemy.exc

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.store.platform import Platform, quiet_postgres_retries
from atlasmart_dagster_tests.store.damaged_home import BACKFILL, QUERY, demo_home, one_line, run


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, text=True)


@pytest.fixture(scope="module")
def mounted(tmp_path_factory):
    """The sample loaded with ``atlasmart demo`` into a home that is its own 64 MB file system."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root and mount(8) to make a real read-only or full file system")
    root = tmp_path_factory.mktemp("faults")
    home = root / "home"
    home.mkdir()
    try:
        _mount("-t", "tmpfs", "-o", "size=64m", "tmpfs", str(home))
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot mount a tmpfs here ({exc.stderr.strip()})")
    try:
        env = demo_home(root)
        assert env.home == home
        yield SimpleNamespace(home=home, landing=env.landing)
    finally:
        while os.path.ismount(home):  # the tmpfs, and a read-only bind mount a failed test may have left over it
            subprocess.run(["umount", "-l", str(home)], check=True)


@pytest.fixture
def faults(mounted, embedded):
    return mounted


def test_a_read_only_home_answers_status_controls_and_verify_and_refuses_writes_in_one_line(faults):
    home = faults.home
    # The home read-only in place (a read-only bind mount over it), as a read-only volume would be.
    _mount("--bind", str(home), str(home))
    try:
        _mount("-o", "remount,bind,ro", str(home))
        code, out, err = run(home, faults.landing, "--json", "status")
        assert code == 0, err
        assert {p["state"] for p in json.loads(out)} == {"CERTIFIED"}
        code, out, err = run(home, faults.landing, "--json", "controls", "--asset", "mart_finance_daily_sales")
        assert code == 0 and len(json.loads(out)["partitions"]) == 5, err
        code, out, err = run(home, faults.landing, "--json", "verify")
        assert code == 0 and json.loads(out)["ok"], err
        # A query writes its access-log row, a backfill its request: refused, naming the file and the remedy.
        for command in (QUERY, BACKFILL):
            code, _, err = run(home, faults.landing, *command)
            line = one_line(err)
            assert code == 1 and f"cannot write {home / 'ledger.db'}: the home is on a read-only file system" in line
            assert "remount it read-write" in line
    finally:
        # The bind mount goes (lazily: connections the commands left open still hold it); writable again.
        subprocess.run(["umount", "-l", str(home)], check=True)
    assert run(home, faults.landing, *QUERY)[0] == 0


def test_a_full_disk_is_named_with_the_remedy_and_the_home_works_once_space_is_freed(faults):
    home = faults.home
    fill = home / "fill"
    with open(fill, "wb") as handle:
        try:
            while True:
                handle.write(b"\0" * (1 << 20))
                handle.flush()
        except OSError:
            pass
    try:
        code, _, err = run(home, faults.landing, *BACKFILL)
        line = one_line(err)
        assert code == 1 and f"cannot write {home / 'ledger.db'}: the disk holding it is full" in line
        assert "free space on it" in line
    finally:
        fill.unlink()
    code, _, err = run(home, faults.landing, *BACKFILL)
    assert code == 0, err


@pytest.mark.slow
def test_a_leftover_shm_with_the_wrong_permissions_heals_or_is_named_with_its_fix(tmp_path, embedded):
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv(1) to run a command that file permissions apply to")
    home = tmp_path / "home"
    platform = Platform.open(home)
    platform.ledger.partitions.events()  # the home's first use creates its stores
    platform.ledger.close()  # the last connection removes the -wal and -shm
    assert not (home / "ledger.db-shm").exists()
    atlasmart = os.path.join(os.path.dirname(sys.executable), "atlasmart")

    def as_a_user(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([setpriv, "--bounding-set=-dac_override,-dac_read_search", atlasmart, "--home",
                               str(home), *args], capture_output=True, text=True, timeout=120,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    (home / "ledger.db").chmod(0o444)
    assert as_a_user("status").returncode == 0  # SQLite makes its -shm as the database's mode: 0444
    (home / "ledger.db").chmod(0o644)  # the operator fixes the database, not its -shm
    assert (home / "ledger.db-shm").stat().st_mode & 0o777 == 0o444
    shm = home / "ledger.db-shm"
    os.chown(shm, 65534, 65534)  # another user's -shm: named, with the fix
    done = as_a_user("backup", "--to", str(tmp_path / "backups"))
    line = one_line(done.stderr)
    assert done.returncode == 1 and f"{shm} is not writable (mode 0444)" in line
    assert f"fix its permissions (chmod u+w {shm}, as its owner)" in line
    os.chown(shm, os.geteuid(), os.getegid())  # its owner's own -shm heals: the next command works
    done = as_a_user("backup", "--to", str(tmp_path / "backups"))
    assert done.returncode == 0, done.stderr
    assert not shm.exists() or shm.stat().st_mode & 0o777 == 0o644  # the last connection removes it


def test_a_postgres_outage_is_one_line_at_once(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ATLASMART_DATABASE_URL", "postgresql://postgres@127.0.0.1:1/atlasmart")  # nothing listens
    monkeypatch.setenv("ATLASMART_WAREHOUSE", str(tmp_path / "shared"))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    started = time.monotonic()
    code = main(["--home", str(tmp_path / "home"), "certify", "--run", "abc"])  # needs the team's Dagster instance
    err = capsys.readouterr().err
    assert code == 1 and time.monotonic() - started < 5  # not after Dagster's six connection retries
    line = one_line(err)
    assert "the team database postgresql://postgres@127.0.0.1:1/atlasmart is unreachable" in line
    assert "check that PostgreSQL is running" in line


def test_dagster_postgres_connection_retries_go_to_a_quiet_logger(caplog):
    from dagster_postgres.utils import DagsterPostgresException, retry_pg_connection_fn

    quiet_postgres_retries()

    def refused():
        raise sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception("connection refused"))

    with caplog.at_level(logging.DEBUG, logger="atlasmart.postgres"):
        with pytest.raises(DagsterPostgresException):
            retry_pg_connection_fn(refused, retry_limit=2, retry_wait=0.01)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    quiet = [r for r in caplog.records if r.name == "atlasmart.postgres"]
    assert len(quiet) == 3 and all("Retrying failed database connection" in r.getMessage() for r in quiet)
