"""The anomaly guard: a day that every rule accepts, but its own history does not, waits for its owner.

A day sent in cents, truncated upstream or shifted by a timezone passes every
deterministic rule: the manifest is truthful, every value is well typed and in
range. What gives it away is its history. Before a day is certified for the
first time, the certification gate compares its *profile* (the control tuple,
the average paid line, the quarantined share and the share of lines whose
event time falls on another UTC day than their business day) with the
certified days around it, by the day's contract (``AnomalyBand`` in
``domain/contracts.py``). Beyond the band the day is built and checked but
refused with ``ANOMALY_HELD``: consumers are served nothing new for it (the
other days are unchanged), detection opens an incident with the figures and
the band, and the data owner approves exactly those figures
(``approve_anomaly``, then the held build is certified) or rejects them
(``reject_anomaly``: the day's batches are retired and the day waits for a
corrected delivery).

The bands are computed set-based in DuckDB over the profiles recorded with
each certification in the ledger, plus the other days being decided; a day
held in the same decision is left out of its neighbours' history (the
computation repeats until no new day is held).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import pyarrow as pa

from ..domain.contracts import ANOMALY_MEASURES, SHARE_MEASURES, AnomalyBand
from ..domain.controls import CONTROL_FIELDS, ControlTuple, format_money
from ..store.clock import format_ts
from ..store.ledger.day_states import DayStates
from ..store.ledger.partition_states import CERTIFICATION_REFUSED, PartitionEvent
from ..store.platform import Platform
from ..store.tables import METRIC_GROSS_REVENUE
from ..store.warehouse import duckdb_connection
from .contract_approvals import contract_of_day

if TYPE_CHECKING:
    from .batch_lifecycle import SeqGap

ANOMALY_HELD = "anomaly held for the data owner's approval"
ANOMALY_REJECTED = "anomaly rejected by the data owner"
# The profile of a certified day is kept in its CERTIFIED event's detail under this key.
PROFILE_KEY = "profile"

MEASURE_WORDS = {
    "paid_lines": "paid order lines",
    "orders": "orders",
    "units": "units",
    "revenue_usd": "revenue",
    "cost_usd": "cost",
    "gross_profit_usd": "gross profit",
    "avg_line_value_usd": "average paid line",
    "quarantine_share": "share of order lines refused by the quality rules",
    "event_day_drift_share": "share of order lines whose event time falls on another day",
}


def profile(controls: ControlTuple, quality_observed: Mapping[str, Any] | None, drift_lines: int | None) -> dict:
    """The measures of one day (JSON-safe floats; None where a measure cannot be known)."""
    found: dict[str, float | None] = {name: float(getattr(controls, name)) for name in CONTROL_FIELDS}
    found["avg_line_value_usd"] = float(controls.revenue_usd / controls.paid_lines) if controls.paid_lines else None
    found["quarantine_share"] = None
    if isinstance(quality_observed, Mapping) and "rows" in quality_observed:
        reasons = quality_observed.get("reasons") or {}
        judged = int(quality_observed["rows"]) - int(reasons.get("duplicate_key", 0))
        refused = judged - int(quality_observed.get("accepted", 0))
        found["quarantine_share"] = refused / judged if judged > 0 else 0.0
    found["event_day_drift_share"] = (
        drift_lines / controls.paid_lines if drift_lines is not None and controls.paid_lines else
        (0.0 if drift_lines is not None else None)
    )
    return found


@dataclass
class Breach:
    measure: str
    value: float
    low: float | None
    high: float | None
    median: float | None
    history: int
    extreme: bool

    @property
    def factor(self) -> float | None:
        if self.measure in SHARE_MEASURES or not self.median or self.median <= 0 or self.value <= 0:
            return None
        return self.value / self.median

    def figure(self, value: float | None) -> str:
        if value is None:
            return "-"
        if self.measure in SHARE_MEASURES:
            return f"{value:.0%}"
        if self.measure.endswith("_usd"):
            return format(Decimal(str(value)).quantize(Decimal("0.01")), "f")
        return f"{value:g}"

    def describe(self) -> str:
        """``revenue_usd 28500.00: 95x the median 300.00 of 5 certified days (band 200.00..450.00)``."""
        if self.extreme:
            against = "the one day certified so far" if self.history == 1 else f"all {self.history} days certified so far"
            return f"{self.measure} {self.figure(self.value)}: an extreme jump against {against} ({self._relation()})"
        band = f"band {self.figure(self.low) if self.low is not None else '-'}..{self.figure(self.high) if self.high is not None else '-'}"
        return (f"{self.measure} {self.figure(self.value)}: {self._relation()} of {self.history} certified days "
                f"({band})")

    def _relation(self) -> str:
        factor = self.factor
        if factor is not None and (factor >= 2 or factor <= 0.5):
            shown = f"{factor:.0f}x" if factor >= 2 else f"1/{1 / factor:.0f}"
            return f"{shown} the median {self.figure(self.median)}"
        return f"against the median {self.figure(self.median)}"

    def to_json(self) -> dict[str, Any]:
        return {"measure": self.measure, "value": self.figure(self.value), "median": self.figure(self.median),
                "low": self.figure(self.low), "high": self.figure(self.high), "history_days": self.history,
                "extreme": self.extreme, "described": self.describe()}

    def consumer_words(self, day: str) -> str:
        """``2026-09-22 (Tuesday) revenue is 92 times the usual of recent certified days``: no internal names."""
        weekday = date.fromisoformat(day).strftime("%A")
        words = MEASURE_WORDS.get(self.measure, self.measure)
        factor = self.factor
        if factor is not None and factor >= 2:
            how = f"{factor:.0f} times the usual"
        elif factor is not None and factor <= 0.5:
            how = f"1/{1 / factor:.0f} of the usual" if factor > 0 else "none of the usual"
        elif self.measure in SHARE_MEASURES:
            how = f"{self.figure(self.value)}, against a usual {self.figure(self.median)}"
        else:
            how = f"{self.figure(self.value)}, far from the usual {self.figure(self.median)}"
        return f"{day} ({weekday}) {words} is {how} of recent certified days"


@dataclass
class AnomalyVerdict:
    partition: str
    history: int
    breaches: list[Breach]
    note: str | None = None  # e.g. too little history for a band
    gap: SeqGap | None = None  # source_seq numbers missing beyond the contract's tolerance
    tolerance: int = 0

    @property
    def held(self) -> bool:
        return bool(self.breaches) or self.gap is not None

    def reason(self) -> str:
        parts = ([self.gap.describe(self.tolerance)] if self.gap else []) + [b.describe() for b in self.breaches]
        return f"{ANOMALY_HELD}: " + "; ".join(parts)

    def consumer_summary(self) -> str:
        if not self.breaches:
            weekday = date.fromisoformat(self.partition).strftime("%A")
            lead = (f"{self.partition} ({weekday}) may be incomplete: {self.gap.missing} order line "
                    f"record{'s' if self.gap.missing != 1 else ''} the source numbered before it never arrived")
        else:
            lead = self.breaches[0].consumer_words(self.partition)
        return f"{lead}; held for the data owner"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"history_days": self.history, "breaches": [b.to_json() for b in self.breaches],
                               "summary": self.consumer_summary()}
        if self.gap is not None:
            out["sequence_gap"] = {**self.gap.to_json(), "tolerance": self.tolerance}
        if self.breaches:
            lead = self.breaches[0]
            unit = " USD" if lead.measure.endswith("_usd") else ""
            # the lead figure in consumer words, for notices
            out["observed"] = f"{MEASURE_WORDS[lead.measure]} {lead.figure(lead.value)}{unit}"
            out["usual"] = f"{MEASURE_WORDS[lead.measure]} about {lead.figure(lead.median)}{unit}"
        else:
            out["observed"] = f"order line records numbered from {self.gap.after.low}"
            out["usual"] = f"numbering continuing from {self.gap.low}"
        return out


def _history_rows(platform: Platform, exclude: set[str]) -> list[dict]:
    """Profiles of the days consumers are served (the newest live certification of the governed metric)."""
    served = platform.ledger.partitions.states(assets=[METRIC_GROSS_REVENUE.name]).served_map(METRIC_GROSS_REVENUE.name)
    approved = _approved_anomaly_days(platform)
    rows = []
    for day, version in served.items():
        if day in exclude or day in approved:
            continue  # a day its owner signed as an anomaly is no measure of a usual day
        found = version.certification.detail.get(PROFILE_KEY)
        if found is None and version.certification.controls is not None:
            # certified before profiles were recorded: the controls still count
            found = profile(version.certification.controls, None, None)
        if found:
            rows.append({"day": day, **found})
    return rows


def _approved_anomaly_days(platform: Platform) -> set[str]:
    """Days whose figures their owner approved as an anomaly (``approve_anomaly``)."""
    from .restatements import RESTATEMENT_APPROVALS  # local, as the other decisions read it

    platform.ledger.engine.ensure(RESTATEMENT_APPROVALS)
    return {r["partition"] for r in platform.ledger.engine.select(RESTATEMENT_APPROVALS)
            if str(r["reason"]).startswith("anomaly approved:")}


def _as_table(rows: list[dict]) -> pa.Table:
    return pa.table({
        "day": pa.array([date.fromisoformat(r["day"]) for r in rows], pa.date32()),
        **{m: pa.array([r.get(m) for r in rows], pa.float64()) for m in ANOMALY_MEASURES},
    })


_UNPIVOT = " UNION ALL ".join(
    f"SELECT day, '{m}' AS measure, {m} AS value FROM {{source}} WHERE {m} IS NOT NULL" for m in ANOMALY_MEASURES
)

# Per candidate day and measure: the history within the window, its quantiles,
# and the extremes of every other day.
_BANDS_SQL = """
WITH cand AS ({cand}), pool AS ({pool})
SELECT c.day::VARCHAR AS day, c.measure, c.value,
       count(p.value) FILTER (WHERE abs(p.day - c.day) <= {window}) AS n,
       quantile_cont(p.value, {lo}) FILTER (WHERE abs(p.day - c.day) <= {window}) AS q_lo,
       quantile_cont(p.value, 0.5) FILTER (WHERE abs(p.day - c.day) <= {window}) AS med,
       quantile_cont(p.value, {hi}) FILTER (WHERE abs(p.day - c.day) <= {window}) AS q_hi,
       count(p.value) FILTER (WHERE abs(p.day - c.day) <= {window} AND (p.day - c.day) % 7 = 0) AS n_wd,
       quantile_cont(p.value, 0.5) FILTER (WHERE abs(p.day - c.day) <= {window} AND (p.day - c.day) % 7 = 0)
           AS med_wd,
       count(p.value) AS n_all, min(p.value) AS lowest, max(p.value) AS highest,
       quantile_cont(p.value, 0.5) AS med_all
