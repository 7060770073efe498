"""JSON log lines for every step and every partition, through Dagster's logging config.

The project's ``dagster.yaml`` attaches ``JsonLinesHandler`` to Dagster's
loggers (``python_logs.dagster_handler_config``), so every run on the
instance, from the UI, the daemon, the CLI or ``atlasmart``, writes one JSON
object per log record to ``$ATLASMART_HOME/logs/runs.jsonl``: run id, job,
step, partition, lane and level from Dagster's record, merged with the
structured payload AtlasMart's steps log per partition (asset, batch ids,
row counts, outcome). Text passes the PII redactor on its way out.
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ...product.lanes import lane_of
from ...product.pii import redact
from ...store.home import AtlasmartHome


def _partition(tags: dict[str, str]) -> str | None:
    if "dagster/partition" in tags:
        return tags["dagster/partition"]
    start, end = tags.get("dagster/asset_partition_range_start"), tags.get("dagster/asset_partition_range_end")
    return f"{start}...{end}" if start else None


class JsonLogFormatter(logging.Formatter):
    """One compact JSON object per record, Dagster context first, AtlasMart payload merged in."""

    def format(self, record: logging.LogRecord) -> str:
        meta: dict[str, Any] = getattr(record, "dagster_meta", None) or {}
        tags = meta.get("job_tags") or {}
        event = meta.get("dagster_event")
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat().replace("+00:00", "Z"),
            "level": record.levelname,
            "run_id": meta.get("run_id"),
            "job": meta.get("job_name"),
            "step": meta.get("step_key"),
            "partition": _partition(tags),
            "lane": lane_of(tags),
            "event_type": getattr(event, "event_type_value", None) if event else None,
        }
        message = meta.get("orig_message", record.getMessage())
        payload = None
        if isinstance(message, str) and message.startswith("{"):
            try:
                payload = json.loads(message)
            except ValueError:
                payload = None
        if isinstance(payload, dict):
            line.update(payload)  # per-partition fields win over the run-level partition range
        else:
            line["message"] = redact(str(message))
        return json.dumps({k: v for k, v in line.items() if v is not None}, default=str)


class JsonLinesHandler(logging.Handler):
    """Appends formatted records to ``<ATLASMART_HOME>/logs/runs.jsonl`` (home resolved when first used)."""

    _lock = threading.Lock()

    def __init__(self, level: int = logging.INFO, home: str | None = None):
        super().__init__(level)
        self._home = home
        # an explicit home is fixed: resolve it once; without one, resolve per record ($ATLASMART_HOME may change)
        self._path = self._resolve(home) if home else None
        self.setFormatter(JsonLogFormatter())

    @staticmethod
    def _resolve(home: str | None) -> Path:
        return AtlasmartHome.resolve(home).root / "logs" / "runs.jsonl"

    @property
    def path(self) -> Path:
        return self._path or self._resolve(self._home)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
            path = self.path
            with self._lock:
                try:
                    handle = open(path, "a", encoding="utf-8")
                except FileNotFoundError:  # first record (or the folder was removed): create it
                    path.parent.mkdir(parents=True, exist_ok=True)
                    handle = open(path, "a", encoding="utf-8")
                with handle:
                    handle.write(line + "\n")
        except Exception:  # noqa: BLE001 - logging must never break a run
            self.handleError(record)


def read_log(home: AtlasmartHome) -> list[dict[str, Any]]:
    path = home.root / "logs" / "runs.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
