"""Consumer communication: what consumers must be told, in their words, never with PII.

A notice says which data products and days are affected; whether the data is
late, incomplete, wrong or unavailable; what was observed against what was
expected; the last-known-good state consumers can use meanwhile; whether
figures will be restated; what repair is under way; and what triggers the
next update. Products are named as consumers know them, with the internal
name in brackets, never the internal name alone. Every text passes the PII
redactor before it is rendered.
"""

from __future__ import annotations

from typing import Any

from ...product.pii import redact_for
from ...product.serving import partition_status
from ...store.clock import format_ts
from ...store.platform import Platform
from ...store.tables import CERTIFIED_ASSETS
from .incident_records import Incident
from .triage import PERFORMANCE, PIPELINE, SEMANTIC, SOURCE

PRODUCT_NAMES = {
    "metric_gross_revenue": "Gross revenue (governed metric)",
    "mart_finance_daily_sales": "Finance daily sales",
    "mart_executive_revenue": "Executive revenue",
    "dashboard_finance_daily_sales": "Finance daily sales dashboard",
    "dashboard_executive_revenue": "Executive revenue dashboard",
}
IMPACT = {SOURCE: "late", PERFORMANCE: "late", PIPELINE: "unavailable", SEMANTIC: "wrong"}


def product_label(asset: str) -> str:
    return f"{PRODUCT_NAMES.get(asset, asset.replace('_', ' '))} [{asset}]"


def _last_known_good(platform: Platform, partitions: list[str]) -> list[dict[str, Any]]:
    out = []
    for asset in CERTIFIED_ASSETS:
        served = platform.ledger.partitions.served_map(asset)
        in_scope = {p: served[p] for p in partitions if p in served}
        earlier = sorted(p for p in served if not partitions or p < partitions[0])
        entry: dict[str, Any] = {"product": product_label(asset)}
        if in_scope:
            entry["serving"] = {p: f"version {v.version} certified {v.certification.recorded_at}" for p, v in in_scope.items()}
        if earlier:
            v = served[earlier[-1]]
            entry["last_certified_day_before"] = f"{earlier[-1]} (version {v.version})"
        out.append(entry)
    return out


def build_notice(
    platform: Platform,
    incident: Incident,
    *,
    stage: str,
    summary: str,
    repair: str,
    next_update: str,
    restated: bool,
    corrected: dict[str, Any] | None = None,
) -> dict[str, Any]:
    clean = redact_for(platform)
    triage = incident.latest("triage")
    verdict = triage["data"]["verdict"] if triage else None
    radius = incident.latest("blast_radius")
    products = [a for a in (radius["data"]["marts"] + radius["data"]["dashboards"] if radius else [])]
    if radius and "metric_gross_revenue" in [x["asset"] for x in radius["data"]["assets"]]:
        products = ["metric_gross_revenue"] + products
    impact = IMPACT.get(verdict, "under investigation")
    if stage == "resolved":
        impact = f"no longer {impact} (resolved)"
    observed = []
    for signal in incident.signals:
        if signal.get("observed") is not None or signal.get("expected") is not None:
            observed.append({
                "day": signal.get("partition"),
                "what": clean(signal["detail"]),
                "observed": signal.get("observed"),
                "expected": signal.get("expected"),
            })
    states = {p: partition_status(platform, p).state for p in incident.partitions}
    notice = {
        "incident": incident.id,
        "stage": stage,
        "issued_at": format_ts(platform.clock.now()),
        "summary": clean(summary),
        "affected_products": [product_label(a) for a in products] or ["Daily sales data products"],
        "affected_days": incident.partitions,
        "impact": impact,
        "current_state_per_day": states,
        "observed_vs_expected": observed,
        "last_known_good": _last_known_good(platform, incident.partitions),
        "figures_will_be_restated": restated,
        "repair": clean(repair),
        "next_update": clean(next_update),
    }
    if corrected:
        notice["corrected_figures"] = corrected
    return notice


def to_markdown(notice: dict[str, Any]) -> str:
    lines = [
        f"# Data notice {notice['incident']} ({notice['stage']})",
        "",
        f"_Issued {notice['issued_at']}_",
        "",
        notice["summary"],
        "",
        f"**Affected products:** {', '.join(notice['affected_products'])}",
        f"**Affected days:** {', '.join(notice['affected_days']) or 'none'}",
        f"**Impact:** data is **{notice['impact']}**",
        "",
        "## Current state",
    ]
    lines += [f"- {day}: {state}" for day, state in notice["current_state_per_day"].items()]
    if notice["observed_vs_expected"]:
        lines += ["", "## Observed vs expected"]
        for item in notice["observed_vs_expected"]:
            lines.append(f"- {item['day']}: {item['what']} (observed {item['observed']}, expected {item['expected']})")
    lines += ["", "## What you can use meanwhile"]
    for entry in notice["last_known_good"]:
        serving = "; ".join(f"{d}: {s}" for d, s in entry.get("serving", {}).items())
        before = entry.get("last_certified_day_before")
        lines.append(f"- {entry['product']}: " + (serving or "") + (f"{'; ' if serving else ''}last certified day before: {before}" if before else "")
                     + ("" if serving or before else "nothing certified"))
    if notice.get("corrected_figures"):
        lines += ["", "## Corrected figures"]
        lines += [f"- {k}: {v}" for k, v in notice["corrected_figures"].items()]
    lines += [
        "",
        f"**Will figures be restated?** {'Yes' if notice['figures_will_be_restated'] else 'No'}",
        f"**Repair:** {notice['repair']}",
        f"**Next update:** {notice['next_update']}",
        "",
    ]
    return "\n".join(lines)