FROM cand c LEFT JOIN pool p ON p.measure = c.measure AND p.day <> c.day
GROUP BY ALL
ORDER BY day, measure
"""


def _breach(row: dict, band: AnomalyBand) -> Breach | None:
    measure, value = row["measure"], row["value"]
    share = measure in SHARE_MEASURES
    if row["n"] >= band.min_history:
        if share:
            low, high = None, row["q_hi"] + band.share_margin
        else:
            margin = band.margin.get(measure, 1.5)
            low = row["q_lo"] / margin if row["q_lo"] > 0 else None
            if (row["n_wd"] or 0) >= band.min_weekday_history and row["med_wd"] and row["med_wd"] > 0:
                # Like with like: the same weekday's median, which a minority of small days
                # (a holiday, a partial day) cannot drag down as they drag the low quantile.
                low = max(low or 0.0, row["med_wd"] / margin)
            high = row["q_hi"] * margin if row["q_hi"] > 0 else None
        if (low is not None and value < low) or (high is not None and value > high):
            return Breach(measure, value, low, high, row["med"], row["n"], extreme=False)
        return None
    if not row["n_all"]:
        return None
    if share:
        extreme = value - row["highest"] > band.extreme_share_jump
    else:
        extreme = (row["highest"] > 0 and value >= row["highest"] * band.extreme_factor) or (
            row["lowest"] > 0 and value <= row["lowest"] / band.extreme_factor)
    return Breach(measure, value, None, None, row["med_all"], row["n_all"], extreme=True) if extreme else None


def judge(platform: Platform, candidates: Mapping[str, dict]) -> dict[str, AnomalyVerdict]:
    """Per candidate day (never certified before) its verdict against the certified history and the other candidates.

    Days whose contracts set different bands are judged in separate groups, each by its own band.
    """
    if not candidates:
        return {}
    days = sorted(candidates)
    contracts = {day: contract_of_day(platform.ledger, day) for day in days}
    history = _as_table(_history_rows(platform, exclude=set(days)))
    verdicts: dict[str, AnomalyVerdict] = {}
    for version in sorted({c.version for c in contracts.values()}):
        group = [d for d in days if contracts[d].version == version]
        # The other candidates count as history too (a range backfill of a fresh home has no other).
        others = [d for d in days if d not in group]
        pool_rows = _as_table([{"day": d, **candidates[d]} for d in others])
        verdicts.update(_judge_group(history, pool_rows, {d: candidates[d] for d in group},
                                     contracts[group[0]].anomaly))
    _judge_sequence(platform, verdicts, contracts)
    return verdicts


def _judge_sequence(platform: Platform, verdicts: dict[str, AnomalyVerdict], contracts: Mapping[str, Any]) -> None:
    """Hold each day whose source_seq gap exceeds its contract's tolerance; say when a gap it was held for closed."""
    from .batch_lifecycle import covering_batches, held_gap, sequence_boundaries  # local, as in reject_anomaly

    days = sorted(verdicts)
    boundaries = sequence_boundaries(platform.ledger)
    states = platform.ledger.partitions.states(days, [METRIC_GROSS_REVENUE.name])
    for day in days:
        verdict, rule = verdicts[day], contracts[day].sequence
        gap = held_gap(boundaries, day, rule.max_gap, rule.min_dense_days)
        if gap is not None:
            verdict.gap, verdict.tolerance = gap, rule.max_gap
            verdict.note = None
            continue
        held_for = [r.detail["anomaly"]["sequence_gap"] for r in states.get(METRIC_GROSS_REVENUE.name, day).refusals
                    if (r.detail.get("anomaly") or {}).get("sequence_gap")]
        if held_for and not verdict.held:
            was = held_for[-1]
            closed = (f"source_seq gap {was['low']}..{was['high']} closed: delivered by batch "
                      f"{', '.join(covering_batches(platform.ledger, was['low'], was['high'])) or '-'}")
            verdict.note = f"{closed}; {verdict.note}" if verdict.note else closed


