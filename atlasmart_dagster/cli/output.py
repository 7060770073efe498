"""Printing for the command line: aligned tables for people, JSON for scripts."""

from __future__ import annotations

import json
import sys
from typing import Any, Sequence


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def short(value: Any, length: int = 12) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= length else text[:length] + "…"
