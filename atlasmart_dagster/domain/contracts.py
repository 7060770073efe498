"""Source contracts: what the ERP promises to send, version by version.

A contract names the fields of ``order_lines``, their types, which are
required, the allowed channels, and (from v2 on) how fields of a newer source
layout map onto the canonical ones. The raw layer projects every landed row
onto the canonical typed columns with ``TRY_CAST`` and remembers which values
failed to cast, so a type error quarantines one row instead of failing a
batch. A *layout* mismatch (a field missing or unknown) is different: it means
the source changed shape, and the whole batch is stopped at the contract gate
until an owner approves a contract that maps it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

CHANNELS = ("web", "store", "marketplace")
PAID_STATUS = "paid"


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
class SourceContract:
    """One version of the order_lines source contract."""

    version: str
    owner: str
    description: str
    # source field name -> canonical field name, for layouts that renamed a field
    renames: Mapping[str, str] = field(default_factory=dict)
    # True when the contract applies to a batch only after an owner approved it
    requires_approval: bool = False

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


def _cast(expr: str, spec: FieldSpec) -> str:
    if spec.sql_type.startswith("DECIMAL"):
        # Exact two-place money only: '12.345' must not round silently.
        wide = f"TRY_CAST({expr} AS DECIMAL(38,10))"
        return f"CASE WHEN {wide} = TRY_CAST({expr} AS {spec.sql_type}) THEN TRY_CAST({expr} AS {spec.sql_type}) END"
    return f"TRY_CAST({expr} AS {spec.sql_type})"


def typed_projection_sql(
    contract: SourceContract,
    source: str,
    present: Iterable[str],
    output_names: Mapping[str, str] | None = None,
    source_types: Mapping[str, str] | None = None,
) -> str:
    """SQL projecting ``source`` rows onto typed canonical columns.

    Adds ``type_error_fields`` (comma-separated canonical names whose non-null
    value failed to cast, else NULL) and ``invalid_values_json`` (the raw text
    of those values, for diagnosis). Fields absent from the file are NULL.
    ``output_names`` renames canonical columns in the output. A column whose
    ``source_types`` entry already is the contract type (typed Parquet) is taken
    as it is: it cannot fail to cast.
    """
    present_set = set(present)
    output_names = output_names or {}
    source_types = source_types or {}
    typed, error_terms, raw_terms = [], [], []
    for spec in CANONICAL_FIELDS:
        src = contract.source_name(spec.name)
        if src not in present_set:
            typed.append(f"CAST(NULL AS {spec.sql_type}) AS {output_names.get(spec.name, spec.name)}")
            continue
        raw = f'"{src}"'
        if _same_type(source_types.get(src, ""), spec.sql_type):
            typed.append(f"{raw} AS {output_names.get(spec.name, spec.name)}")
            continue
        cast = _cast(raw, spec)
        typed.append(f"{cast} AS {output_names.get(spec.name, spec.name)}")
        failed = f"({raw} IS NOT NULL AND {cast} IS NULL)"
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
