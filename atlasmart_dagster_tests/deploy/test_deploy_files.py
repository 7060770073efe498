"""The team deployment files are accepted by the tools that read them and stay in step with the project.

What is checked, and how:

* ``deploy/dagster.yaml`` (a link to the packaged ``instance/dagster.team.yaml``)
  passes Dagster's own instance config validation, keeps the embedded
  instance's lanes, run queue, run monitoring and JSON log, and opens as a real
  Postgres-backed instance on a throwaway database (created and dropped here;
  skipped without a reachable server, failed under ``CI=true``);
* ``deploy/workspace.yaml`` passes Dagster's workspace schema and loads the
  project's module;
* ``deploy/celery.yaml`` passes dagster-celery's worker config validation (the
  function ``dagster-celery worker start -y`` calls);
* ``deploy/Dockerfile`` copies only files that exist and starts the project's
  module;
* ``deploy/helm/values.yaml`` parses, carries the top-level keys Dagster's Helm
  chart reads and repeats the embedded lanes. ``helm template``/``helm lint``
  were NOT run here (no Helm binary, no chart download, no cluster), and no
  image was built (no registry access for the base image).

Dagster has no public function that validates an instance or workspace file
without opening it; the two private validators used here are the ones
``dagster-webserver`` and ``dagster-daemon`` run on start-up, so an upgrade
that changes them fails these tests rather than a deployment.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import os
import re
import shlex
import shutil
import tomllib
from importlib import resources
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._core.instance.config import dagster_instance_config
from dagster._core.workspace.config_schema import ensure_workspace_config
from dagster_celery.cli import get_validated_config

from atlasmart_dagster_tests.team_database import scratch_database

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
INSTANCE_DIR = Path(str(resources.files("atlasmart_dagster") / "instance"))
EMBEDDED = INSTANCE_DIR / "dagster.yaml"
TEAM = INSTANCE_DIR / "dagster.team.yaml"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
MODULE = PYPROJECT["tool"]["dagster"]["module_name"]
LOCATION = PYPROJECT["tool"]["dagster"]["code_location_name"]
WAREHOUSE_ENV = "ATLASMART_WAREHOUSE"
DATABASE_ENV = "ATLASMART_DATABASE_URL"
BROKER_ENV = "ATLASMART_CELERY_BROKER"

# What the team instance may add to the embedded one; every other setting must be the same.
TEAM_ONLY_SETTINGS = {"storage", "run_launcher"}


def _validated(path: Path) -> dict:
    """The instance config at ``path`` as Dagster validates it (raises on any schema error)."""
    config, custom_instance_class = dagster_instance_config(str(path.parent), path.name)
    assert custom_instance_class is None, f"{path} must not swap Dagster's instance class"
    return dict(config)


def _helm_values() -> dict:
    return yaml.safe_load((DEPLOY / "helm" / "values.yaml").read_text())


# --- the instance config -----------------------------------------------------------------------


def test_deploy_instance_config_is_a_relative_link_to_the_packaged_one():
    link = DEPLOY / "dagster.yaml"
    assert link.is_symlink(), "deploy/dagster.yaml must link to the packaged team config (one source of truth)"
    assert not os.path.isabs(os.readlink(link)), "a relative link works in every clone"
    assert link.resolve() == TEAM.resolve()


def test_packaged_team_config_ships_in_the_wheel():
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["atlasmart_dagster"]
    relative = TEAM.relative_to(INSTANCE_DIR.parent).as_posix()
    assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns), (
        f"{relative} is not matched by [tool.setuptools.package-data] {patterns}"
    )


@pytest.mark.parametrize("path", [DEPLOY / "dagster.yaml", TEAM], ids=["deploy", "packaged"])
def test_team_instance_config_is_accepted_by_dagster(path):
    config = _validated(path)
    assert config["storage"] == {"custom": {
        "module": "atlasmart_dagster.store.instance.dagster_postgres_adapter", "class": "BatchingPostgresStorage",
        "config": {"postgres_url": {"env": DATABASE_ENV}}}}, (
        "storage must be dagster-postgres (with batched check evaluations) on the URL in $ATLASMART_DATABASE_URL"
    )
    assert config["run_launcher"] == {"module": "dagster", "class": "DefaultRunLauncher"}
    assert config["telemetry"] == {"enabled": False}


def _backfill_limits(limits: list[dict]) -> dict:
    return {(lim["key"], lim.get("value")): lim["limit"] for lim in limits
            if lim.get("value") == "backfill" or lim["key"] == "dagster/backfill"}


def _other_limits(limits: list[dict]) -> list[dict]:
    return [lim for lim in limits if lim.get("value") != "backfill" and lim["key"] != "dagster/backfill"]


def test_team_instance_keeps_the_embedded_lanes_queue_monitoring_and_log():
    """The same lanes, except that the team's backfill lane admits more runs (its steps run on workers)."""
    embedded, team = _validated(EMBEDDED), _validated(TEAM)
    team_limits = team["concurrency"]["runs"]["tag_concurrency_limits"]
    embedded_limits = embedded["concurrency"]["runs"]["tag_concurrency_limits"]
    assert _other_limits(team_limits) == _other_limits(embedded_limits)
    team_backfill, embedded_backfill = _backfill_limits(team_limits), _backfill_limits(embedded_limits)
    assert team_backfill.keys() == embedded_backfill.keys()
    assert all(team_backfill[k] >= embedded_backfill[k] for k in team_backfill)
    # Room for every lane at its limit at once, so one lane never waits for the other.
    assert team["concurrency"]["runs"]["max_concurrent_runs"] >= sum(lim["limit"] for lim in team_limits
                                                                     if lim["key"] == "atlasmart/lane")
    for setting in set(embedded) - TEAM_ONLY_SETTINGS - {"concurrency"}:
        assert team.get(setting) == embedded[setting], f"{setting} differs between the embedded and the team instance"
    assert set(team) - set(embedded) <= TEAM_ONLY_SETTINGS, (
        f"settings only the team instance has: {sorted(set(team) - set(embedded) - TEAM_ONLY_SETTINGS)}; "
        "add them to the embedded instance too, or to TEAM_ONLY_SETTINGS with a reason"
    )


