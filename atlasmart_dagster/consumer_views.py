"""The consumer layer as relations: certified versions only, pinned per partition.

Dashboards, golden checks and the query gateway all read through here, so no
consumer ever sees an uncertified or withdrawn version.
"""

from __future__ import annotations

from typing import Iterable

import duckdb
import pyarrow as pa

from .platform import Platform
from .serving import read_certified

CONSUMER_RELATIONS = ("metric_gross_revenue", "mart_finance_daily_sales", "mart_executive_revenue")


def certified_tables(platform: Platform, relations: Iterable[str] = CONSUMER_RELATIONS) -> dict[str, pa.Table]:
    return {name: read_certified(platform, name) for name in relations}


def register_certified(con: duckdb.DuckDBPyConnection, platform: Platform, relations: Iterable[str] = CONSUMER_RELATIONS) -> None:
    for name, table in certified_tables(platform, relations).items():
        con.register(name, table)
