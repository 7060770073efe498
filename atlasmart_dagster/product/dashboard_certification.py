"""Dashboard certification: a dashboard day is certified when its golden cross-check passed and no hold covers it.

The golden check (``defs/checks/golden_checks.py``) compares every tile that
claims a governed metric with the governed metric on the certified consumer
layer; this module turns the check results of one run into CERTIFIED or
CERTIFICATION_REFUSED ledger events with the figures the dashboard showed.
"""

from __future__ import annotations

from ..domain.check_names import GOLDEN_MATCHES_GOVERNED_METRIC
from ..store.ledger.day_states import DayStates
from ..store.ledger.holds import covering_hold
from ..store.ledger.partition_states import CERTIFICATION_REFUSED, CERTIFIED
from ..store.platform import Platform
from .certification_gate import GateDecision
from .dashboards import current, fingerprint, tile_values


def certify_dashboards(
    platform: Platform, run_id: str, actor: str, recorded: DayStates | None = None
) -> list[GateDecision]:
    """Certify each dashboard day whose golden cross-check passed in ``run_id`` (and is not held).

    Idempotent: a (dashboard, day) already decided for ``run_id`` is not decided again.
    ``recorded``: the caller's read of what the run recorded (``of_run``), holding its dashboard
    decisions as they are now (read here when None).
    """
    ledger = platform.ledger
    recorded = recorded if recorded is not None else ledger.partitions.of_run(run_id)
    decided = {(d.asset, d.day) for d in recorded if d.decisions}
    results = [r for r in ledger.checks.results(run_id=run_id)
               if r["check_name"] == GOLDEN_MATCHES_GOVERNED_METRIC and (r["asset"], r["partition"]) not in decided]
    decisions = []
    at = platform.clock.now()
    holds = ledger.holds.active()
    for asset in sorted({r["asset"] for r in results}):
        dashboard = current(ledger, asset)
        values = tile_values(platform, dashboard)
        for r in (r for r in results if r["asset"] == asset):
            day = r["partition"]
            figures = {key: by_day.get(day) for key, by_day in values.items()}
            hold = covering_hold(holds, asset, day)
            reasons = [] if r["passed"] else [f"golden cross-check failed: {r['observed']} vs {r['expected']}"]
            if hold:
                reasons.append(f"certification held by {hold['incident_id'] or hold['actor']}: {hold['reason']}")
            decision = GateDecision(asset, day, not reasons, reasons)
            decision.fingerprint = fingerprint({k: v for k, v in figures.items() if v is not None})
            ledger.partitions.append(
                asset, day, CERTIFIED if decision.certified else CERTIFICATION_REFUSED, at, actor=actor,
                fingerprint=decision.fingerprint, run_id=run_id, reason="; ".join(reasons) or None,
                detail={"dashboard_version": dashboard.version,
                        "figures": {k: format(v, "f") for k, v in figures.items() if v is not None},
                        "reasons": reasons},
            )
            decisions.append(decision)
    return decisions