def _open_instance(config: Path, folder: Path) -> dg.DagsterInstance:
    folder.mkdir()
    shutil.copyfile(config, folder / "dagster.yaml")  # follows the deploy/ link
    # As the files say: copy one into a folder and point DAGSTER_HOME at it.
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DAGSTER_HOME", str(folder))
        return dg.DagsterInstance.from_config(str(folder))


def test_team_instance_opens_on_postgres_and_stores_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("ATLASMART_HOME", str(tmp_path / "home"))
    with scratch_database("atlasmart_deploy") as url:
        monkeypatch.setenv(DATABASE_ENV, url)
        with _open_instance(DEPLOY / "dagster.yaml", tmp_path / "team") as team:
            for storage in (team.run_storage, team.event_log_storage, team.schedule_storage):
                assert "Postgres" in type(storage).__name__, f"{type(storage).__name__} is not a Postgres storage"
            run = team.add_run(dg.DagsterRun(job_name="deploy_smoke", tags={"atlasmart/lane": "current"}))
            stored = team.get_run_by_id(run.run_id)
            assert stored is not None and stored.tags["atlasmart/lane"] == "current"

            # Processes Dagster starts from this instance (run workers, Celery
            # workers) read the URL from their own environment: the ref they
            # are handed keeps the `env:` form, never the URL.
            handed_on = team.get_ref().storage_data.config_yaml
            assert DATABASE_ENV in handed_on and url not in handed_on

            with _open_instance(EMBEDDED, tmp_path / "embedded") as embedded:
                assert isinstance(team.run_coordinator, dg.QueuedRunCoordinator)
                assert isinstance(team.run_launcher, dg.DefaultRunLauncher)
                ours, theirs = (
                    team.get_concurrency_config().run_queue_config,
                    embedded.get_concurrency_config().run_queue_config,
                )
                written = _validated(TEAM)["concurrency"]["runs"]
                assert (ours.max_concurrent_runs, ours.tag_concurrency_limits) == (
                    written["max_concurrent_runs"], written["tag_concurrency_limits"],
                ), "the daemon would not enforce the lanes deploy/dagster.yaml writes"
                assert _other_limits(ours.tag_concurrency_limits) == _other_limits(theirs.tag_concurrency_limits)
                assert (
                    team.run_coordinator.dequeue_interval_seconds == embedded.run_coordinator.dequeue_interval_seconds
                )
                assert team.run_monitoring_settings == embedded.run_monitoring_settings

        import psycopg2

        with psycopg2.connect(url) as con, con.cursor() as cur:
            cur.execute("SELECT count(*) FROM runs WHERE run_id = %s", (run.run_id,))
            assert cur.fetchone() == (1,), "the run is not in the throwaway database's Dagster tables"
        con.close()


# --- workspace, Celery ---------------------------------------------------------------------------


def test_workspace_loads_the_projects_module():
    path = DEPLOY / "workspace.yaml"
    config = ensure_workspace_config(yaml.safe_load(path.read_text()), str(path))
    entries = [entry["python_module"] for entry in config["load_from"] if "python_module" in entry]
    assert [(e["module_name"], e.get("location_name")) for e in entries] == [(MODULE, LOCATION)]
    assert importlib.util.find_spec(MODULE) is not None


