"""The ERP landing zone: one folder per sales_date with a data file and a manifest.

The ERP writes the data file first and ``_manifest.json`` last, so **no
manifest means the batch is not ready**, whatever the clock says. This module
reads manifests and data files (JSON Lines, CSV, Parquet) and nothing else;
deciding readiness lives in ``product/readiness.py``.
"""

from __future__ import annotations

import csv
import json
import os
import stat
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from ..domain.contracts import SourceContract, typed_projection_sql
from .clock import parse_ts
from .raw_store import MANIFEST_NAME, NotARegularFile, is_safe_batch_id, read_regular_file

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
    # Optional source-side totals of the batch ({"line_amount_usd": "820.00", ...}), reconciled on admission.
    control_totals: dict[str, Decimal] | None = None

    def to_json(self) -> dict[str, Any]:
        totals = {"control_totals": {k: str(v) for k, v in self.control_totals.items()}} if self.control_totals else {}
        return totals | {
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
# Fields a manifest may total, and how the load reads each (the batch's own typed rows).
CONTROL_TOTAL_FIELDS = ("quantity", "line_amount_usd", "line_cost_usd")


def _control_totals(value: Any) -> tuple[dict[str, Decimal] | None, list[str]]:
    if value is None:
        return None, []
    if not isinstance(value, dict) or not value:
        return None, ["manifest control_totals must be an object of field totals"]
    totals, problems = {}, []
    for name, total in value.items():
        if name not in CONTROL_TOTAL_FIELDS:
            problems.append(f"manifest control_totals names {name!r}; totals are kept for {', '.join(CONTROL_TOTAL_FIELDS)}")
            continue
        try:
            if isinstance(total, bool) or not isinstance(total, (int, str)):
                raise InvalidOperation
            totals[name] = Decimal(str(total))
            if not totals[name].is_finite():
                raise InvalidOperation
        except InvalidOperation:
            problems.append(f"manifest control_totals {name} is {total!r}, not a decimal number")
    return (totals if not problems else None), problems
_STR_FIELDS = ("source_system", "partition", "batch_id", "schema_version", "ready_at", "data_file", "data_sha256")


def _json_with_repeats(raw: bytes) -> tuple[Any, list[str]]:
    """The JSON value of ``raw`` and the keys an object in it repeats (JSON leaves which one counts open)."""
    repeated: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key, value in items:
            if key in seen and key not in repeated:
                repeated.append(key)
            seen[key] = value
        return seen

    return json.loads(raw, object_pairs_hook=pairs), repeated


def parse_manifest(raw: bytes, partition: str) -> tuple[Manifest | None, list[str]]:
    """Parse manifest bytes; return the manifest or the list of what is wrong."""
    try:
        data, repeated = _json_with_repeats(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, [f"manifest is not valid JSON ({exc.msg if hasattr(exc, 'msg') else exc})"]
    if not isinstance(data, dict):
        return None, ["manifest is not a JSON object"]
    if repeated:
        # As for a data file's lines: a key given twice leaves which value counts ambiguous.
        return None, [f"manifest repeats the key {', '.join(repeated)} (which value would count is ambiguous)"]
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
    control_totals, total_problems = _control_totals(data.get("control_totals"))
    problems.extend(total_problems)
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
            control_totals=control_totals,
        ),
        [],
    )


