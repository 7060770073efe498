"""The ERP landing zone: one folder per sales_date with a data file and a manifest.

The ERP writes the data file first and ``_manifest.json`` last, so **no
manifest means the batch is not ready**, whatever the clock says. This module
reads manifests and data files (JSON Lines, CSV, Parquet) and nothing else;
deciding readiness lives in ``product/readiness.py``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from ..domain.contracts import SourceContract, typed_projection_sql
from .clock import parse_ts
from .raw_store import MANIFEST_NAME, is_safe_batch_id

SOURCE_SYSTEM = "atlasmart_erp"
FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv", ".parquet": "parquet"}


def partition_folder_name(partition: str) -> str:
    return f"sales_date={partition}"


@dataclass(frozen=True)
class Manifest:
    """A parsed, type-checked ``_manifest.json``."""

    source_system: str
    partition: str
    batch_id: str
    schema_version: str
    expected_rows: int
    source_seq_low: int
    source_seq_high: int
    ready_at: datetime
    data_file: str
    data_sha256: str

    def to_json(self) -> dict[str, Any]:
        return {
            "source_system": self.source_system,
            "partition": self.partition,
            "batch_id": self.batch_id,
            "schema_version": self.schema_version,
            "expected_rows": self.expected_rows,
            "source_seq_low": self.source_seq_low,
            "source_seq_high": self.source_seq_high,
            "ready_at": self.ready_at.isoformat().replace("+00:00", "Z"),
            "data_file": self.data_file,
            "data_sha256": self.data_sha256,
        }


_INT_FIELDS = ("expected_rows", "source_seq_low", "source_seq_high")
_STR_FIELDS = ("source_system", "partition", "batch_id", "schema_version", "ready_at", "data_file", "data_sha256")


def parse_manifest(raw: bytes, partition: str) -> tuple[Manifest | None, list[str]]:
    """Parse manifest bytes; return the manifest or the list of what is wrong."""
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, [f"manifest is not valid JSON ({exc.msg if hasattr(exc, 'msg') else exc})"]
    if not isinstance(data, dict):
        return None, ["manifest is not a JSON object"]
    problems = []
    for name in _STR_FIELDS:
        if not isinstance(data.get(name), str) or not data.get(name):
            problems.append(f"manifest field {name} missing or not a non-empty string")
    for name in _INT_FIELDS:
        value = data.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            problems.append(f"manifest field {name} missing or not a non-negative integer")
    if problems:
        return None, problems
    if data["source_system"] != SOURCE_SYSTEM:
        problems.append(f"manifest source_system is {data['source_system']!r}, expected {SOURCE_SYSTEM!r}")
    if data["partition"] != partition:
        problems.append(f"manifest is for partition {data['partition']}, not {partition}")
    if not is_safe_batch_id(data["batch_id"]):
        problems.append(f"manifest batch_id {data['batch_id']!r} is not a safe identifier")
    if "/" in data["data_file"] or "\\" in data["data_file"] or data["data_file"].startswith("."):
        problems.append(f"manifest data_file {data['data_file']!r} must be a plain file name")
    elif Path(data["data_file"]).suffix.lower() not in FORMATS:
        problems.append(f"manifest data_file {data['data_file']!r} has an unsupported format (jsonl, csv, parquet)")
    if data["source_seq_low"] > data["source_seq_high"]:
        problems.append("manifest source_seq_low is greater than source_seq_high")
    try:
        ready_at = parse_ts(data["ready_at"])
    except ValueError:
        problems.append(f"manifest ready_at {data['ready_at']!r} is not an ISO timestamp")
        ready_at = None
    if problems:
        return None, problems
    return (
        Manifest(
            source_system=data["source_system"],
            partition=data["partition"],
            batch_id=data["batch_id"],
            schema_version=data["schema_version"],
            expected_rows=data["expected_rows"],
            source_seq_low=data["source_seq_low"],
            source_seq_high=data["source_seq_high"],
            ready_at=ready_at,
            data_file=data["data_file"],
            data_sha256=data["data_sha256"].lower(),
        ),
        [],
    )


class LandingZone:
    """Read-only view of a landing folder (``sales_date=YYYY-MM-DD`` subfolders)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def folder(self, partition: str) -> Path:
        return self.root / partition_folder_name(partition)

    def manifest_path(self, partition: str) -> Path:
        return self.folder(partition) / MANIFEST_NAME

    def partitions(self) -> list[str]:
        """Days with a landing folder, sorted (manifest or not)."""
        if not self.root.is_dir():
            return []
        days = []
        for child in self.root.iterdir():
            if child.is_dir() and child.name.startswith("sales_date="):
                day = child.name.removeprefix("sales_date=")
                try:
                    date.fromisoformat(day)
                except ValueError:
                    continue
                days.append(day)
        return sorted(days)

    def read_manifest_bytes(self, partition: str) -> bytes | None:
        path = self.manifest_path(partition)
        return path.read_bytes() if path.is_file() else None


