"""What the store tests that damage a loaded home share: the home, a command run in-process and its one-line error.

``test_store_identity`` and ``test_environment_faults`` both load the sample with
``atlasmart demo`` into an embedded home once per module, then break it as an
operator or the machine would and read what each command says.
"""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster_tests.environment import Env

TEAM_ENV = ("ATLASMART_DATABASE_URL", "ATLASMART_WAREHOUSE")
EMBEDDED_UNSET = (*TEAM_ENV, "DAGSTER_HOME")  # an embedded home, whose Dagster instance is its own
BACKFILL = ("backfill", "--from", "2026-09-20", "--to", "2026-09-20", "--operator", "ana", "--reason", "repair")
QUERY = ("query", "--as", "bi_reader", "SELECT count(*) AS n FROM mart_finance_daily_sales")


def run(home: Path, landing: Path, *args: str) -> tuple[int, str, str]:
    """One ``atlasmart`` command in-process: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(["--home", str(home), "--landing", str(landing), "--ephemeral-instance", *args])
        except SystemExit as exc:  # a message, as the interpreter prints it: stderr, exit 1
            code = exc.code if isinstance(exc.code, int) else 1
            if not isinstance(exc.code, int):
                print(exc.code, file=err)
    return code, out.getvalue(), err.getvalue()


def one_line(err: str) -> str:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def demo_home(root: Path) -> Env:
    """The sample loaded and certified with ``atlasmart demo`` into ``root/home``, embedded whatever the environment."""
    with pytest.MonkeyPatch.context() as patch:
        for name in EMBEDDED_UNSET:
            patch.delenv(name, raising=False)
        env = Env(root)
        code, _, err = run(env.home, env.landing, "demo")
        assert code == 0, err
    return env