def _judge_group(history: pa.Table, others: pa.Table, candidates: Mapping[str, dict],
                 band: AnomalyBand) -> dict[str, AnomalyVerdict]:
    days = sorted(candidates)
    held: set[str] = set()
    con = duckdb_connection()
    try:
        con.register("history_rows", pa.concat_tables([history, others]))
        con.register("cand_rows", _as_table([{"day": d, **candidates[d]} for d in days]))
        while True:
            kept = ", ".join(f"DATE '{d}'" for d in sorted(set(days) - held)) or "NULL"
            pool = (_UNPIVOT.format(source="history_rows") + " UNION ALL "
                    + _UNPIVOT.format(source=f"(SELECT * FROM cand_rows WHERE day IN ({kept}))"))
            sql = _BANDS_SQL.format(cand=_UNPIVOT.format(source="cand_rows"), pool=pool, window=band.window_days,
                                    lo=band.low_quantile, hi=band.high_quantile)
            rows = con.sql(sql).to_arrow_table().to_pylist()
            verdicts: dict[str, AnomalyVerdict] = {d: AnomalyVerdict(d, 0, []) for d in days}
            for row in rows:
                verdict = verdicts[row["day"]]
                verdict.history = max(verdict.history, row["n"] or 0)
                found = _breach(row, band)
                if found is not None:
                    verdict.breaches.append(found)
            for verdict in verdicts.values():  # the control tuple's order: lines, orders, ..., then the shares
                verdict.breaches.sort(key=lambda b: ANOMALY_MEASURES.index(b.measure))
            newly = {d for d, v in verdicts.items() if v.held} - held
            if not newly:
                break
            held |= newly
    finally:
        con.close()
    for verdict in verdicts.values():
        if verdict.history < band.min_history and not verdict.held:
            verdict.note = (f"too little certified history for an anomaly band ({verdict.history} of "
                            f"{band.min_history} days): certified without one")
    return verdicts


