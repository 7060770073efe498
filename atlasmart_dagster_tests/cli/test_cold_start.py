"""Cold start: ``atlasmart`` loads a command's module, and the heavy libraries, only when that command runs.

Importing the command line (what ``atlasmart --help`` pays) must not load
Dagster, the warehouse libraries or any command module; ``atlasmart status``
must not load Dagster. Each check runs a fresh interpreter, because this
test process has imported everything already. No timings are asserted: the
machine is shared; the modules loaded are what decides the cold start.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import subprocess
import sys

import pytest

from atlasmart_dagster.cli import main as cli

# Libraries that cost the most to import, none of which --help needs.
HEAVY = {
    "dagster", "dagster_celery", "pyiceberg", "sqlalchemy", "duckdb", "pyarrow", "numpy", "pandas",
    "matplotlib", "dbt", "psutil", "prometheus_client", "psycopg2",
}


def _loaded_after(code: str) -> list[str]:
    """The heavy libraries and AtlasMart modules a fresh interpreter holds after running ``code``."""
    probe = (
        f"{code}\nimport json, sys\n"
        "print(json.dumps(sorted(m for m in sys.modules "
        f"if m.split('.')[0] in {sorted(HEAVY)!r} or m.startswith('atlasmart_dagster.'))))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(result.stdout.splitlines()[-1])


def _heavy(modules: list[str]) -> list[str]:
    return sorted({m.split(".")[0] for m in modules if m.split(".")[0] in HEAVY})


def test_importing_the_command_line_loads_no_heavy_library_and_no_command():
    loaded = _loaded_after("import atlasmart_dagster.cli.main")
    assert _heavy(loaded) == []
    command_modules = {f"atlasmart_dagster.cli.{module}" for module, _ in cli.COMMANDS.values()}
    assert not command_modules & set(loaded)


def test_help_loads_no_heavy_library():
    loaded = _loaded_after(
        "import contextlib, io\nfrom atlasmart_dagster.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n    main(['--help'])"
    )
    assert _heavy(loaded) == []


def test_status_loads_its_module_only_and_not_dagster():
    loaded = _loaded_after("from atlasmart_dagster.cli.main import build_parser\nbuild_parser().parse_args(['status'])")
    assert "atlasmart_dagster.cli.inspecting" in loaded
    assert "atlasmart_dagster.cli.demo" not in loaded
    assert "dagster" not in _heavy(loaded)


def _eager_parser() -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    """The parser built all at once from every command module, as the command line did before it loaded lazily."""
    parser = cli.Parser(
        prog="atlasmart",
        description=cli.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[cli._common_options(defaults=True)],
    )
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND",
        parser_class=functools.partial(cli.Parser, parents=[cli._common_options(defaults=False)]),
    )
    for module in dict.fromkeys(module for module, _ in cli.COMMANDS.values()):
        importlib.import_module(f"atlasmart_dagster.cli.{module}").register(sub)
    return parser, sub


def test_the_command_table_lists_what_the_modules_register():
    """The help lines and order in COMMANDS give the same `atlasmart --help` as registering every module."""
    eager, sub = _eager_parser()
    assert list(sub.choices) == list(cli.COMMANDS)
    assert cli.build_parser().format_help() == eager.format_help()


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_each_command_parses_and_explains_itself_as_its_module_registers_it(name, capsys):
    _, sub = _eager_parser()
    with pytest.raises(SystemExit) as lazy_exit:
        cli.build_parser().parse_args([name, "--help"])
    assert lazy_exit.value.code == 0
    assert capsys.readouterr().out == sub.choices[name].format_help()
