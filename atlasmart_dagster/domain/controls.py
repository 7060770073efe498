"""The control tuple: the six figures every hop of the pipeline must agree on.

``(paid lines, distinct orders, units, revenue USD, cost USD, gross profit USD)``

Each layer computes the tuple from its own rows with set-based SQL, and the
reconciliation checks compare the tuples hop by hop. Money is ``Decimal`` with
two places end to end; nothing here goes through floats.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from decimal import Decimal
from typing import Any, Iterable, Mapping

CONTROL_FIELDS = ("paid_lines", "orders", "units", "revenue_usd", "cost_usd", "gross_profit_usd")
MONEY_FIELDS = ("revenue_usd", "cost_usd", "gross_profit_usd")
_CENT = Decimal("0.01")


def _money(value: Any) -> Decimal:
    return Decimal(str(value if value is not None else 0)).quantize(_CENT)


def format_money(value: Decimal) -> str:
    """``Decimal('820.00')`` -> ``'820'``, ``Decimal('12.50')`` -> ``'12.5'`` (for people)."""
    text = format(value.quantize(_CENT), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


@dataclass(frozen=True, order=True)
class ControlTuple:
    """Paid lines, distinct orders, units, revenue, cost and gross profit of a scope."""

    paid_lines: int = 0
    orders: int = 0
    units: int = 0
    revenue_usd: Decimal = Decimal("0.00")
    cost_usd: Decimal = Decimal("0.00")
    gross_profit_usd: Decimal = Decimal("0.00")

    def __post_init__(self) -> None:
        for name in ("paid_lines", "orders", "units"):
            object.__setattr__(self, name, int(getattr(self, name) or 0))
        for name in MONEY_FIELDS:
            object.__setattr__(self, name, _money(getattr(self, name)))

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> "ControlTuple":
        return cls(**{name: values.get(name) for name in CONTROL_FIELDS})

    @classmethod
    def from_row(cls, row: Iterable[Any]) -> "ControlTuple":
        return cls(*row)

    def as_tuple(self) -> tuple:
        return tuple(getattr(self, f.name) for f in fields(self))

    def to_json(self) -> dict[str, Any]:
        """JSON-safe form: counts as ints, money as exact strings with two places."""
        out: dict[str, Any] = {}
        for name in CONTROL_FIELDS:
            value = getattr(self, name)
            out[name] = format(value, "f") if name in MONEY_FIELDS else value
        return out

    def __add__(self, other: "ControlTuple") -> "ControlTuple":
        # Orders are distinct per partition; partitions never share an order
        # line, so totals over partitions add up (an order spanning two days
        # would count twice, which is what the finance mart reports per day).
        return ControlTuple(*(a + b for a, b in zip(self.as_tuple(), other.as_tuple())))

    def __str__(self) -> str:
        parts = [str(v) if isinstance(v, int) else format_money(v) for v in self.as_tuple()]
        return "(" + ", ".join(parts) + ")"

    def differences(self, expected: "ControlTuple") -> dict[str, dict[str, str]]:
        """Fields where ``self`` (observed) differs from ``expected``, for check metadata."""
        diff = {}
        for name in CONTROL_FIELDS:
            observed, wanted = getattr(self, name), getattr(expected, name)
            if observed != wanted:
                diff[name] = {"observed": str(observed), "expected": str(wanted)}
        return diff


def total(tuples: Iterable[ControlTuple]) -> ControlTuple:
    result = ControlTuple()
    for item in tuples:
        result = result + item
    return result


# The six control aggregates over a fact-shaped relation (one row per paid
# order line), in CONTROL_FIELDS order.
FACT_CONTROL_COLUMNS = """
       count(*)::BIGINT                                  as paid_lines,
       count(distinct order_id)::BIGINT                  as orders,
       coalesce(sum(quantity), 0)::BIGINT                as units,
       coalesce(sum(revenue_usd), 0)::DECIMAL(18,2)      as revenue_usd,
       coalesce(sum(cost_usd), 0)::DECIMAL(18,2)         as cost_usd,
       coalesce(sum(gross_profit_usd), 0)::DECIMAL(18,2) as gross_profit_usd"""

# The tuple per sales_date from a fact-shaped relation. ``{source}`` is a relation name.
FACT_CONTROLS_SQL = "select sales_date," + FACT_CONTROL_COLUMNS + "\nfrom {source}\ngroup by sales_date\n"

# The same tuple read from an aggregate-shaped relation (one row per day that
# already carries the six control columns, e.g. agg_daily_sales or a mart).
AGG_CONTROLS_SQL = """
select sales_date,
       sum(paid_lines)::BIGINT       as paid_lines,
       sum(orders)::BIGINT           as orders,
       sum(units)::BIGINT            as units,
       sum(revenue_usd)::DECIMAL(18,2)      as revenue_usd,
       sum(cost_usd)::DECIMAL(18,2)         as cost_usd,
       sum(gross_profit_usd)::DECIMAL(18,2) as gross_profit_usd
from {source}
group by sales_date
"""


def controls_by_date(con, sql: str, source: str) -> dict[str, ControlTuple]:
    """Run one of the control SQL templates and key the result by ISO date."""
    rows = con.sql(sql.format(source=source)).fetchall()
    return {row[0].isoformat(): ControlTuple.from_row(row[1:]) for row in rows}
