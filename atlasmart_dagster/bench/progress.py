"""Progress lines for long operations: rows, partitions, elapsed, rate. Quiet unless on a terminal."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, label: str, total_partitions: int, enabled: bool | None = None, stream=None):
        self.label = label
        self.total = total_partitions
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.started = time.monotonic()
        self._last = 0.0

    def update(self, partitions: int, rows: int, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._last < 0.5 and partitions < self.total:
            return
        self._last = now
        elapsed = now - self.started
        rate = rows / elapsed if elapsed > 0 else 0.0
        self.stream.write(
            f"\r{self.label}: {partitions}/{self.total} partitions, {rows:,} rows, {elapsed:6.1f} s, {rate:,.0f} rows/s   "
        )
        self.stream.flush()

    def done(self, rows: int) -> None:
        if self.enabled:
            self.update(self.total, rows, force=True)
            self.stream.write("\n")
            self.stream.flush()
