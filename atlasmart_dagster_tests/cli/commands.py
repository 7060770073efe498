"""One ``atlasmart`` command run in-process, seen as the shell would see it: the command-line tests share these."""

from __future__ import annotations

from atlasmart_dagster.cli.main import main
from atlasmart_dagster_tests.environment import Env


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of one command, whether it returns or exits."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        # sys.exit("message") prints the message and exits 1; sys.exit(n) exits n
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_in(env: Env, capsys, *argv: str) -> tuple[int, str, str]:
    """``run`` on the scratch environment's home and landing zone, on its logical clock."""
    return run(capsys, "--home", str(env.home), "--landing", str(env.landing), "--clock", "logical",
               "--ephemeral-instance", *argv)


def one_line(err: str) -> str:
    """The one line a refused command prints, with no traceback."""
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]
