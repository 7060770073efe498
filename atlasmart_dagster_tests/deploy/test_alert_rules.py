"""The Prometheus alert rules load, pass their unit tests, and stay in step with the metrics, the product and the docs.

``promtool`` (Debian's ``prometheus`` package) checks ``deploy/prometheus/alerts.yml``
and runs ``alerts_test.yml``; without it the promtool tests skip, except under
``CI=true``, where a missing promtool fails the run. The rest reads the two
files: every rule has a case where it fires and one where it does not, its
severity, its words for on-call, a runbook link that reaches a heading of
``docs/incidents.md``, metrics the exporter really writes, and thresholds
equal to the product's own objectives (an SLO changed in ``product/slo.py``
fails here until the rule follows).

Each structural check is a function of the files' contents, so the second half
feeds it a broken copy and sees it fail, as ``test_docs.py`` does.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from atlasmart_dagster.defs.resources import AtlasmartResource
from atlasmart_dagster.defs.retries import STORAGE_RETRY_POLICY
from atlasmart_dagster.ops.observability.prometheus import registry_for
from atlasmart_dagster.product.slo import AVAILABILITY_MINUTES, FRESHNESS, SCHEDULE_HOUR, TARGETS
from atlasmart_dagster.store.home import sample_dir
from atlasmart_dagster_tests.test_docs import _anchor, _without_code

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "alerts.yml"
RULE_TESTS = REPO / "deploy" / "prometheus" / "alerts_test.yml"
RUNBOOKS = REPO / "docs" / "incidents.md"
SEVERITIES = {"page", "ticket"}
ANNOTATIONS = {"summary", "description", "threshold", "runbook_url"}
RUNBOOK_HEADING = re.compile(r"^### Runbook: (\S+)$", flags=re.MULTILINE)


def promtool() -> str:
    """The promtool binary, or a skip (a failure under CI=true) saying how to get it."""
    found = shutil.which("promtool")
    if found is None:
        message = "promtool not found: apt-get install prometheus (Debian's package brings promtool)"
        if os.environ.get("CI") == "true":
            pytest.fail(message + "; under CI=true a missing promtool is a failure, not a skip")
        pytest.skip(message)
    return found


def run_promtool(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([promtool(), *map(str, args)], cwd=REPO, capture_output=True, text=True, timeout=60)


def rules(text: str) -> dict[str, dict]:
    """Alert name -> rule, from the text of a rules file."""
    return {r["alert"]: r for group in yaml.safe_load(text)["groups"] for r in group["rules"] if "alert" in r}


# --- each check, as a function of the files' text ----------------------------------------------


def untested(rules_text: str, tests_text: str) -> tuple[list[str], list[str]]:
    """(alerts with no case where they fire, alerts with no case where they stay quiet)."""
    cases = [case for test in yaml.safe_load(tests_text)["tests"] for case in test.get("alert_rule_test", [])]
    firing = {c["alertname"] for c in cases if c.get("exp_alerts")}
    quiet = {c["alertname"] for c in cases if not c.get("exp_alerts")}
    names = set(rules(rules_text))
    return sorted(names - firing), sorted(names - quiet)


def incomplete(rules_text: str) -> list[str]:
    """Rules without a known severity or without one of the annotations on-call reads."""
    problems = []
    for name, rule in rules(rules_text).items():
        if rule.get("labels", {}).get("severity") not in SEVERITIES:
            problems.append(f"{name}: severity must be one of {sorted(SEVERITIES)}")
        missing = ANNOTATIONS - {k for k, v in rule.get("annotations", {}).items() if str(v).strip()}
        if missing:
            problems.append(f"{name}: no {', '.join(sorted(missing))}")
    return problems


def runbook_base(rules_text: str) -> str:
    """The RUNBOOK_BASE the rules file's header comment declares."""
    match = re.search(r"^#\s*RUNBOOK_BASE: (https://\S+/)$", rules_text, flags=re.MULTILINE)
    assert match, "alerts.yml's header must declare `# RUNBOOK_BASE: https://.../`"
    return match.group(1)


