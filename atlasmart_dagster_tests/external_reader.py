"""A consumer's reader, run in its own virtual environment: pyiceberg finds the ``certified`` ref, DuckDB sums it.

It imports nothing of ``atlasmart_dagster`` (the test that runs it checks
that its environment cannot): it is what a team's notebook would do with the
catalog's address and the table names, following ``docs/consumers.md``.

Usage: python external_reader.py CATALOG_URI WAREHOUSE TABLE=MONEY_COLUMN...
Prints JSON: per table, the ref's snapshot id, its summary and, per day, the
row count and the sum of the money column.
"""

from __future__ import annotations

import json
import sys

import duckdb
from pyiceberg.catalog.sql import SqlCatalog


def main(argv: list[str]) -> int:
    uri, warehouse, *wanted = argv
    catalog = SqlCatalog("atlasmart", uri=uri, warehouse=warehouse)
    out: dict[str, object] = {}
    for item in wanted:
        name, column = item.split("=")
        table = catalog.load_table(f"atlasmart.{name}")
        ref = table.refs().get("certified")
        if ref is None:
            out[name] = {"snapshot_id": None, "days": {}}
            continue
        rows = table.scan(snapshot_id=ref.snapshot_id).to_arrow()
        con = duckdb.connect()
        con.register("certified", rows)
        days = {
            str(day): {"rows": n, "sum": f"{total:.2f}"}
            for day, n, total in con.execute(
                f"SELECT sales_date, count(*), sum({column}) FROM certified GROUP BY 1 ORDER BY 1"
            ).fetchall()
        }
        con.close()
        summary = table.snapshot_by_id(ref.snapshot_id).summary
        out[name] = {
            "snapshot_id": ref.snapshot_id,
            "summary": {k: v for k, v in summary.additional_properties.items() if k.startswith("atlasmart.")},
            "index": json.loads(table.properties.get("atlasmart.certified.index", "{}")),
            "days": days,
        }
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
