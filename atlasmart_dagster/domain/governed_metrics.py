"""Governed metric definitions: the contract between the data product and its consumers.

A metric is defined once, here, in code that is reviewed and versioned: its
measure, source, filters, grain and dimensions. The semantic layer compiles it
to SQL; marts and dashboards must read the compiled metric rather than restate
it, which is what keeps "revenue" meaning one thing. Changing any part of a
definition means a new version.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .contracts import CHANNELS


@dataclass(frozen=True)
class MetricDefinition:
    name: str
    version: str
    description: str
    owner: str
    source: str  # table the measure is taken from
    measure: str  # SQL aggregate over the source
    filters: tuple[str, ...]  # SQL predicates, all must hold
    grain: str  # time grain column
    dimensions: tuple[str, ...]
    unit: str

    def compile_sql(self, source_relation: str | None = None) -> str:
        """SQL giving (grain, dimensions..., value) over ``source_relation``."""
        source = source_relation or self.source
        group = ", ".join((self.grain,) + self.dimensions)
        where = " AND ".join(f"({f})" for f in self.filters) or "true"
        return (
            f"SELECT {group}, CAST({self.measure} AS DECIMAL(18,2)) AS value_usd "
            f"FROM {source} WHERE {where} GROUP BY {group}"
        )

    def to_metadata(self) -> dict[str, Any]:
        data = asdict(self)
        data["filters"] = list(self.filters)
        data["dimensions"] = list(self.dimensions)
        return data


GROSS_REVENUE = MetricDefinition(
    name="gross_revenue_usd",
    version="1.0.0",
    description=(
        "Gross revenue in USD: the sum of line amounts of current, accepted, paid order lines, "
        "all sales channels included, by sales_date (UTC business day)."
    ),
    owner="analytics-governance",
    source="fact_sales",
    measure="sum(revenue_usd)",
    # fact_sales already holds only current accepted paid lines; the channel
    # filter states explicitly that every contract channel counts.
    filters=("channel IN (" + ", ".join(f"'{c}'" for c in CHANNELS) + ")",),
    grain="sales_date",
    dimensions=("channel",),
    unit="USD",
)
