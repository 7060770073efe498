"""The installed ``atlasmart`` command ends without the interpreter's teardown, and loses nothing by it.

``run()`` (the console script) exits from its last exit handler with
``os._exit``: these tests run it in a fresh interpreter, its output on a
pipe, and compare with ``main()``: the whole output arrives and the exit code
is the command's. (Python flushes stdout itself when the script ends, before
the exit handlers run, so these hold the behaviour, not ``run``'s own flush.)
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys

from atlasmart_dagster.cli.main import main

RUN = "from atlasmart_dagster.cli.main import run; run()"


def _installed(*args: str, env_home) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", RUN, "--home", str(env_home), *args],
                          capture_output=True, text=True, timeout=120)


def test_the_whole_output_reaches_a_pipe_with_the_commands_exit_code(tmp_path):
    shown = _installed("--help", env_home=tmp_path)
    expected = io.StringIO()
    with contextlib.redirect_stdout(expected), contextlib.suppress(SystemExit):
        main(["--help"])
    assert shown.returncode == 0
    assert shown.stdout == expected.getvalue() and len(shown.stdout) > 1000


def test_a_usage_error_exits_2_with_its_one_line(tmp_path):
    shown = _installed("no-such-command", env_home=tmp_path)
    assert shown.returncode == 2
    assert shown.stderr.strip().splitlines()[-1].startswith("atlasmart: error:")


def test_a_refused_command_exits_1_and_a_json_result_is_whole(tmp_path):
    status = _installed("--json", "status", env_home=tmp_path)
    assert status.returncode == 0, status.stderr
    json.loads(status.stdout)  # the whole document, flushed before the exit
    refused = _installed("certify", "--run", "no-such-run", env_home=tmp_path)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1].startswith("atlasmart: error: run no-such-run is not")


def test_an_exception_that_escapes_main_takes_the_ordinary_way_out(tmp_path):
    """--debug re-raises: the traceback is printed and the exit is Python's own (1), not a silent os._exit."""
    shown = _installed("--debug", "certify", "--run", "no-such-run", env_home=tmp_path)
    assert shown.returncode == 1
    assert "Traceback" in shown.stderr
