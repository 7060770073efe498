"""Source contracts: what the ERP promises to send, version by version.

A contract names the fields of ``order_lines``, their types, which are
required, the allowed channels and statuses, the range of quantities and
money, and (from v2 on) how fields of a newer source layout map onto the
canonical ones. The raw layer projects every landed row onto the canonical
typed columns and remembers which values failed the type rules, so a type
error quarantines one row instead of failing a batch.

Type rules are strict: a value is taken only when its *source
representation* already is of the contract's type. Integers are written as
integers (``2.7``, ``1.0``, ``0x10``, ``1_000`` and ``1e3`` are type errors,
never rounded or parsed), money is a plain decimal with at most two places
(no currency signs, no exponent), text fields are JSON strings (a number or
an object sent as ``order_id`` is a type error, not text), dates are
``YYYY-MM-DD``. In Parquet, the column's own type must be the contract's (an
integer type for integers, a decimal with at most two places or an integer
for money, text for text); a double or boolean column is a type error in
every row that has a value. A *layout* mismatch (a field missing or unknown) is different: it means
the source changed shape, and the whole batch is stopped at the contract gate
until an owner approves a contract that maps it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from .controls import CONTROL_FIELDS, ControlTuple

CHANNELS = ("web", "store", "marketplace")
PAID_STATUS = "paid"
# The closed set of order line statuses; anything else (``PAID``, ``paid ``,
# ``payed``) is quarantined as unknown_status, never silently left uncounted.
STATUSES = (PAID_STATUS, "pending", "refunded", "cancelled")
# Plausible bounds of one order line: beyond them a value is out_of_range (and a
# day's sums can never overflow the DECIMAL(18,2) of the published layers).
MAX_QUANTITY = 1_000_000
MAX_LINE_USD = 1_000_000_000


@dataclass(frozen=True)
class FieldSpec:
    name: str
    sql_type: str  # DuckDB type of the canonical, typed column
    required: bool = True


# Canonical field order of an order line (also the raw table's column order).
CANONICAL_FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec("source_seq", "BIGINT"),
    FieldSpec("order_id", "VARCHAR"),
    FieldSpec("line_no", "INTEGER"),
    FieldSpec("sales_date", "DATE"),
    FieldSpec("event_ts", "TIMESTAMPTZ"),
    FieldSpec("customer_id", "VARCHAR"),
    FieldSpec("product_id", "VARCHAR"),
    FieldSpec("channel", "VARCHAR"),
    FieldSpec("quantity", "INTEGER"),
    FieldSpec("line_amount_usd", "DECIMAL(18,2)"),
    FieldSpec("line_cost_usd", "DECIMAL(18,2)"),
    FieldSpec("status", "VARCHAR"),
)
CANONICAL_NAMES = tuple(f.name for f in CANONICAL_FIELDS)
MONEY_FIELDS = ("line_amount_usd", "line_cost_usd")


@dataclass(frozen=True)
class QualityThresholds:
    """How much of a day the quality gate may refuse before the day is not fit to certify.

    Shares are of the day's rows that are not exact re-sends. A whole column
    of bad values (every amount sent as ``"$40.00"``) quarantines every row:
    the day is then stopped here instead of being certified as zeros.
    """

    min_accepted_share: float = 0.5
    max_share_by_reason: Mapping[str, float] = field(
        default_factory=lambda: {"type_error": 0.25, "unknown_status": 0.25, "out_of_range": 0.25}
    )
    max_share_other_reasons: float = 0.5

    def breaches(self, rows: int, accepted: int, reasons: Mapping[str, int]) -> list[str]:
        """What crosses a threshold for a day of ``rows`` rows (empty when the day is fit)."""
        judged = rows - reasons.get("duplicate_key", 0)
        if judged <= 0:
            return []  # a day with no sales (or only re-sends) breaches nothing
        found = []
        if accepted / judged < self.min_accepted_share:
            found.append(f"accepted {accepted} of {judged} rows ({accepted / judged:.0%}), "
                         f"below the contract's {self.min_accepted_share:.0%}")
        for reason, n in sorted(reasons.items()):
            if reason == "duplicate_key":
                continue
            limit = self.max_share_by_reason.get(reason, self.max_share_other_reasons)
            if n / judged > limit:
                found.append(f"{reason} in {n} of {judged} rows ({n / judged:.0%}), above the contract's {limit:.0%}")
        return found


def _default_restatement_limits() -> dict[str, float]:
    # Profit is a difference, so a modest change of revenue or cost moves it by
    # a larger share: its limit is wider; revenue and cost catch a doubled day.
    return {name: (1.0 if name == "gross_profit_usd" else 0.5) for name in CONTROL_FIELDS}


@dataclass(frozen=True)
class RestatementTolerance:
    """How far a re-send may move a certified day's controls before the data owner must approve it.

    Per measure of the control tuple, the largest relative change (0.5 = 50 %)
    a new batch may make to what consumers were already served. Within it, a
    restatement is certified as the next version; beyond it (every amount
    doubled, a day's revenue from 100 to 0) the new version is built and
    checked but held, and consumers keep the certified one.
    """

    max_relative_change: Mapping[str, float] = field(default_factory=_default_restatement_limits)

    def breaches(self, served: ControlTuple, candidate: ControlTuple) -> list[str]:
        """Each measure that moves beyond its limit, as ``revenue_usd 100.00 -> 200.00 (+100%, limit 50%)``."""
        found = []
        for name in CONTROL_FIELDS:
            before, after = getattr(served, name), getattr(candidate, name)
            if before == after:
                continue
            limit = self.max_relative_change.get(name, 0.0)
            change = float(after - before) / float(before) if before else float("inf")
            if abs(change) > limit:
                shown = "new" if before == 0 else f"{change:+.0%}"
                found.append(f"{name} {before} -> {after} ({shown}, limit {limit:.0%})")
        return found


# The figures of a day the anomaly guard compares with its history
# (product/anomaly.py): the control tuple, the average paid line, and two
# shares that stay near zero on a healthy day.
RATIO_MEASURES = CONTROL_FIELDS + ("avg_line_value_usd",)
SHARE_MEASURES = ("quarantine_share", "event_day_drift_share")
ANOMALY_MEASURES = RATIO_MEASURES + SHARE_MEASURES


def _default_anomaly_margins() -> dict[str, float]:
    # Profit is a difference of revenue and cost, so it swings by a larger
    # factor on a normal day; the other measures catch a day sent in cents.
    return {name: (2.5 if name == "gross_profit_usd" else 1.75) for name in RATIO_MEASURES}


@dataclass(frozen=True)
class AnomalyBand:
    """How far a day's figures may stray from its recent certified history before its owner must sign it.

    The history is the certified days within ``window_days`` of the day
    (either side; the day itself left out). With at least ``min_history`` of
    them, each measure has a band: from the ``low_quantile`` of the history
    divided by the measure's margin to the ``high_quantile`` times it. The
    margin is a factor: two draws of a day with +-20 % noise differ by up to
    1.5x, and a seven-day history holds each weekday of a seasonal week. A
    share (quarantined rows, lines whose event time falls on another UTC
    day) may rise at most ``share_margin`` above the history's high
    quantile. Beyond the band the day is built and checked but held.

    With too little history there is no band, and the day is certified with
    that said, except for an extreme jump: ``extreme_factor`` times above (or
    below) every day certified so far, or a share more than
    ``extreme_share_jump`` above all of them (the quality gate
    already refuses a day with more than half its rows quarantined, so
    this share catches event times, not small days' refusals); that
    holds from the second certified day on.
    """

    window_days: int = 28
    min_history: int = 7  # a week: every weekday of a seasonal week is in the band
    # With this many days of the same weekday in the window, the low end is also at least their
    # median / margin: a minority of small days (holidays, partial days) cannot widen the band.
    min_weekday_history: int = 3
    low_quantile: float = 0.1
    high_quantile: float = 0.9
    margin: Mapping[str, float] = field(default_factory=_default_anomaly_margins)
    share_margin: float = 0.25
    extreme_factor: float = 10.0
    extreme_share_jump: float = 0.5


@dataclass(frozen=True)
class SequenceContinuity:
    """How many ``source_seq`` numbers may go missing before a new day without its owner's word.

    The ERP numbers every row version it emits, so the committed batches of
    consecutive days carry consecutive numbers: a new day whose first number
    lies more than ``max_gap`` numbers past the highest committed before it
    (``product/batch_lifecycle.sequence_boundaries``) lost rows upstream,
    however truthful its manifest. It is held like an anomaly, for its owner
    to approve (the ERP skipped numbers on purpose) or for the late batch
    that carries them. A gap is judged only where it can mean a loss: every
    calendar day between it and the numbers before it delivered a batch
    (else the numbers may be a day not loaded yet), and the history showed a
    dense numbering, at least ``min_dense_days`` earlier day boundaries
    within ``max_gap`` and most of them (a source that numbers sparsely says
    nothing by a gap).
    """

    max_gap: int = 0
    min_dense_days: int = 3


@dataclass(frozen=True)
class SourceContract:
    """One version of the order_lines source contract."""

    version: str
    owner: str
    description: str
    # source field name -> canonical field name, for layouts that renamed a field
    renames: Mapping[str, str] = field(default_factory=dict)
    # True when the contract applies to a batch only after an owner approved it
    requires_approval: bool = False
    quality: QualityThresholds = field(default_factory=QualityThresholds)
    restatement: RestatementTolerance = field(default_factory=RestatementTolerance)
    anomaly: AnomalyBand = field(default_factory=AnomalyBand)
    sequence: SequenceContinuity = field(default_factory=SequenceContinuity)

    @property
    def source_fields(self) -> tuple[str, ...]:
        """Field names as they appear in a conforming source file."""
        reverse = {canonical: source for source, canonical in self.renames.items()}
        return tuple(reverse.get(name, name) for name in CANONICAL_NAMES)

    def source_name(self, canonical: str) -> str:
        reverse = {c: s for s, c in self.renames.items()}
        return reverse.get(canonical, canonical)

    def conformance(self, present: Iterable[str]) -> "Conformance":
        present_set = set(present)
        expected = set(self.source_fields)
        return Conformance(
            contract=self.version,
            missing=tuple(sorted(expected - present_set)),
            unexpected=tuple(sorted(present_set - expected)),
        )


@dataclass(frozen=True)
class Conformance:
    """How a batch's field layout compares with a contract."""

    contract: str
    missing: tuple[str, ...]
    unexpected: tuple[str, ...]

    @property
    def conforms(self) -> bool:
        return not self.missing and not self.unexpected

    def describe(self) -> str:
        if self.conforms:
            return f"layout conforms to contract {self.contract}"
        parts = []
        if self.missing:
            parts.append("missing " + ", ".join(self.missing))
        if self.unexpected:
            parts.append("unexpected " + ", ".join(self.unexpected))
        return f"layout violates contract {self.contract}: " + "; ".join(parts)


CONTRACT_V1 = SourceContract(
    version="v1",
    owner="erp-operations",
    description="ERP order_lines as agreed at launch: line_amount_usd is the net line amount.",
)

# v2 exists because the ERP upgrade renamed line_amount_usd. It maps the new
# name back onto the canonical field; it applies to a batch only once the
# contract owner approved it for that batch (see contract_approvals.py), so a silent
# rename is stopped at the gate instead of being guessed at.
CONTRACT_V2 = SourceContract(
    version="v2",
    owner="erp-operations",
    description=(
        "ERP order_lines after the ERP upgrade: line_amount_usd is delivered as gross_line_amount_usd "
        "(same meaning: the amount charged for the line, USD, two places)."
    ),
    renames={"gross_line_amount_usd": "line_amount_usd"},
    requires_approval=True,
)

CONTRACTS: dict[str, SourceContract] = {c.version: c for c in (CONTRACT_V1, CONTRACT_V2)}


# DESCRIBE spells some types longhand; these are the same types as the contract's.
_TYPE_ALIASES = {"TIMESTAMP WITH TIME ZONE": "TIMESTAMPTZ", "INT32": "INTEGER", "INT64": "BIGINT", "STRING": "VARCHAR"}


def _same_type(described: str, contract_type: str) -> bool:
    described = described.upper()
    return _TYPE_ALIASES.get(described, described) == contract_type


_INTEGER_TYPES = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                  "UBIGINT", "INT8", "INT16", "INT32", "INT64", "INT", "LONG", "SHORT"}
# Source text of a value in its contract type (whole-string matches, no trimming).
_TEXT_PATTERNS = {
    "INTEGER": r"[+-]?[0-9]+",
    "BIGINT": r"[+-]?[0-9]+",
    "DECIMAL": r"[+-]?[0-9]+(\.[0-9]+)?",
    "DATE": r"[0-9]{4}-[0-9]{2}-[0-9]{2}",
}


def _kind(sql_type: str) -> str:
    return "DECIMAL" if sql_type.startswith("DECIMAL") else sql_type


def _typed_source_accepted(described: str, spec: FieldSpec) -> bool:
    """May a typed (Parquet) column of type ``described`` feed ``spec``? Never for doubles or booleans."""
    described = _TYPE_ALIASES.get(described.upper(), described.upper())
    kind = _kind(spec.sql_type)
    if kind in ("INTEGER", "BIGINT"):
        return described in _INTEGER_TYPES
    if kind == "DECIMAL":
        if described in _INTEGER_TYPES:
            return True
        if described.startswith("DECIMAL("):
            scale = int(described.rstrip(")").split(",")[1])
            return scale <= 2
        return False
    if kind == "TIMESTAMPTZ":
        return described in ("TIMESTAMPTZ", "TIMESTAMP WITH TIME ZONE")
    return described == spec.sql_type


def _cast(expr: str, spec: FieldSpec) -> str:
    """Cast source text to the contract type, or NULL when its representation is not of that type."""
    kind = _kind(spec.sql_type)
    if kind == "DECIMAL":
        # Exact two-place money only: '12.345' must not round silently.
        wide = f"TRY_CAST({expr} AS DECIMAL(38,10))"
        cast = f"CASE WHEN {wide} = TRY_CAST({expr} AS {spec.sql_type}) THEN TRY_CAST({expr} AS {spec.sql_type}) END"
    else:
        cast = f"TRY_CAST({expr} AS {spec.sql_type})"
    pattern = _TEXT_PATTERNS.get(kind)
    if pattern is None:
        return cast
    return f"CASE WHEN regexp_full_match({expr}, '{pattern}') THEN {cast} END"


def typed_projection_sql(
    contract: SourceContract,
    source: str,
    present: Iterable[str],
    output_names: Mapping[str, str] | None = None,
    source_types: Mapping[str, str] | None = None,
    json_kinds: bool = False,
) -> str:
    """SQL projecting ``source`` rows onto typed canonical columns, by the module's strict type rules.

    ``source`` is a reader from ``store/landing.py``: text formats give every
    field as text plus, for JSON (``json_kinds``), a ``<field>::kind`` column
    with the JSON type of the value; Parquet gives typed columns (``source_types``). Adds
    ``type_error_fields`` (comma-separated canonical names whose value broke
    a type rule, else NULL) and ``invalid_values_json`` (the source text of
    those values, for diagnosis). Fields absent from the file are NULL.
    ``output_names`` renames canonical columns in the output.
    """
    present_set = set(present)
    output_names = output_names or {}
    source_types = source_types or {}
    typed, error_terms, raw_terms = [], [], []
    for spec in CANONICAL_FIELDS:
        name = output_names.get(spec.name, spec.name)
        src = contract.source_name(spec.name)
        if src not in present_set:
            typed.append(f"CAST(NULL AS {spec.sql_type}) AS {name}")
            continue
        raw = f'"{src}"'
        described = source_types.get(src)
        if described is not None and described.upper() != "VARCHAR":
            # A typed column: its type is part of the contract.
            if _typed_source_accepted(described, spec):
                value = raw if _same_type(described, spec.sql_type) else f"TRY_CAST({raw} AS {spec.sql_type})"
            else:
                value = f"CAST(NULL AS {spec.sql_type})"
        elif spec.sql_type == "VARCHAR":
            # From JSON only a JSON string is text; a blank string is a missing value.
            not_text = f"\"{src}::kind\" <> 'VARCHAR'" if json_kinds else "false"
            value = f"CASE WHEN {not_text} THEN NULL WHEN trim({raw}) = '' THEN NULL ELSE {raw} END"
        else:
            value = _cast(raw, spec)
        typed.append(f"{value} AS {name}")
        blank = f"trim(CAST({raw} AS VARCHAR)) = ''" if spec.sql_type == "VARCHAR" else "false"
        failed = f"({raw} IS NOT NULL AND NOT ({blank}) AND {value} IS NULL)"
        error_terms.append(f"CASE WHEN {failed} THEN '{spec.name}' END")
        raw_terms.append(f"'{spec.name}', CASE WHEN {failed} THEN CAST({raw} AS VARCHAR) END")
    errors = f"NULLIF(concat_ws(',', {', '.join(error_terms)}), '')" if error_terms else "NULL"
    invalid = (
        f"CASE WHEN {errors} IS NOT NULL THEN CAST(json_object({', '.join(raw_terms)}) AS VARCHAR) END"
        if raw_terms
        else "NULL"
    )
    return (
        f"SELECT {', '.join(typed)}, {errors} AS type_error_fields, {invalid} AS invalid_values_json "
        f"FROM {source}"
    )
