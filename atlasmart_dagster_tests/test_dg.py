"""``dg`` loads the project as it is: ``dg check defs`` and ``dg list defs`` through ``[tool.dg]``.

Runs the installed ``dg`` (dagster-dg-cli, a pinned dependency) from the
project root as a user would, on a scratch AtlasMart home whose Dagster
instance ``atlasmart dagster-home`` prepared (what ``scripts/dev ui`` does).
A missing ``dg`` fails these tests rather than skipping them: it is a
dependency of the package, so its absence is a broken install, and CI must
never pass without having run ``dg check defs``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from atlasmart_dagster.definitions import build_definitions

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DG = BIN / "dg"


@pytest.fixture(scope="module")
def shell(tmp_path_factory) -> dict[str, str]:
    """The environment of a shell with the venv activated, on a scratch home with the project's instance."""
    assert DG.exists(), f"{DG} is missing: dagster-dg-cli is a dependency; reinstall with pip install -e ."
    home = tmp_path_factory.mktemp("dg") / "home"
    # VIRTUAL_ENV as activation sets it: dg warns when the project's .venv is not the active one.
    env = {**os.environ, "ATLASMART_HOME": str(home), "VIRTUAL_ENV": sys.prefix}
    env.pop("DAGSTER_HOME", None)
    prepared = subprocess.run([BIN / "atlasmart", "dagster-home"], env=env, capture_output=True, text=True,
                              timeout=120)
    assert prepared.returncode == 0, prepared.stderr
    env["DAGSTER_HOME"] = prepared.stdout.strip()
    return env


def _dg(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    result = subprocess.run([DG, *args], cwd=REPO, env=shell, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"dg {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result


def test_dg_check_defs_passes(shell):
    result = _dg(shell, "check", "defs")
    assert "All definitions loaded successfully." in result.stdout + result.stderr


def test_dg_list_defs_lists_what_the_definitions_hold(shell):
    listed = json.loads(_dg(shell, "list", "defs", "--json").stdout)
    defs = build_definitions()
    assert {a["asset_key"] for a in listed["assets"]} == {
        spec.key.to_user_string() for spec in defs.resolve_all_asset_specs()}
    assert {c["key"] for c in listed["asset_checks"]} == {
        f"{key.asset_key.to_user_string()}:{key.name}" for key in defs.resolve_asset_graph().asset_check_keys}
    assert {j["name"] for j in listed["jobs"]} == {j.name for j in defs.jobs}
    assert {s["name"] for s in listed["schedules"]} == {s.name for s in defs.schedules}
    assert {s["name"] for s in listed["sensors"]} == {s.name for s in defs.sensors}


def test_dg_dagster_and_the_workspace_name_one_code_location():
    """``[tool.dg]`` (dg), ``[tool.dagster]`` (dagster dev / asset materialize) and workspace.yaml (the daemon
    tests, dagster dev -w) must load the same module under the same location name, or runs launched one way
    would show up under another location in the UI."""
    tool = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]
    (entry,) = yaml.safe_load((REPO / "workspace.yaml").read_text())["load_from"]
    workspace = entry["python_module"]
    assert tool["dg"]["directory_type"] == "project"
    project = tool["dg"]["project"]
    assert project["root_module"] == "atlasmart_dagster"
    assert (project["code_location_target_module"] == tool["dagster"]["module_name"]
            == workspace["module_name"] == "atlasmart_dagster.definitions")
    assert (project["code_location_name"] == tool["dagster"]["code_location_name"]
            == workspace["location_name"])