# --- reading and deciding holds ---------------------------------------------------------------


def anomaly_reasons(platform: Platform, partitions: Sequence[str], states: DayStates | None = None) -> dict[str, str]:
    """Per day, the guard's reason when its newest certification decision is an anomaly hold (or rejection)."""
    from .restatements import held_reasons

    return held_reasons(platform, partitions, prefixes=(ANOMALY_HELD, ANOMALY_REJECTED), states=states)


def anomaly_held_builds(platform: Platform, partition: str) -> list[PartitionEvent]:
    """The newest build of each certified product of the day, where the gate held it as an anomaly."""
    from .restatements import held_builds

    return held_builds(platform, partition, prefix=ANOMALY_HELD)


def approve_anomaly(platform: Platform, partition: str, owner: str, approved_by: str, reason: str, at: datetime,
                    incident_id: str | None = None) -> ControlTuple:
    """The owner signs the held figures (e.g. a real sales event): recorded with the figures; returns them.

    The caller then certifies the held builds (``atlasmart anomaly approve``
    does); a later build with other figures is judged again.
    """
    from .restatements import RestatementError, check_owner, record_approval, refused_controls

    check_owner(platform, partition, owner, approved_by, reason)
    held = anomaly_held_builds(platform, partition)
    if not held:
        raise RestatementError(f"no anomaly of {partition} is held for approval")
    controls = refused_controls(platform, held[0])
    record_approval(platform, partition, controls, owner, approved_by, f"anomaly approved: {reason}", at, incident_id)
    return controls