def named_batch_id(raw: bytes) -> str | None:
    """The batch id manifest bytes name, even when the rest of the manifest is unusable (else None).

    Readiness asks it first: a batch id the raw store already holds is a
    replay, whatever else the landing copy of its manifest now says.
    """
    try:
        data, repeated = _json_with_repeats(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if "batch_id" in repeated:
        return None  # which batch it names is ambiguous
    batch_id = data.get("batch_id") if isinstance(data, dict) else None
    return batch_id if isinstance(batch_id, str) and is_safe_batch_id(batch_id) else None


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
        """The manifest's bytes; None unless it is a regular file inside the day's folder (see ``file_problem``)."""
        if self.file_problem(partition, MANIFEST_NAME) is not None:
            return None
        try:
            return read_regular_file(self.manifest_path(partition))
        except (OSError, NotARegularFile):
            return None

    def file_problem(self, partition: str, name: str) -> str | None:
        """Why the day's file ``name`` may not be read, or None: it must be a regular file in a day folder of
        this landing zone, never a symbolic link, a named pipe, a device or a folder, nor reached through one."""
        folder = self.folder(partition)
        try:
            mode = os.lstat(folder).st_mode
        except FileNotFoundError:
            return f"no landing folder {folder.name}/"
        except OSError as exc:
            return f"the landing folder {folder.name}/ cannot be read ({exc.strerror})"
        if not stat.S_ISDIR(mode):
            return f"the landing folder {folder.name}/ is {_describe(folder, mode)}, not a folder of the landing zone"
        path = folder / name
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return f"{name} is missing"
        except OSError as exc:
            return f"{name} cannot be read ({exc.strerror})"
        if not stat.S_ISREG(mode):
            return f"{name} is {_describe(path, mode)}, not a regular file inside the landing folder"
        return None


def _describe(path: Path, mode: int) -> str:
    if stat.S_ISLNK(mode):
        try:
            return f"a symbolic link (to {os.readlink(path)})"
        except OSError:
            return "a symbolic link"
    for test, text in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return text
    return "not a regular file"


# --------------------------------------------------------------------------
# Data files


def file_format(name: str) -> str:
    return FORMATS[Path(name).suffix.lower()]


def reader_sql(path: Path, fmt: str, fields: tuple[str, ...]) -> str:
    """DuckDB SQL reading ``fields`` of one data file: as text (JSON Lines, CSV) or typed (Parquet).

    JSON Lines are read as JSON objects, never with a schema: every field is
    its source text (a string's content, a number's digits exactly as sent)
    and ``"<field>::kind"`` is its JSON type, so the contract can tell the
    string ``"3"`` from the number ``3`` or an object. Readiness runs this
    same reader before a batch is admitted (``product/readiness.py``).
    """
    quoted = str(path).replace("'", "''")
    if fmt == "jsonl":
        columns = []
        for f in fields:
            value = f"json->'{_json_key(f)}'"
            columns.append(
                f"CASE json_type({value}) WHEN 'VARCHAR' THEN json->>'{_json_key(f)}' WHEN 'NULL' THEN NULL "
                f'ELSE CAST({value} AS VARCHAR) END AS "{f}", json_type({value}) AS "{f}::kind"'
            )
        select = ", ".join(columns) if columns else "NULL AS __no_fields"
        return (
            f"(SELECT {select} FROM read_json_objects('{quoted}', format='newline_delimited', hive_partitioning=false))"
        )
    if fmt == "csv":
        # The header as written, every value as text (types are the contract's job), and no
        # sniffing: a ragged row is an error, not a reason to guess another dialect.
        columns = ", ".join(f"'{c.replace(chr(39), chr(39) * 2)}': 'VARCHAR'" for c in csv_header(path))
        return (
            f"read_csv('{quoted}', header=true, auto_detect=false, columns={{{columns}}}, delim=',', quote='\"', "
            "escape='\"', strict_mode=true, null_padding=false, hive_partitioning=false)"
        )
    # The raw store keeps batches under sales_date=... folders: never let DuckDB
    # read that folder name as a column (it would replace the file's own sales_date).
    return f"read_parquet('{quoted}', file_row_number = true, hive_partitioning = false)"


def csv_header(path: Path) -> list[str]:
    """The field names of a CSV file's first line (a UTF-8 byte order mark is not part of a name)."""
    with open(path, newline="", encoding="utf-8-sig") as stream:
        return next(csv.reader(stream), [])


def _json_key(field: str) -> str:
    """A field name as a JSON path key inside a SQL string literal."""
    return field.replace("'", "''").replace('"', '\\"')


def field_types(con: duckdb.DuckDBPyConnection, path: Path, fmt: str) -> dict[str, str]:
    """DuckDB types of the file's columns (text formats are all VARCHAR)."""
    if fmt != "parquet":
        return {}
    quoted = str(path).replace("'", "''")
    described = con.sql(f"DESCRIBE SELECT * FROM read_parquet('{quoted}', hive_partitioning = false)").fetchall()
    return {row[0]: row[1] for row in described}


def structure_problems(con: duckdb.DuckDBPyConnection, path: Path, fmt: str, limit: int = 5) -> list[str]:
    """What makes a file ambiguous to read: a JSON line that is not one object with distinct keys, a CSV
    header with a repeated or empty name (which value would count?)."""
    if fmt == "csv":
        header = csv_header(path)
        repeated = sorted({c for c in header if header.count(c) > 1})
        problems = [f"the header repeats the column {', '.join(repeated)}"] if repeated else []
        return problems + (["the header has an empty column name"] if any(not c.strip() for c in header) else [])
    if fmt != "jsonl":
        return []
    quoted = str(path).replace("'", "''")
    rows = con.sql(
        f"""SELECT line, kind, keys FROM (
                SELECT row_number() OVER () AS line, json_type(json) AS kind,
                       CASE WHEN json_type(json) = 'OBJECT' THEN json_keys(json) END AS keys
                FROM read_json_objects('{quoted}', format='newline_delimited', hive_partitioning=false))
            WHERE kind <> 'OBJECT' OR len(keys) <> len(list_distinct(keys))
            ORDER BY line LIMIT {limit + 1}"""
    ).fetchall()
    problems = []
    for line, kind, keys in rows[:limit]:
        if kind != "OBJECT":
            problems.append(f"line {line} is a JSON {kind.lower()}, not an object")
        else:
            repeated = sorted({k for k in keys if keys.count(k) > 1})
            problems.append(f"line {line} repeats the key {', '.join(repeated)} (which value would count is ambiguous)")
    if len(rows) > limit:
        problems.append("and more lines like these")
    return problems


def present_fields(con: duckdb.DuckDBPyConnection, path: Path, fmt: str) -> tuple[str, ...]:
    """The set of field names the file actually carries (for drift detection)."""
    quoted = str(path).replace("'", "''")
    if fmt == "jsonl":
        rows = con.sql(
            "SELECT DISTINCT unnest(json_keys(json)) "
            f"FROM read_json_objects('{quoted}', format='newline_delimited', hive_partitioning=false)"
        ).fetchall()
        return tuple(sorted(r[0] for r in rows))
    if fmt == "csv":
        return tuple(sorted(csv_header(path)))
    return tuple(sorted(con.sql(f"SELECT * FROM read_parquet('{quoted}', hive_partitioning = false) LIMIT 0").columns))


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
        contract, numbered, fields, output_names={"sales_date": "row_sales_date"}, source_types=types,
        json_kinds=fmt == "jsonl",
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