def runbook_problems(rules_text: str, runbooks_text: str) -> list[str]:
    """Runbook links that are not the base + docs/incidents.md#<a heading there>; alerts or runbooks without the other.

    Each alert links to its own ``### Runbook: <alert>`` section, and each such
    section is an alert's: a runbook for an alert nobody sends is stale.
    """
    base = runbook_base(rules_text)
    page = str(RUNBOOKS.relative_to(REPO))
    text = _without_code(runbooks_text)
    anchors = {_anchor(h) for h in re.findall(r"^#{1,6} (.+)$", text, flags=re.MULTILINE)}
    names = rules(rules_text)
    problems = []
    for name, rule in names.items():
        url = rule.get("annotations", {}).get("runbook_url", "")
        expected = f"{base}{page}#{_anchor(f'Runbook: {name}')}"
        if url != expected:
            problems.append(f"{name}: runbook_url {url!r} is not {expected!r}")
        elif url.partition("#")[2] not in anchors:
            problems.append(f"{name}: {page} has no heading `### Runbook: {name}`")
    for heading in RUNBOOK_HEADING.findall(text):
        if heading not in names:
            problems.append(f"{page}: `### Runbook: {heading}` is for no alert in alerts.yml")
    return problems


def unknown_metrics(rules_text: str, exported: set[str]) -> list[str]:
    """Metric names the rules read that the exporter does not write."""
    read = {m for rule in rules(rules_text).values() for m in re.findall(r"\batlasmart_[a-z_]+\b", rule["expr"])}
    return sorted(read - exported)


def threshold_drift(rules_text: str) -> list[str]:
    """Rules whose number is not the product's own (the objective, the deadline, the retry budget)."""
    found = rules(rules_text)
    freshness_seconds = TARGETS[FRESHNESS] * 60
    deadline = SCHEDULE_HOUR * 3600 + AVAILABILITY_MINUTES * 60
    budget = STORAGE_RETRY_POLICY.max_retries
    expected = {
        # alert: (a pattern its expression must match, words its threshold annotation must hold)
        "AtlasmartFreshnessLagPastSlo": (rf"atlasmart_freshness_lag_seconds > {freshness_seconds:g}\b",
                                         f"<= {TARGETS[FRESHNESS]:g} min"),
        # every day from the first partition on: the oldest one not served against the newest deadline passed
        "AtlasmartNoCertificationForDueDay": ((rf"^atlasmart_oldest_missing_day_timestamp_seconds "
                                               rf"< \(time\(\) - {deadline}\) - \(time\(\) - {deadline}\) % 86400$"),
                                              f"{SCHEDULE_HOUR:02d}:00 UTC schedule + {AVAILABILITY_MINUTES} min"),
        "AtlasmartStepRetriesSpiking": (rf"increase\(atlasmart_step_retries_total\[1h\]\) > {budget}\b",
                                        f"max_retries {budget}"),
    }
    problems = []
    for name, (pattern, words) in expected.items():
        rule = found.get(name)
        if rule is None:
            problems.append(f"{name}: no such rule")
            continue
        if not re.search(pattern, " ".join(rule["expr"].split())):
            problems.append(f"{name}: expression {rule['expr'].strip()!r} does not match {pattern!r}")
        if words not in rule["annotations"]["threshold"]:
            problems.append(f"{name}: threshold annotation does not say {words!r}")
    return problems


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> set[str]:
    """Every metric name the exporter writes (a counter's samples end in _total), from a fresh home."""
    home = tmp_path_factory.mktemp("metrics") / "home"
    registry = registry_for(AtlasmartResource(home=str(home), landing=str(sample_dir() / "landing")).platform)
    return {f.name + ("_total" if f.type == "counter" else "") for f in registry.collect()}


# --- the files as they are ---------------------------------------------------------------------


