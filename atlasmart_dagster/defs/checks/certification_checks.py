"""Certification state in the Dagster UI: one headline per served asset that states the whole asset.

Each certified product (``store/tables.py`` ``CERTIFIED_ASSETS``) has a served
asset (``served_<product>``, ``defs/assets/served.py``) whose partitions are
materialized exactly for the days consumers are served. Its non-blocking check
``certification_state`` is the asset's headline: each evaluation states every
day AtlasMart knows (the days ``atlasmart status`` lists, from the one read
model, ``product/serving.py`` ``partition_statuses``): how many due days are
served, and each one that is not, named with its state and what holds it
(``DELAYED`` and why, ``ANOMALY_HELD``, ``WITHDRAWN``, a refused
certification's reason). It passes only when every due day is served; it fails
with ERROR when a due day is ``DELAYED``, ``ANOMALY_HELD`` or ``WITHDRAWN``
with nothing served, with WARN otherwise. Days not due yet (``PENDING``) are
listed, never counted against it.

Why one evaluation for the whole asset, not one per day: the *Checks* tab and
the asset's health show the newest evaluation of a check, so a per-day
check's headline was whichever day was evaluated last ("Succeeded" while two
due days were unserved). Each evaluation also names the days whose change
caused it (``changed``), so the *Execution history* holds one row per change,
and a row never names a day outside its decision.

It is re-evaluated whenever any day may have changed: ``report_day_states``,
which every path that changes certification calls (the sensors, ``atlasmart``
commands, the incident workflow), reports it as a runless event after the
served partitions, and skips it when the newest evaluation already says the
same (``state_digest``), so a path and the sensor reporting one decision write
one row. A runless evaluation always matches the newest runless served
materialization (Dagster compares run ids, both empty), so the headline never
reads "Not Evaluated" after a day turned served. The check is executable
(*Execute all* on the served asset runs it: it is unpartitioned, so it needs
no partition, and it says the same as the reported ones). Selected with a
partition or range (the asset graph's *Materialize* with a mart), Dagster
plans it once per day of the run, and it completes each of those rows
(``run_wide_check_events``), so none reads "Skipped".
"""

import hashlib
import json
import re
from typing import Callable, Iterable, Sequence

import dagster as dg

from ...product.serving import ANOMALY, HELD, AssetState, PartitionStatus, known_partitions, partition_statuses
from ...store.ledger.day_states import DayStates
from ...store.ledger.partition_states import CERTIFIED, RESTATEMENT_PENDING, WITHDRAWN
from ...store.platform import Platform
from ...store.tables import CERTIFIED_ASSETS
from ..assets.served import product_of, served_asset, sync_served_partitions
from ..assets.step import run_wide_check_events
from .days import day_ranges
from .said import report_unless_said
from .slo_checks import report_slos
from ..resources import AtlasmartResource

CERTIFICATION_STATE = "certification_state"
DELAYED = "DELAYED"
PENDING = "PENDING"
# Day states in which consumers are served a certified version.
SERVED_STATES = (CERTIFIED, RESTATEMENT_PENDING, HELD)
# Day states in which consumers are served nothing they should use.
ERROR_STATES = (DELAYED, WITHDRAWN, ANOMALY)
# Metadata key of what an evaluation states (days, states, versions): an unchanged state is not reported again.
STATE_DIGEST = "state_digest"
# How many unserved days the description lists one by one (the metadata has them all).
_LISTED = 20

CERTIFICATION_SPECS = [
    dg.AssetCheckSpec(
        CERTIFICATION_STATE,
        asset=served_asset(product),
        description=(
            "The served state of the whole asset: every due day served or not, each unserved day named with its "
            "state and what holds it (DELAYED and why, ANOMALY_HELD, WITHDRAWN). Passes only when every due day is "
            "served; fails (ERROR) while a due day is delayed, held as an anomaly or withdrawn, (WARN) otherwise. "
            "Re-evaluated whenever any day changes; never blocking."
        ),
        blocking=False,
    )
    for product in CERTIFIED_ASSETS
]
CERTIFICATION_CHECK_KEYS = [spec.key for spec in CERTIFICATION_SPECS]


def _day(status: PartitionStatus, asset_state: AssetState, states: DayStates) -> dict:
    """What one day of one product amounts to in the headline."""
    served = asset_state.served
    is_served = served is not None and status.state in SERVED_STATES
    reason = status.detail
    if not is_served:
        refusal = states.get(asset_state.asset, status.partition).latest_refusal
        if refusal is not None and refusal.reason:
            reason = f"{reason}; certification refused: {refusal.reason}"
    return {
        "state": status.state,
        "served": is_served,
        "due": status.state != PENDING or is_served,
        "version": served.version if served else None,
        "certification_id": served.certification.id if served else None,
        "certified_at": served.certified_at if served else None,
        "fingerprint": served.certification.fingerprint if served else None,
        "reason": reason,
    }