# --------------------------------------------------------------------------
# Data files


def file_format(name: str) -> str:
    return FORMATS[Path(name).suffix.lower()]


def reader_sql(path: Path, fmt: str, fields: tuple[str, ...]) -> str:
    """DuckDB SQL reading ``fields`` of one data file as text (JSON Lines, CSV) or as typed (Parquet)."""
    quoted = str(path).replace("'", "''")
    if fmt == "jsonl":
        columns = ", ".join(f"'{f}': 'VARCHAR'" for f in fields)
        return f"read_json('{quoted}', format='newline_delimited', columns={{{columns}}})"
    if fmt == "csv":
        # Columns by header name, every value as text (types are the contract's job).
        return f"read_csv('{quoted}', header=true, all_varchar=true)"
    return f"read_parquet('{quoted}', file_row_number = true)"


def field_types(con: duckdb.DuckDBPyConnection, path: Path, fmt: str) -> dict[str, str]:
    """DuckDB types of the file's columns (text formats are all VARCHAR)."""
    if fmt != "parquet":
        return {}
    quoted = str(path).replace("'", "''")
    return {row[0]: row[1] for row in con.sql(f"DESCRIBE SELECT * FROM read_parquet('{quoted}')").fetchall()}


def present_fields(con: duckdb.DuckDBPyConnection, path: Path, fmt: str) -> tuple[str, ...]:
    """The set of field names the file actually carries (for drift detection)."""
    quoted = str(path).replace("'", "''")
    if fmt == "jsonl":
        rows = con.sql(
            f"SELECT DISTINCT unnest(json_keys(json)) FROM read_json_objects('{quoted}', format='newline_delimited')"
        ).fetchall()
        return tuple(sorted(r[0] for r in rows))
    if fmt == "csv":
        header = con.sql(f"SELECT * FROM read_csv('{quoted}', header=true, all_varchar=true) LIMIT 0").columns
        return tuple(sorted(header))
    return tuple(sorted(con.sql(f"SELECT * FROM read_parquet('{quoted}') LIMIT 0").columns))


def batch_sql(
    path: Path,
    fmt: str,
    fields: tuple[str, ...],
    contract: SourceContract,
    partition: str,
    batch_id: str,
    types: dict[str, str] | None = None,
) -> str:
    """SQL parsing a data file into raw rows: lineage columns plus typed canonical fields.

    Rows keep file order in ``source_row`` (1-based). Values that fail to cast
    become NULL and are named in ``type_error_fields``; the file itself stays
    in the raw store as the evidence of what was sent.
    """
    reader = reader_sql(path, fmt, fields)
    # Parquet knows each row's position (parallel); text files are numbered in read order.
    position = "file_row_number + 1" if fmt == "parquet" else "row_number() OVER ()"
    numbered = f"(SELECT {position} AS __source_row, * FROM {reader})"
    projection = typed_projection_sql(
        contract, numbered, fields, output_names={"sales_date": "row_sales_date"}, source_types=types
    )
    # typed_projection_sql selects only canonical + error columns; add lineage.
    return projection.replace(
        "SELECT ",
        f"SELECT DATE '{partition}' AS partition_date, '{batch_id}' AS batch_id, "
        "CAST(__source_row AS INTEGER) AS source_row, ",
        1,
    )


def read_batch(con: duckdb.DuckDBPyConnection, *args, **kwargs) -> pa.Table:
    """The rows of one batch as Arrow, in file order (arguments as for ``batch_sql``)."""
    return con.sql(batch_sql(*args, **kwargs) + " ORDER BY source_row").to_arrow_table()
