"""Dashboards as code: tiles compiled from the governed metric, deployed versions, golden figures.

A dashboard tile is a per-day figure (``sales_date, value``) computed from the
certified consumer layer. Tiles that present a governed metric should be
*compiled from it* (``governed_tile``); a hand-written tile can silently
disagree (drop a channel, double-count), which is what the golden cross-check
catches: every tile that *presents* a governed metric must equal the governed
metric, per day and in total. A tile presents the governed metric when it is
flagged with it, or when its key or title says it shows revenue (all
channels) without the flag: a hand-written "revenue" tile is checked like a
governed one, and the dashboard is not "compiled from the governed metric".

Deployments are ledger records (who deployed which definition, why), so what a
dashboard showed on a day can be reconstructed and a bad deployment rolled
back to the governed one.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Iterator

import duckdb

from ..domain.contracts import CHANNELS
from ..domain.governed_metrics import GROSS_REVENUE, MetricDefinition
from ..store.clock import format_ts
from ..store.ledger import Ledger
from ..store.ledger.engine import LedgerTable
from ..store.platform import Platform
from ..store.warehouse import duckdb_connection
from .serving import register_certified


@dataclass(frozen=True)
class Tile:
    key: str
    title: str
    sql: str  # SELECT sales_date, value over certified consumer relations
    governed_metric: str | None = None  # the governed metric this tile claims to show

    @property
    def presents_governed_metric(self) -> str | None:
        """The governed metric this tile presents to its readers: its flag, else gross revenue if it says revenue.

        A per-channel revenue tile ("Web revenue") is a part of the metric, not
        the metric, so only a tile naming no channel is taken as presenting it.
        """
        if self.governed_metric:
            return self.governed_metric
        words = f"{self.key} {self.title}".lower().replace("_", " ")
        if "revenue" in words and not any(channel in words for channel in CHANNELS):
            return GROSS_REVENUE.name
        return None


@dataclass(frozen=True)
class Dashboard:
    asset: str
    title: str
    version: str
    tiles: tuple[Tile, ...]

    @property
    def governed_tiles(self) -> tuple[Tile, ...]:
        """Tiles that present a governed metric (flagged, or saying revenue): the golden check compares each."""
        return tuple(t for t in self.tiles if t.presents_governed_metric)

    @property
    def hand_written_governed_tiles(self) -> tuple[Tile, ...]:
        """Tiles that present a governed metric without being compiled from it."""
        return tuple(t for t in self.governed_tiles
                     if not t.governed_metric or t.sql != governed_tile(GROSS_REVENUE, t.key, t.title).sql)

    @property
    def compiled_from_governed(self) -> bool:
        """Is every tile that presents a governed metric compiled from it (and flagged as such)?"""
        return not self.hand_written_governed_tiles

    def to_json(self) -> dict[str, Any]:
        return {"asset": self.asset, "title": self.title, "version": self.version, "tiles": [asdict(t) for t in self.tiles]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Dashboard":
        return cls(data["asset"], data["title"], data["version"], tuple(Tile(**t) for t in data["tiles"]))


def governed_tile(metric: MetricDefinition, key: str, title: str) -> Tile:
    """A tile compiled from the governed metric: the only way revenue should reach a dashboard."""
    return Tile(
        key=key,
        title=title,
        sql=(
            f"SELECT sales_date, sum(value_usd) AS value FROM metric_gross_revenue "
            f"WHERE metric_name = '{metric.name}' AND metric_version = '{metric.version}' GROUP BY sales_date"
        ),
        governed_metric=metric.name,
    )


EXECUTIVE_DASHBOARD = Dashboard(
    asset="dashboard_executive_revenue",
    title="Executive revenue",
    version="1.0.0",
    tiles=(
        governed_tile(GROSS_REVENUE, "gross_revenue_usd", "Gross revenue (USD)"),
        Tile("gross_profit_usd", "Gross profit (USD)",
             "SELECT sales_date, gross_profit_usd AS value FROM mart_executive_revenue"),
        Tile("orders", "Orders", "SELECT sales_date, orders AS value FROM mart_executive_revenue"),
    ),
)

FINANCE_DASHBOARD = Dashboard(
    asset="dashboard_finance_daily_sales",
    title="Finance daily sales",
    version="1.0.0",
    tiles=(
        governed_tile(GROSS_REVENUE, "gross_revenue_usd", "Revenue (USD)"),
        Tile("cost_usd", "Cost (USD)", "SELECT sales_date, cost_usd AS value FROM mart_finance_daily_sales"),
        Tile("gross_profit_usd", "Gross profit (USD)",
             "SELECT sales_date, gross_profit_usd AS value FROM mart_finance_daily_sales"),
    ),
)

DEFAULT_DASHBOARDS = {d.asset: d for d in (EXECUTIVE_DASHBOARD, FINANCE_DASHBOARD)}

DASHBOARD_DEPLOYMENTS = LedgerTable(
    "dashboard_deployments",
    """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        dashboard TEXT NOT NULL,
        version TEXT NOT NULL,
        definition_json TEXT NOT NULL,
        deployed_by TEXT NOT NULL,
        reason TEXT NOT NULL,
        at TEXT NOT NULL
    """,
)


def deploy(ledger: Ledger, dashboard: Dashboard, deployed_by: str, reason: str, at: datetime) -> int:
    return ledger.engine.append(
        DASHBOARD_DEPLOYMENTS,
        {
            "dashboard": dashboard.asset,
            "version": dashboard.version,
            "definition_json": json.dumps(dashboard.to_json(), sort_keys=True),
            "deployed_by": deployed_by,
            "reason": reason,
            "at": format_ts(at),
        },
    )


def current(ledger: Ledger, asset: str) -> Dashboard:
    """The deployed definition of a dashboard (the code default until something is deployed)."""
    rows = ledger.engine.select(DASHBOARD_DEPLOYMENTS, "dashboard = ?", (asset,))
    return Dashboard.from_json(json.loads(rows[-1]["definition_json"])) if rows else DEFAULT_DASHBOARDS[asset]


@contextmanager
def certified_connection(platform: Platform) -> Iterator[duckdb.DuckDBPyConnection]:
    """A DuckDB connection with the certified consumer relations registered (once), closed on exit."""
    con = duckdb_connection()
    try:
        register_certified(con, platform)
        yield con
    finally:
        con.close()


def tile_values(
    platform: Platform, dashboard: Dashboard, con: duckdb.DuckDBPyConnection | None = None
) -> dict[str, dict[str, Decimal]]:
    """``{tile key: {sales_date: value}}`` computed from the certified consumer layer.

    Pass ``con`` from ``certified_connection`` to evaluate several dashboards
    without registering the certified relations again for each.
    """
    if con is None:
        with certified_connection(platform) as con:
            return tile_values(platform, dashboard, con)
    out = {}
    for tile in dashboard.tiles:
        rows = con.sql(f"SELECT sales_date::VARCHAR, value FROM ({tile.sql}) ORDER BY 1").fetchall()
        out[tile.key] = {day: Decimal(value).quantize(Decimal("0.01")) for day, value in rows}
    return out


def governed_values(
    platform: Platform, metric: MetricDefinition = GROSS_REVENUE, con: duckdb.DuckDBPyConnection | None = None
) -> dict[str, Decimal]:
    governed = Dashboard("governed", "governed", metric.version, (governed_tile(metric, "g", "g"),))
    return tile_values(platform, governed, con)["g"]


def fingerprint(values: dict[str, Decimal]) -> str:
    text = json.dumps({k: format(v, "f") for k, v in sorted(values.items())}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()