def _label(entry: dict) -> str:
    if entry["served"]:
        return f"{entry['state']} v{entry['version']}" if entry["state"] == CERTIFIED else (
            f"{entry['state']} (serving v{entry['version']})")
    return entry["state"]


def _digest(days: dict[str, dict]) -> str:
    """What the evaluation states, without what moves by itself (minutes late): equal digests, nothing new to say."""
    stable = {d: {**e, "reason": re.sub(r"\(\d+ min late\)", "(late)", e["reason"])} for d, e in days.items()}
    return hashlib.sha256(json.dumps(stable, sort_keys=True).encode()).hexdigest()[:16]


def asset_evaluation(product: str, days: dict[str, dict], changed: Sequence[str] = ()) -> dg.AssetCheckEvaluation:
    """The ``certification_state`` evaluation of one product's served asset from its days (see ``_day``)."""
    due = {d: e for d, e in days.items() if e["due"]}
    unserved = {d: e for d, e in due.items() if not e["served"]}
    not_due = sorted(d for d, e in days.items() if not e["due"])
    passed = not unserved
    error = any(e["state"] in ERROR_STATES for e in unserved.values())
    severity = dg.AssetCheckSeverity.ERROR if error else dg.AssetCheckSeverity.WARN
    if not due:
        headline = "no day is due yet"
    elif passed:
        headline = f"all {len(due)} due days served ({day_ranges(due)})"
    else:
        headline = (f"{len(due) - len(unserved)} of {len(due)} due days served; not served: "
                    + ", ".join(f"{d} {e['state']}" for d, e in sorted(unserved.items())[:_LISTED])
                    + (f" and {len(unserved) - _LISTED} more" if len(unserved) > _LISTED else ""))
    lines = [f"**{headline}**"]
    for day, entry in sorted(unserved.items())[:_LISTED]:
        lines.append(f"- {day} {entry['state']}: {entry['reason']}")
    held = sorted(d for d, e in due.items() if e["served"] and e["state"] != CERTIFIED)
    for day in held:
        lines.append(f"- {day} {_label(days[day])}: {days[day]['reason']}")
    if not_due:
        lines.append(f"- not due yet: {day_ranges(not_due)}")
    changed = sorted(set(changed) & set(days))
    if changed:
        lines.append("")
        lines.append("This evaluation: " + "; ".join(
            f"{day_ranges(group)} {label}" for label, group in _by_label(days, changed)))
    metadata = {
        "due_days": len(due),
        "served_days": len(due) - len(unserved),
        "unserved_days": dg.MetadataValue.text(", ".join(f"{d} {e['state']}" for d, e in sorted(unserved.items()))
                                               or "none"),
        "not_due_days": dg.MetadataValue.text(day_ranges(not_due) or "none"),
        "changed": dg.MetadataValue.text(day_ranges(changed) or "none"),
        "days": dg.MetadataValue.json({d: {k: e[k] for k in ("state", "served", "version", "certified_at",
                                                             "fingerprint", "reason")} for d, e in days.items()}),
        STATE_DIGEST: dg.MetadataValue.text(_digest(days)),
    }
    return dg.AssetCheckEvaluation(
        asset_key=dg.AssetKey(served_asset(product)),
        check_name=CERTIFICATION_STATE,
        passed=passed,
        severity=severity,
        metadata=metadata,
        description="\n".join(lines),
        blocking=False,
    )


def _by_label(days: dict[str, dict], changed: Sequence[str]) -> list[tuple[str, list[str]]]:
    """The changed days grouped by what they are now, in day order of each group's first day."""
    groups: dict[str, list[str]] = {}
    for day in changed:
        groups.setdefault(_label(days[day]), []).append(day)
    return sorted(groups.items(), key=lambda item: item[1][0])


def certification_evaluations(
    platform: Platform,
    changed: Iterable[str] = (),
    assets: Sequence[str] = CERTIFIED_ASSETS,
    states: DayStates | None = None,
) -> list[dg.AssetCheckEvaluation]:
    """The headline of each of ``assets`` as things stand now; ``changed`` names the days that caused it.

    ``states``: the caller's fresh read of every asset's days (read here when None).
    """
    states = states if states is not None else platform.ledger.partitions.states()
    days = sorted(set(known_partitions(platform, states)) | set(changed))
    by_asset: dict[str, dict[str, dict]] = {asset: {} for asset in assets}
    for status in partition_statuses(platform, days, states=states):
        for asset_state in status.assets:
            if asset_state.asset in by_asset:
                by_asset[asset_state.asset][status.partition] = _day(status, asset_state, states)
    return [asset_evaluation(asset, by_asset[asset], sorted(set(changed))) for asset in assets]


