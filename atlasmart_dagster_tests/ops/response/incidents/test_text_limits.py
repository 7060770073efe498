"""Free text has a documented size limit (issue 36 item 3): a longer value is exit 2, one line, nothing recorded."""

import time

import pytest

from atlasmart_dagster.cli.main import main


@pytest.mark.parametrize("option, size", [("--text", 10_001), ("--actor", 201), ("--reason", 10 * 1024 * 1024)])
def test_an_over_long_value_is_a_usage_error_and_nothing_is_recorded(env, capsys, option, size):
    args = {"--text": "x", "--actor": "a"}
    args[option] = "x" * size
    argv = ["--home", str(env.home), "--landing", str(env.landing), "--clock", "system", "--ephemeral-instance", "incident", "report",
            *[part for pair in args.items() for part in pair]]
    start = time.monotonic()
    assert main(argv) == 2
    assert time.monotonic() - start < 5
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and option in err and "at most" in err
    assert main(["--home", str(env.home), "--landing", str(env.landing), "--clock", "system", "--ephemeral-instance", "incident", "list", "--json"]) == 0
    assert "INC-" not in capsys.readouterr().out  # nothing recorded


def test_a_value_at_the_limit_is_taken(env, capsys):
    assert main(["--home", str(env.home), "--landing", str(env.landing), "--clock", "system", "--ephemeral-instance", "incident", "report", "--text", "x" * 10_000,
                 "--actor", "a" * 200]) == 0
