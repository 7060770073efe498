"""Consumer communication: what consumers must be told, in their words, never with PII.

A notice says which data products and days are affected, by the products'
business names; whether the data is late, incomplete, wrong or unavailable
(every cause of the incident counts, not only the lead one); what was
observed against what was expected, in figures; where each day stands; the
last-known-good state consumers can use meanwhile; whether figures will be
restated; what repair is under way; and what triggers the next update.

Notices are written from the evidence, but never show its internal names:
no asset, check, batch, file or state names, no run ids and no raw data
structures. Every text passes the PII redactor before it is rendered.
"""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Callable

from ....domain.check_names import (
    GOLDEN_MATCHES_GOVERNED_METRIC,
    MANIFEST_ROWS_MATCH,
    QUALITY_WITHIN_THRESHOLDS,
    SOURCE_CONTRACT_CONFORMS,
    STAGED_ROWS_RECONCILE,
)
from ....product.pii import redact_for
from ....product.serving import HELD, partition_status
from ....product.slo import AVAILABILITY, COMPLETENESS, DURATION, FRESHNESS, due_at, scheduled_at
from ....store.clock import format_ts, parse_ts
from ....store.ledger.partition_states import CERTIFIED, RESTATEMENT_PENDING, WITHDRAWN
from ....store.platform import Platform
from ....store.tables import CERTIFIED_ASSETS, METRIC_GROSS_REVENUE, TABLES_BY_NAME
from ....store.ledger.incidents import Incident
from .triage import NOT_DUE, PERFORMANCE, PIPELINE, SEMANTIC, SOURCE

# The certified products' names are their registry titles; the dashboards are not tables.
DASHBOARD_NAMES = {
    "dashboard_finance_daily_sales": "Finance daily sales dashboard",
    "dashboard_executive_revenue": "Executive revenue dashboard",
}
DEFAULT_PRODUCTS = "Daily sales data products"

LATE, INCOMPLETE, WRONG, UNAVAILABLE = "late", "incomplete", "wrong", "unavailable"
IMPACTS = (LATE, INCOMPLETE, WRONG, UNAVAILABLE)
VERDICT_IMPACT = {SOURCE: LATE, PERFORMANCE: LATE, PIPELINE: UNAVAILABLE, SEMANTIC: WRONG}

# Days whose consumers keep reading a certified version.
SERVED_STATES = (CERTIFIED, RESTATEMENT_PENDING, HELD)
# The states a consumer can see per day (``atlasmart status``), in plain words.
STATE_WORDS = {"PENDING": "NOT DUE YET", RESTATEMENT_PENDING: "BEING CORRECTED", HELD: "CORRECTION HELD",
               "ANOMALY_HELD": "HELD FOR THE DATA OWNER"}

FIGURE_WORDS = {  # every control figure (domain/controls.py CONTROL_FIELDS), in words
    "paid_lines": ("paid order lines", ""),
    "orders": ("orders", ""),
    "units": ("units", ""),
    "revenue_usd": ("revenue", " USD"),
    "cost_usd": ("cost", " USD"),
    "gross_profit_usd": ("gross profit", " USD"),
}

# readiness says "expected_rows is 5 but <file> has 3 rows" when a batch holds fewer rows than announced
_ROW_SHORTFALL = re.compile(r"expected_rows is (\d+) but .* has (\d+) rows")


def product_name(asset: str) -> str:
    """A product as consumers know it (never the internal name)."""
    spec = TABLES_BY_NAME.get(asset)
    if spec is not None and spec.title:
        return spec.title
    return DASHBOARD_NAMES.get(asset, DEFAULT_PRODUCTS)


def _when(ts: datetime) -> str:
    return f"{ts:%H:%M} UTC on {ts:%Y-%m-%d}"


