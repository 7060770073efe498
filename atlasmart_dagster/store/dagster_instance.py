"""The Dagster instance AtlasMart runs against.

If ``DAGSTER_HOME`` is set, that instance is used (the operator's). Otherwise
``$ATLASMART_HOME/dagster`` is prepared with the project's ``dagster.yaml``
(lanes and run queue) so that runs started by ``atlasmart`` show up in the UI
started with ``DAGSTER_HOME=$ATLASMART_HOME/dagster dagster dev``.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import dagster as dg

from .home import AtlasmartHome


def packaged_instance_config() -> Path:
    return Path(str(resources.files("atlasmart_dagster") / "instance" / "dagster.yaml"))


def prepare_dagster_home(home: AtlasmartHome) -> Path:
    """Create ``<home>/dagster`` with the project's dagster.yaml (kept if it exists)."""
    target = home.dagster_home
    target.mkdir(parents=True, exist_ok=True)
    config = target / "dagster.yaml"
    if not config.exists():
        # Pin the JSON log file to this home: runs on this instance log here even
        # when ATLASMART_HOME is not set in their environment.
        text = packaged_instance_config().read_text().replace(
            "class: atlasmart_dagster.ops.observability.logs.JsonLinesHandler\n",
            f"class: atlasmart_dagster.ops.observability.logs.JsonLinesHandler\n        home: {home.root}\n",
        )
        config.write_text(text)
    return target


def dagster_instance(home: AtlasmartHome) -> dg.DagsterInstance:
    if os.environ.get("DAGSTER_HOME"):
        return dg.DagsterInstance.get()
    return dg.DagsterInstance.from_config(str(prepare_dagster_home(home)))
