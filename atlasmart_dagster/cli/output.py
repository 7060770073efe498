"""Printing for the command line: aligned tables for people, JSON for scripts.

Text a person typed (a reason, an actor, an incident title, a note) is printed
through ``visible``: a control character in it cannot move the cursor, clear the
screen or start a forged line of output. JSON escapes them itself.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, Sequence

# C0 controls, DEL and C1 controls; the Unicode line and paragraph separators and the bidirectional
# overrides and isolates, which can also make a line read as something else.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match) -> str:
    char = match.group()
    return _NAMED.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


def visible(text: Any, *, lines: bool = False) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``, ``\\n``), for one line of output.

    An escape sequence (ESC[2J) is printed as text, never acted on, and a newline or carriage return cannot
    start a line that looks like the command's own. ``lines``: the text is several lines by design (a notice),
    its newlines stay. What is stored is unchanged; only the printing escapes.
    """
    text = "" if text is None else str(text)
    if not lines:
        return _CONTROL.sub(_escape, text)
    return "\n".join(_CONTROL.sub(_escape, line) for line in text.split("\n"))


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [[visible(c) for c in row] for row in rows]
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