def test_celery_worker_config_is_accepted_by_dagster_celery(monkeypatch):
    monkeypatch.setenv(BROKER_ENV, "redis://broker.example:6379/0")
    config = get_validated_config(str(DEPLOY / "celery.yaml"))
    assert config["broker"] == "redis://broker.example:6379/0", "the broker must come from $ATLASMART_CELERY_BROKER"
    assert config["backend"]
    for module in config["include"]:
        assert importlib.util.find_spec(module) is not None, f"a worker could not import {module}"


# --- Dockerfile ---------------------------------------------------------------------------------


def _dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments) per instruction, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            instruction, _, rest = line.partition(" ")
            out.append((instruction.upper(), rest.strip()))
    return out


def test_dockerfile_copies_existing_files_that_the_context_keeps():
    ignored = [
        p.strip()
        for p in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
        if p.strip() and not p.startswith("#")
    ]
    copies = [args for instruction, args in _dockerfile() if instruction == "COPY"]
    assert copies, "the Dockerfile copies nothing"
    for args in copies:
        words = [w for w in shlex.split(args) if not w.startswith("--")]
        assert not any(a.startswith("--from") for a in shlex.split(args)), "no multi-stage copies expected"
        for source in words[:-1]:
            assert (REPO / source).exists(), (
                f"COPY {source}: no such file in the repository (build context = repo root)"
            )
            top = Path(source).parts[0]
            assert not any(fnmatch.fnmatch(top, pattern) for pattern in ignored), (
                f"COPY {source} is excluded by deploy/Dockerfile.dockerignore"
            )


def test_dockerfile_runs_the_code_location_as_a_non_root_user():
    instructions = _dockerfile()
    assert instructions[0] == ("FROM", "python:3.11-slim")
    users = [args for instruction, args in instructions if instruction == "USER"]
    assert users and users[-1].split(":")[0] not in {"root", "0"}, "the image must not run as root"
    cmd = json.loads(next(args for instruction, args in instructions if instruction == "CMD"))
    assert cmd[:3] == ["dagster", "api", "grpc"] and cmd[cmd.index("-m") + 1] == MODULE
    assert importlib.util.find_spec(MODULE) is not None
    assert not any(instruction == "ENTRYPOINT" for instruction, _ in instructions), (
        "an ENTRYPOINT would be prefixed to the Helm chart's `args` (it starts `dagster api grpc` itself)"
    )
    runs = " ".join(args for instruction, args in instructions if instruction == "RUN")
    assert '".[team]"' in runs and "team" in PYPROJECT["project"]["optional-dependencies"]
    assert "dagster.team.yaml" in runs and '"$DAGSTER_HOME/dagster.yaml"' in runs
    assert any(instruction == "ENV" and args.startswith("DAGSTER_HOME=") for instruction, args in instructions)


def test_dockerfile_extra_integrations_match_the_pinned_dagster():
    team = PYPROJECT["project"]["optional-dependencies"]["team"]
    integration_pin = next(dep.split("==")[1] for dep in team if dep.startswith("dagster-postgres=="))
    runs = " ".join(args for instruction, args in _dockerfile() if instruction == "RUN")
    pins = re.findall(r"dagster-[a-z0-9-]+==([0-9.]+)", runs)
    # an empty list would pass the loop below: the image installs its integrations pinned, so there must be some
    assert pins, "the Dockerfile pins no dagster integration (dagster-<name>==<version>) in a RUN line"
    for pinned in pins:
        assert pinned == integration_pin, f"a dagster integration pinned at {pinned}, not {integration_pin}"


# --- Helm ---------------------------------------------------------------------------------------


def test_helm_values_carry_the_keys_the_chart_reads():
    values = _helm_values()
    assert {"dagster-user-deployments", "postgresql", "runLauncher", "dagsterDaemon"} <= set(values)
    # The chart reads the user deployments under the hyphenated key; a
    # camel-case `dagsterUserDeployments` would be silently ignored.
    assert "dagsterUserDeployments" not in values
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    assert values["dagster-user-deployments"]["enabled"] is True
    assert deployment["dagsterApiGrpcArgs"] == ["-m", MODULE]
    images = {
        (d["image"]["repository"], str(d["image"]["tag"]))
        for d in (values["dagsterWebserver"], values["dagsterDaemon"], deployment)
    }
    assert len(images) == 1, f"the webserver, daemon and code location must run one image: {images}"


def test_helm_postgres_is_external_with_a_secret_password():
    values = _helm_values()
    postgresql = values["postgresql"]
    assert postgresql["enabled"] is False
    assert all(postgresql[key] for key in ("postgresqlHost", "postgresqlUsername", "postgresqlDatabase"))
    assert values["generatePostgresqlPasswordSecret"] is False
    assert values["global"]["postgresqlSecretName"]