def _same_state(said: dg.AssetCheckEvaluation, evaluation: dg.AssetCheckEvaluation) -> bool:
    """Whether an evaluation already shown states what ``evaluation`` states (its days, states and versions)."""
    digest = said.metadata.get(STATE_DIGEST)
    return digest is not None and digest.value == evaluation.metadata[STATE_DIGEST].value


def report_certification_states(
    instance: dg.DagsterInstance, platform: Platform, partitions: Iterable[str], states: DayStates | None = None
) -> list[dg.AssetCheckEvaluation]:
    """Report each served asset's headline (runless), naming ``partitions`` as the days that changed.

    An asset whose check already states the same gets no new row
    (``said.py``): one decision reported by its command and again by the
    sensor, even at the same moment, or after *Execute all* said it, is one
    row in the check's history. Returns the evaluations written.
    """
    return [evaluation for evaluation in certification_evaluations(platform, partitions, states=states)
            if report_unless_said(instance, platform, evaluation, _same_state)]


# Checks on the served assets that live above this layer and must be re-reported whenever days changed
# (``open_incidents``, ``ops/response/incidents/ui_reporting.py``): each registers itself with ``after_days_changed``.
_AFTER_DAYS_CHANGED: list[Callable[[dg.DagsterInstance, Platform], object]] = []


def after_days_changed(refresh: Callable[[dg.DagsterInstance, Platform], object]):
    """Register ``refresh(instance, platform)`` to run at the end of every ``report_day_states`` (a decorator)."""
    if refresh not in _AFTER_DAYS_CHANGED:
        _AFTER_DAYS_CHANGED.append(refresh)
    return refresh


# After a withdrawal wiped a served asset, how many of the newest days get their
# SLO results shown again (a year of them would take the containment a minute).
_RESHOWN_SLO_DAYS = 35


def report_day_states(
    instance: dg.DagsterInstance | None, platform: Platform, partitions: Iterable[str] | None,
    states: DayStates | None = None,
) -> list[dg.AssetCheckEvaluation]:
    """Show where the served assets stand wherever the Dagster UI shows them, after ``partitions`` may have changed.

    The ``served_*`` assets' partition status (what consumers get), each
    served asset's headline (``certification_state``, naming ``partitions``
    as what changed), the checks registered with ``after_days_changed``
    (``open_incidents``: so it never reads "Not Evaluated" against a newer
    served materialization), and the SLO checks of
    the days that have recorded SLO results. Every path that changes
    certification calls this; without an instance (``--ephemeral-instance``)
    nothing is shown. ``partitions=None`` looks at every day
    (certification_sensor, when the served state changed by another path): the
    days whose served state changed are then the ones named.

    A withdrawal wipes the served asset whole (see ``sync_served_partitions``),
    and Dagster's wipe takes the asset's check history with it; the checks are
    then reported again, the SLO results of the newest days with them.

    ``states``: the caller's read of every asset's days, taken after its last
    ledger change (``RunCertification.states``), handed to every view (each
    reads what it needs when None). Nothing here writes the ledger's days.
    """
    if instance is None:
        return []
    changed = sync_served_partitions(instance, platform, None if partitions is None else sorted(set(partitions)),
                                     states=states)
    wiped = any(entry.startswith("-") for entries in changed.values() for entry in entries)
    if partitions is None:
        marks = "-" if wiped else "+-"  # after a wipe every served day is reported again: not a change
        days = sorted({e[1:] for entries in changed.values() for e in entries if e[0] in marks})
    else:
        days = sorted(set(partitions))
    if not days and not changed:
        return []
    slo_days = days
    if wiped:
        slo_days = sorted(set(known_partitions(platform, states)[-_RESHOWN_SLO_DAYS:]) | set(days))
    report_slos(instance, platform, slo_days, states=states)
    evaluations = report_certification_states(instance, platform, days, states=states)
    for refresh in _AFTER_DAYS_CHANGED:
        refresh(instance, platform)
    return evaluations


@dg.multi_asset_check(
    specs=CERTIFICATION_SPECS,
    name="certification_states",
    can_subset=True,
    description="The served state of each selected served asset, every day of it, as things stand (never blocking).",
)
def certification_states(context: dg.AssetCheckExecutionContext, atlasmart: AtlasmartResource):
    """Executed from the UI (*Execute all* on a served asset, or with a partition): the headline the paths report."""
    assets = sorted({product_of(k.asset_key.to_user_string()) for k in context.selected_asset_check_keys})
    output_names = {spec.key: spec.get_python_identifier() for spec in CERTIFICATION_SPECS}
    yield from run_wide_check_events(context, output_names, certification_evaluations(atlasmart.platform, (), assets))
