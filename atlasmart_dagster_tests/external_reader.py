"""A consumer's reader, run in its own virtual environment: pyiceberg finds the ``certified`` ref, DuckDB sums it.

It imports nothing of ``atlasmart_dagster`` (the test that runs it checks
that its environment cannot): it is what a team's notebook would do with the
catalog's address and the table names, following ``docs/consumers.md``.

Usage: python external_reader.py CATALOG_URI WAREHOUSE TABLE=MONEY_COLUMN... [--tags]
       [--s3-endpoint URL --s3-access-key-id KEY --s3-secret-access-key SECRET --s3-region REGION]
Prints JSON: per table, the ref's snapshot id, its summary and, per day, the
row count and the sum of the money column; with ``--tags``, the same figures
of every ``certified-<day>-v<version>`` tag, for its day. The ``--s3-*``
options are pyiceberg's FileIO properties, for a warehouse on an S3 server.
"""

from __future__ import annotations

import argparse
import json
import sys

import duckdb
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table.refs import SnapshotRefType

S3_OPTIONS = ("endpoint", "access-key-id", "secret-access-key", "region")


def _days(table, snapshot_id: int, column: str, day: str | None = None) -> dict[str, dict[str, object]]:
    # A tag is read for its own day only: the filter prunes the other days' files.
    rows = table.scan(snapshot_id=snapshot_id, row_filter=f"sales_date = '{day}'" if day else "True").to_arrow()
    con = duckdb.connect()
    con.register("ref", rows)
    found = con.execute(f"SELECT sales_date, count(*), sum({column}) FROM ref GROUP BY 1 ORDER BY 1").fetchall()
    con.close()
    return {str(d): {"rows": n, "sum": f"{total:.2f}"} for d, n, total in found}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("uri")
    parser.add_argument("warehouse")
    parser.add_argument("wanted", nargs="+", metavar="TABLE=MONEY_COLUMN")
    parser.add_argument("--tags", action="store_true", help="also read every certified-<day>-v<version> tag")
    for option in S3_OPTIONS:
        parser.add_argument(f"--s3-{option}", dest=f"s3_{option.replace('-', '_')}")
    args = parser.parse_args(argv)
    io = {f"s3.{o}": getattr(args, f"s3_{o.replace('-', '_')}") for o in S3_OPTIONS}
    catalog = SqlCatalog("atlasmart", uri=args.uri, warehouse=args.warehouse,
                         **{k: v for k, v in io.items() if v is not None})
    out: dict[str, object] = {}
    for item in args.wanted:
        name, column = item.split("=")
        table = catalog.load_table(f"atlasmart.{name}")
        refs = table.refs()
        ref = refs.get("certified")
        if ref is None:
            out[name] = {"snapshot_id": None, "days": {}, "tags": {}}
            continue
        summary = table.snapshot_by_id(ref.snapshot_id).summary
        out[name] = {
            "snapshot_id": ref.snapshot_id,
            "summary": {k: v for k, v in summary.additional_properties.items() if k.startswith("atlasmart.")},
            "index": json.loads(table.properties.get("atlasmart.certified.index", "{}")),
            "days": _days(table, ref.snapshot_id, column),
            "tags": {},
        }
        if args.tags:
            for tag, tagged in sorted(refs.items()):
                if tagged.snapshot_ref_type == SnapshotRefType.TAG and tag.startswith("certified-"):
                    day = tag.removeprefix("certified-").rsplit("-v", 1)[0]
                    out[name]["tags"][tag] = {"snapshot_id": tagged.snapshot_id,
                                              **_days(table, tagged.snapshot_id, column, day).get(day, {})}
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