def test_promtool_accepts_the_rules():
    result = run_promtool("check", "rules", RULES)
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_unit_tests_pass():
    result = run_promtool("test", "rules", RULE_TESTS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_rule_has_a_case_where_it_fires_and_one_where_it_does_not():
    no_firing, no_quiet = untested(RULES.read_text(), RULE_TESTS.read_text())
    assert not no_firing, f"alerts.yml rules with no firing case in alerts_test.yml: {no_firing}"
    assert not no_quiet, f"alerts.yml rules with no not-firing case in alerts_test.yml: {no_quiet}"


def test_every_rule_has_a_severity_and_the_annotations_on_call_reads():
    assert not incomplete(RULES.read_text())


def test_every_runbook_url_reaches_its_alerts_runbook_heading():
    assert not runbook_problems(RULES.read_text(), RUNBOOKS.read_text())


def test_the_rules_read_only_metrics_the_exporter_writes(exported):
    assert "atlasmart_partitions_held" in exported and "atlasmart_slo_misses_total" in exported
    assert not unknown_metrics(RULES.read_text(), exported)


def test_thresholds_are_the_products_objectives():
    assert not threshold_drift(RULES.read_text())


# --- each check fails when it should -----------------------------------------------------------


def test_promtool_unit_tests_fail_when_a_threshold_moves(tmp_path):
    """The retry rule at 10 retries instead of one step's 3 no longer fires for 4 retries in an hour."""
    moved = RULES.read_text().replace("atlasmart_step_retries_total[1h]) > 6", "atlasmart_step_retries_total[1h]) > 10")
    assert moved != RULES.read_text()
    (tmp_path / "alerts.yml").write_text(moved)
    tests = yaml.safe_load(RULE_TESTS.read_text())  # only the retry cases: the daily ones take most of the time
    tests["tests"] = [t for t in tests["tests"]
                      if {c["alertname"] for c in t["alert_rule_test"]} == {"AtlasmartStepRetriesSpiking"}]
    assert tests["tests"]
    (tmp_path / "alerts_test.yml").write_text(yaml.safe_dump(tests))
    result = run_promtool("test", "rules", tmp_path / "alerts_test.yml")
    assert result.returncode != 0 and "AtlasmartStepRetriesSpiking" in result.stdout + result.stderr
    assert not threshold_drift(RULES.read_text())
    (drift,) = threshold_drift(moved)
    assert drift.startswith("AtlasmartStepRetriesSpiking: expression 'increase(atlasmart_step_retries_total[1h]) > 10'")


def test_the_case_check_sees_a_rule_without_a_firing_or_a_quiet_case():
    tests = yaml.safe_load(RULE_TESTS.read_text())
    for test in tests["tests"]:
        test["alert_rule_test"] = [c for c in test["alert_rule_test"]
                                   if not (c["alertname"] == "AtlasmartIncidentOpen" and c["exp_alerts"])]
    assert untested(RULES.read_text(), yaml.safe_dump(tests)) == (["AtlasmartIncidentOpen"], [])
    for test in tests["tests"]:
        test["alert_rule_test"] = [c for c in test["alert_rule_test"] if c["alertname"] != "AtlasmartSloMissed"]
    assert untested(RULES.read_text(), yaml.safe_dump(tests)) == (["AtlasmartIncidentOpen", "AtlasmartSloMissed"],
                                                                   ["AtlasmartSloMissed"])


def test_the_annotation_check_sees_a_missing_severity_and_a_missing_runbook():
    text = RULES.read_text().replace("severity: ticket", "severity: someday", 1)
    text = re.sub(r'\n +runbook_url: "[^"]+#runbook-atlasmartincidentopen"', "", text)
    assert incomplete(text) == ["AtlasmartFreshnessLagPastSlo: severity must be one of ['page', 'ticket']",
                                "AtlasmartIncidentOpen: no runbook_url"]


def test_the_runbook_check_sees_a_missing_heading_a_wrong_link_and_a_stale_runbook():
    rules_text, runbooks = RULES.read_text(), RUNBOOKS.read_text()
    assert "### Runbook: AtlasmartSloMissed\n" in runbooks
    no_heading = runbooks.replace("### Runbook: AtlasmartSloMissed\n", "### Runbook: AtlasmartSloMissedOnce\n")
    assert runbook_problems(rules_text, no_heading) == [
        "AtlasmartSloMissed: docs/incidents.md has no heading `### Runbook: AtlasmartSloMissed`",
        "docs/incidents.md: `### Runbook: AtlasmartSloMissedOnce` is for no alert in alerts.yml",
    ]
    relative = rules_text.replace(f"{runbook_base(rules_text)}docs/incidents.md#runbook-atlasmartslomissed",
                                  "docs/incidents.md#runbook-atlasmartslomissed")
    (problem,) = runbook_problems(relative, runbooks)
    assert problem.startswith("AtlasmartSloMissed: runbook_url 'docs/incidents.md#runbook-atlasmartslomissed' is not")


def test_the_metric_check_sees_a_metric_the_exporter_does_not_write(exported):
    renamed = RULES.read_text().replace("atlasmart_open_incidents > 0", "atlasmart_incidents_open > 0")
    assert unknown_metrics(renamed, exported) == ["atlasmart_incidents_open"]
