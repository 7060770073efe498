"""metric_gross_revenue: the governed metric, compiled from its definition.

One row per (sales_date, channel) for every contract channel, zero when the
channel sold nothing, so the metric of a loaded day is never "missing".
"""

from __future__ import annotations

from typing import Sequence

from ..domain.contracts import CHANNELS
from ..domain.governed_metrics import GROSS_REVENUE, MetricDefinition
from .aggregates import days_relation


def metric_sql(
    partitions: Sequence[str],
    fact: str = "fact_sales",
    definition: MetricDefinition = GROSS_REVENUE,
) -> str:
    channels = ", ".join(f"('{c}')" for c in CHANNELS)
    return f"""
        SELECT d.sales_date, ch.channel,
               '{definition.name}' AS metric_name,
               '{definition.version}' AS metric_version,
               coalesce(m.value_usd, 0)::DECIMAL(18,2) AS value_usd
        FROM {days_relation(partitions)} d
        CROSS JOIN (VALUES {channels}) AS ch(channel)
        LEFT JOIN ({definition.compile_sql(fact)}) m USING (sales_date, channel)
        """