def test_helm_run_pods_and_code_server_share_the_warehouse_volume():
    values = _helm_values()
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    launcher = values["runLauncher"]
    assert launcher["type"] == "K8sRunLauncher"
    k8s = launcher["config"]["k8sRunLauncher"]
    pvc = yaml.safe_load((DEPLOY / "helm" / "warehouse-pvc.yaml").read_text())
    assert pvc["kind"] == "PersistentVolumeClaim" and pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    for holder in (deployment, k8s):
        (volume,) = holder["volumes"]
        (mount,) = holder["volumeMounts"]
        assert volume["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]
        assert mount["name"] == volume["name"]
        assert {"name": "atlasmart-env"} in holder["envSecrets"], "ATLASMART_DATABASE_URL comes from this secret"
    # identical entries, so Dagster merges them when run pods inherit the deployment's config
    assert (deployment["volumes"], deployment["volumeMounts"]) == (k8s["volumes"], k8s["volumeMounts"])
    mount_path = deployment["volumeMounts"][0]["mountPath"]
    assert deployment["env"][WAREHOUSE_ENV] == mount_path
    assert f"{WAREHOUSE_ENV}={mount_path}" in k8s["envVars"]


def test_helm_daemon_enforces_the_team_lanes():
    daemon = _helm_values()["dagsterDaemon"]
    embedded, team = _validated(EMBEDDED), _validated(TEAM)
    coordinator = daemon["runCoordinator"]["config"]["customRunCoordinator"]
    assert daemon["runCoordinator"]["enabled"] is True and daemon["runCoordinator"]["type"] == "CustomRunCoordinator"
    # the same lane-stamping coordinator as the instance files
    assert (coordinator["module"], coordinator["class"]) == (
        team["run_coordinator"]["module"], team["run_coordinator"]["class"])
    queue = coordinator["config"]
    assert queue["max_concurrent_runs"] == team["concurrency"]["runs"]["max_concurrent_runs"]
    assert queue["tag_concurrency_limits"] == team["concurrency"]["runs"]["tag_concurrency_limits"]
    assert queue["dequeue_interval_seconds"] == embedded["run_coordinator"]["config"]["dequeue_interval_seconds"]
    monitoring = embedded["run_monitoring"]
    assert daemon["runMonitoring"] == {
        "enabled": monitoring["enabled"],
        "startTimeoutSeconds": monitoring["start_timeout_seconds"],
        "pollIntervalSeconds": monitoring["poll_interval_seconds"],
    }


def test_helm_instance_keeps_the_json_log_and_no_telemetry():
    values = _helm_values()
    embedded = _validated(EMBEDDED)
    assert values["pythonLogs"]["dagsterHandlerConfig"] == embedded["python_logs"]["dagster_handler_config"]
    assert values["telemetry"] == embedded["telemetry"]


# --- README -------------------------------------------------------------------------------------


def test_deploy_readme_names_only_files_that_exist():
    text = (DEPLOY / "README.md").read_text()
    named = set(re.findall(r"\bdeploy/[\w./-]*\w", text))
    assert named, "deploy/README.md names no deploy files"
    missing = sorted(p for p in named if not (REPO / p).exists())
    assert not missing, f"deploy/README.md names files that do not exist: {missing}"
    # Workers start through the wrapper that keeps the broker URL out of files (test_celery_worker.py runs it).
    assert "python -m atlasmart_dagster.ops.runs.celery_worker -y deploy/celery.yaml" in text


def test_the_cli_submits_runs_to_the_code_location_the_team_workspace_names():
    """`atlasmart` in team mode launches runs by location name; the daemon knows only deploy/workspace.yaml's."""
    import yaml

    from atlasmart_dagster.ops.runs.queue import CODE_LOCATION_MODULE, CODE_LOCATION_NAME

    (entry,) = yaml.safe_load((REPO / "deploy" / "workspace.yaml").read_text())["load_from"]
    module = entry.get("python_module") or {}
    assert (module.get("module_name"), module.get("location_name")) == (CODE_LOCATION_MODULE, CODE_LOCATION_NAME)


def test_workers_and_runs_agree_on_how_a_step_is_delivered():
    """A killed worker's step is handed back only if both sides say so (acks_late, reject on worker lost)."""
    import yaml

    from atlasmart_dagster.definitions import CELERY_DELIVERY

    config = yaml.safe_load((REPO / "deploy" / "celery.yaml").read_text())["execution"]["config"]
    assert config["config_source"] == CELERY_DELIVERY
    assert CELERY_DELIVERY["task_acks_late"] and CELERY_DELIVERY["task_reject_on_worker_lost"]
