"""A home's dagster.yaml written by an older release still opens after the modules it names moved.

The file is the user's and is kept across upgrades, so the run coordinator's
and the pooled storage's module paths, which moved with ``ops/runs/`` and
``store/instance/``, are renamed there in place and nothing else changes.
"""

import dagster as dg

from atlasmart_dagster.store.home import AtlasmartHome
from atlasmart_dagster.store.instance.dagster_instance import prepare_dagster_home

MOVED = {
    "atlasmart_dagster.ops.runs.lane_coordinator": "atlasmart_dagster.ops.lane_coordinator",
    "atlasmart_dagster.store.instance.dagster_sqlite_adapter": "atlasmart_dagster.store.dagster_sqlite_adapter",
}


def test_an_older_homes_module_paths_are_renamed_and_the_instance_loads(tmp_path):
    home = AtlasmartHome(tmp_path / "home").ensure()
    config = prepare_dagster_home(home) / "dagster.yaml"
    written = config.read_text()
    older = written
    for new, old in MOVED.items():
        assert f"module: {new}\n" in written
        older = older.replace(new, old)
    config.write_text(older + "# the user's own line\n")

    prepare_dagster_home(home)

    assert config.read_text() == written + "# the user's own line\n"
    with dg.DagsterInstance.from_config(str(config.parent)) as instance:
        assert type(instance.run_coordinator).__name__ == "LaneRunCoordinator"
        assert type(instance.event_log_storage).__module__.endswith("store.instance.dagster_sqlite_adapter")