def reject_anomaly(platform: Platform, partition: str, owner: str, rejected_by: str, reason: str, at: datetime,
                   incident_id: str | None = None) -> list[str]:
    """The owner rejects the held figures: the day's accepted batches are retired (their bytes stay as evidence).

    Returns the retired batch ids. The day then waits for a corrected delivery
    (a new batch, loaded like any other) and serves nothing meanwhile.
    """
    # Local: batch_lifecycle reads the raw store, which only this decision needs.
    from .batch_lifecycle import RETIRED, decide, retired_batches
    from .restatements import RestatementError, check_owner

    check_owner(platform, partition, owner, rejected_by, reason)
    held = anomaly_held_builds(platform, partition)
    if not held:
        raise RestatementError(f"no anomaly of {partition} is held for a decision")
    retired = retired_batches(platform.ledger, partition)
    # The batches the held build was made of: those admitted before it (a correction admitted since stays).
    built_at = max(b.recorded_at for b in held)
    batches = [b["batch_id"] for b in platform.ledger.batches.list(partition)
               if b["batch_id"] not in retired and b["first_seen_at"] <= built_at]
    for batch_id in batches:
        decide(platform, batch_id, RETIRED, rejected_by, f"{ANOMALY_REJECTED} ({owner}): {reason}", at, incident_id)
    for build in held:
        platform.ledger.partitions.append(
            build.asset, partition, CERTIFICATION_REFUSED, at, actor=f"{rejected_by} (anomaly rejected)",
            snapshot_id=build.snapshot_id, fingerprint=build.fingerprint, controls=build.controls,
            run_id=build.run_id, lane=build.lane, reason=f"{ANOMALY_REJECTED}: {reason}",
            detail={"built_event_id": build.id, "reasons": [f"{ANOMALY_REJECTED} ({owner}, {format_ts(at)}): {reason}; "
                                                            f"batches retired: {', '.join(batches) or 'none'}"]},
        )
    return batches


def describe_profile(found: Mapping[str, Any]) -> dict[str, str]:
    """A profile as people read it (for evidence and incidents)."""
    out = {}
    for measure in ANOMALY_MEASURES:
        value = found.get(measure)
        if value is None:
            continue
        if measure in SHARE_MEASURES:
            out[measure] = f"{value:.0%}"
        elif measure.endswith("_usd"):
            out[measure] = format_money(Decimal(str(value)))
        else:
            out[measure] = f"{value:g}"
    return out


def iter_breaches(verdicts: Iterable[AnomalyVerdict]) -> Iterable[tuple[str, Breach]]:
    for verdict in verdicts:
        for breach in verdict.breaches:
            yield verdict.partition, breach