def _number(value: Any) -> str | None:
    """A figure as people read it: money keeps its cents ("140.00"), minutes and counts drop a ".0"."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    if isinstance(value, str):
        return value.strip()
    return str(int(number)) if number == number.to_integral() else format(number.quantize(Decimal("0.01")), "f")


def _control_figures(observed: Any, expected: Any) -> tuple[str, str] | None:
    """'cost 140.00 USD' vs '130.00 USD' for the control figures that differ; None when there are none."""
    if not isinstance(observed, dict) or not isinstance(expected, dict):
        return None
    seen, wanted = [], []
    for key, (words, unit) in FIGURE_WORDS.items():
        if key in observed and key in expected and str(observed[key]) != str(expected[key]):
            got, want = _number(observed[key]), _number(expected[key])
            if got is not None and want is not None:
                seen.append(f"{words} {got}{unit}")
                wanted.append(f"{words} {want}{unit}")
    return ("; ".join(seen), "; ".join(wanted)) if seen else None


def _shortfall(problems: list[str]) -> tuple[int, int] | None:
    """(received, announced) order lines when the source delivered fewer rows than it announced."""
    for problem in problems:
        match = _ROW_SHORTFALL.search(problem)
        if match and int(match.group(2)) < int(match.group(1)):
            return int(match.group(2)), int(match.group(1))
    return None


def _item(day: str | None, impact: str, what: str, observed: str | None = None,
          expected: str | None = None) -> dict[str, Any]:
    return {"day": day, "impact": impact, "what": what, "observed": observed, "expected": expected}


def _shortfall_item(day: str | None, problems: list[str]) -> dict[str, Any] | None:
    """The item of a day whose source delivered fewer order lines than it announced, else None."""
    shortfall = _shortfall(problems)
    if shortfall is None:
        return None
    received, announced = shortfall
    return _item(day, INCOMPLETE, "the source system delivered only part of the sales of the day",
                 f"{received} of {announced} order lines received",
                 f"all {announced} order lines the source system announced")


def _source_late(signal: dict[str, Any]) -> dict[str, Any]:
    day = signal.get("partition")
    observed = signal.get("observed") or {}
    shortfall = _shortfall_item(day, observed.get("problems", []))
    if shortfall:
        return shortfall
    at = f"at {_when(parse_ts(observed['now']))}" if observed.get("now") else "yet"
    return _item(day, LATE, "the source system has not delivered the sales of the day",
                 f"not delivered {at}", f"delivered by {_when(scheduled_at(day))}" if day else None)


def _source_rejected(signal: dict[str, Any]) -> dict[str, Any]:
    day = signal.get("partition")
    shortfall = _shortfall_item(day, (signal.get("observed") or {}).get("problems", []))
    if shortfall:
        return shortfall
    return _item(day, UNAVAILABLE, "the source system's delivery of the day failed its delivery checks and was "
                                   "refused; nothing of it was published")


def _slo_missed(signal: dict[str, Any]) -> dict[str, Any]:
    day, objective = signal.get("partition"), signal.get("objective")
    value = _number((signal.get("observed") or {}).get("value"))
    target = _number((signal.get("expected") or {}).get("target"))
    if objective == AVAILABILITY:
        delivered = bool(signal.get("run_id"))
        what = "the day was published after its deadline" if delivered else "the day was not published by its deadline"
        observed = (f"{'published' if delivered else 'still not published'} {value} minutes after "
                    f"{_when(scheduled_at(day))}") if value and day else None
        return _item(day, LATE, what, observed, f"published by {_when(due_at(day))}" if day else None)
    if objective == FRESHNESS:
        return _item(day, LATE, "publishing took longer than promised once the source data had arrived",
                     f"{value} minutes" if value else None, f"at most {target} minutes" if target else None)
    if objective == DURATION:
        return _item(day, LATE, "processing the day took longer than promised",
                     f"{value} minutes" if value else None, f"at most {target} minutes" if target else None)
    if objective == COMPLETENESS:
        return _item(day, INCOMPLETE, "not every order line the source system sent was processed",
                     f"{value} % processed" if value else None, f"{target} % processed" if target else None)
    return _item(day, LATE, "the day missed a delivery promise")


def _check_failed(signal: dict[str, Any]) -> dict[str, Any]:
    day, check = signal.get("partition"), signal.get("check")
    observed, expected = signal.get("observed"), signal.get("expected")
    if check == GOLDEN_MATCHES_GOVERNED_METRIC:
        shown = [_number(v) for k, v in (observed or {}).items() if k != "dashboard_version"] if isinstance(
            observed, dict) else []
        governed = _number((expected or {}).get("governed_metric")) if isinstance(expected, dict) else None
        return _item(day, WRONG, f"the {product_name(signal.get('asset') or '')} shows revenue that disagrees "
                                 "with governed gross revenue",
                     f"{', '.join(s for s in shown if s)} USD shown" if any(shown) else None,
                     f"{governed} USD governed gross revenue" if governed else None)
    if check == SOURCE_CONTRACT_CONFORMS:
        return _item(day, UNAVAILABLE, "the source system changed the layout of its sales data; the day was "
                                       "stopped before anything was published")
    if check in (MANIFEST_ROWS_MATCH, STAGED_ROWS_RECONCILE):
        got, want = _number(observed), _number(expected)
        return _item(day, INCOMPLETE, "not every order line announced by the source system was received",
                     f"{got} order lines" if got else None, f"{want} order lines" if want else None)
    if check == QUALITY_WITHIN_THRESHOLDS:
        return _item(day, INCOMPLETE, "too many order lines of the day failed the quality rules")
    figures = _control_figures(observed, expected)
    return _item(day, UNAVAILABLE, "the figures of the day did not add up between processing steps, so "
                                   "they are held back until corrected", *(figures or (None, None)))


def _restatement_held(signal: dict[str, Any]) -> dict[str, Any]:
    figures = _control_figures(signal.get("observed"), signal.get("expected"))
    return _item(signal.get("partition"), WRONG,
                 "the source system re-sent the day with figures far from the published ones; the new figures are "
                 "held back until the data owner confirms them, and the published figures stay available",
                 *(figures or (None, None)))


def _anomaly_held(signal: dict[str, Any]) -> dict[str, Any]:
    # The guard's own consumer words ("2026-09-22 (Tuesday) revenue is 92 times the usual of recent certified days"),
    # never its measure names or bands.
    summary = signal.get("summary") or f"{signal.get('partition')} is far from its usual figures"
    figures = signal.get("consumer_figures") or {}
    return _item(signal.get("partition"), WRONG,
                 f"{summary}: the figures the source system sent for the day are far from its usual ones, so "
                 "they are held back until the data owner confirms or rejects them; nothing new is published "
                 "for the day and every other day is unchanged",
                 figures.get("observed"), figures.get("usual"))


def _run_failed(signal: dict[str, Any]) -> dict[str, Any]:
    return _item(signal.get("partition"), UNAVAILABLE, "processing of the day failed")


ITEMS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "source_late": _source_late,
    "source_rejected": _source_rejected,
    "slo_missed": _slo_missed,
    "check_failed": _check_failed,
    "run_failed": _run_failed,
    "restatement_held": _restatement_held,
    "anomaly_held": _anomaly_held,
    # a consumer report is the reporter's own words: it is evidence, not something to broadcast
}


def impact_words(impacts: set[str]) -> str:
    ordered = [i for i in IMPACTS if i in impacts]
    if len(ordered) <= 1:
        return ordered[0] if ordered else ""
    return ", ".join(ordered[:-1]) + " and " + ordered[-1]


def _day_status(day: str, status) -> str:
    due = due_at(day)
    if status.state == CERTIFIED:
        version = status.certified_version
        restated = status.restated_from
        if restated:  # consumers who exported an earlier version see what changed
            return f"available (version {version}, {restated.replace(' -> ', ' to ')})"
        return f"available (version {version}{', restated' if version and version > 1 else ''})"
    if status.state == WITHDRAWN:
        serving = [a for a in status.assets if a.served]
        return ("withdrawn while it is checked; " + ("the previous certified version stays available" if serving
                                                      else "nothing is available for this day meanwhile"))
    if status.state == RESTATEMENT_PENDING:
        return "available; a corrected version is being prepared"
    if status.state == HELD:
        at = max(a.served.certified_at for a in status.assets if a.served)
        return (f"available: consumers keep version {status.certified_version}, certified {at}; the figures the "
                "source system re-sent are held back until the data owner confirms them")
    if status.state == "PENDING":
        return f"not due yet: it is due by {_when(due)}"
    if status.state == "ANOMALY_HELD":
        return "held for the data owner: nothing is published for this day until they confirm or reject its figures"
    return f"not available yet: it was due by {_when(due)}"


def _last_known_good(platform: Platform, partitions: list[str]) -> list[dict[str, Any]]:
    out = []
    states = platform.ledger.partitions.states(assets=CERTIFIED_ASSETS)  # every served day: the last good one
    for asset in CERTIFIED_ASSETS:
        served = states.served_map(asset)
        in_scope = {p: served[p] for p in partitions if p in served}
        earlier = sorted(p for p in served if not partitions or p < partitions[0])
        entry: dict[str, Any] = {"product": product_name(asset)}
        if in_scope:
            entry["serving"] = {p: f"version {v.version} certified {v.certified_at}" for p, v in in_scope.items()}
        if earlier:
            v = served[earlier[-1]]
            entry["last_certified_day_before"] = f"{earlier[-1]} (version {v.version})"
        out.append(entry)
    return out


def _products(incident: Incident) -> list[str]:
    radius = incident.latest("blast_radius")
    if not radius:
        return [DEFAULT_PRODUCTS]
    assets = radius["data"]["marts"] + radius["data"]["dashboards"]
    if METRIC_GROSS_REVENUE.name in [x["asset"] for x in radius["data"]["assets"]]:
        assets = [METRIC_GROSS_REVENUE.name] + assets
    names = []
    for asset in assets:
        if product_name(asset) not in names:
            names.append(product_name(asset))
    return names or [DEFAULT_PRODUCTS]


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
    holding = triage["data"].get("holding", [verdict]) if triage else []

    statuses = {p: partition_status(platform, p) for p in incident.partitions}
    items: list[dict[str, Any]] = []
    for signal in incident.signals:
        describe = ITEMS.get(signal["kind"])
        if describe is None:
            continue
        item = describe(signal)
        served = statuses.get(item["day"])
        if item["impact"] == UNAVAILABLE and served is not None and served.state in SERVED_STATES:
            # the newer data is held back, but consumers keep reading a certified version of the day
            item["impact"] = LATE
            item["what"] += "; the certified version stays available"
        item["what"] = clean(item["what"])
        if item not in items:
            items.append(item)
    # every cause counts, not only the lead one: a late batch that is also partial is late and incomplete;
    # the triage verdicts speak only when no evidence describes the impact itself (a consumer report alone)
    impacts = {i["impact"] for i in items} or {VERDICT_IMPACT[m] for m in holding if m in VERDICT_IMPACT}
    # the consumer's data state speaks from the first notice on: a withdrawn day with nothing served is
    # unavailable, whatever triage has (not yet) found
    withdrawn_empty = [p for p, s in statuses.items()
                       if s.state == WITHDRAWN and not any(a.served for a in s.assets)]
    if withdrawn_empty:
        impacts.add(UNAVAILABLE)
    impact_by_day = {day: impact_words({i["impact"] for i in items if i["day"] == day}
                                       | ({UNAVAILABLE} if day in withdrawn_empty else set()))
                     for day in incident.partitions}
    if impacts:
        impact = impact_words(impacts)
    elif verdict == NOT_DUE:
        impact = "not due yet"
    elif any(s.state in (HELD, "ANOMALY_HELD") for s in statuses.values()):
        impact = "held figures under review"
    else:
        impact = "under investigation"
    if stage == "resolved":
        impact = f"no longer {impact} (resolved)"
    notice = {
        "incident": incident.id,
        "stage": stage,
        "issued_at": format_ts(platform.clock.now()),
        "summary": clean(summary),
        "affected_products": _products(incident),
        "affected_days": incident.partitions,
        "impact": impact,
        "impact_per_day": {d: i for d, i in impact_by_day.items() if i},
        "current_state_per_day": {p: STATE_WORDS.get(s.state, s.state) for p, s in statuses.items()},
        "day_status": {p: _day_status(p, s) for p, s in statuses.items()},
        "observed_vs_expected": [{k: v for k, v in i.items() if k != "impact"} for i in items],
        "last_known_good": _last_known_good(platform, incident.partitions),
        "figures_will_be_restated": restated,
        "repair": clean(repair),
        "next_update": clean(next_update),
    }
    if corrected:
        notice["corrected_figures"] = corrected
    return notice


def _figure_label(key: str) -> str:
    words = key.removesuffix("_usd").replace("_", " ")
    return words[:1].upper() + words[1:] + (" (USD)" if key.endswith("_usd") else "")


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
        "## Where each day stands",
    ]
    for day, state in notice["current_state_per_day"].items():
        impact = notice.get("impact_per_day", {}).get(day)
        lines.append(f"- {day}: {state.lower()}, {notice['day_status'][day]}" + (f" (data is {impact})" if impact else ""))
    if notice["observed_vs_expected"]:
        lines += ["", "## What we saw"]
        for item in notice["observed_vs_expected"]:
            figures = ""
            if item["observed"] or item["expected"]:
                figures = f": {item['observed'] or 'not known'}" + (f", expected {item['expected']}" if item["expected"] else "")
            lines.append(f"- {item['day'] or 'every affected day'}: {item['what']}{figures}")
    lines += ["", "## What you can use meanwhile"]
    for entry in notice["last_known_good"]:
        serving = "; ".join(f"{d}: {s}" for d, s in entry.get("serving", {}).items())
        before = entry.get("last_certified_day_before")
        lines.append(f"- {entry['product']}: " + (serving or "") + (f"{'; ' if serving else ''}last certified day before: {before}" if before else "")
                     + ("" if serving or before else "nothing certified"))
    if notice.get("corrected_figures"):
        lines += ["", "## Corrected figures"]
        lines += [f"- {_figure_label(k)}: {v}" for k, v in notice["corrected_figures"].items()]
    lines += [
        "",
        f"**Will figures be restated?** {'Yes' if notice['figures_will_be_restated'] else 'No'}",
        f"**Repair:** {notice['repair']}",
        f"**Next update:** {notice['next_update']}",
        "",
    ]
    return "\n".join(lines)
