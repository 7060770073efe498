"""PII discipline: customer names and emails never leave the customer dimension.

Everything we render for people outside the data platform (notices, incident
records of consumer reports, error texts shown to consumers) passes through
``redact``: every known customer name and email, and anything shaped like an
email address, is replaced before the text is stored or shown. Names and
emails match whatever their case and spacing ("CASEY  SYNTHETIC").

The known values come from the source reference extract
(``<landing>/../reference/customers.jsonl``), read directly, and from the
customer dimension when it was loaded: a report filed before the reference job
ever ran is redacted all the same.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable, Iterable

from ..store.platform import Platform
from ..store.tables import DIM_CUSTOMER

PII_COLUMNS = ("full_name", "email")
# An address: a local part of letters (any script), digits and ._%+-, then a domain of labels in any script
# (bücher.example) or punycode (xn--bcher-kva.example). The lookbehind lets a match start only where a local part
# starts, so a long run of address characters is scanned once, not once per position: linear, never quadratic.
_EMAIL = re.compile(r"(?<![\w.%+-])[\w.%+-]+@[\w-]+(?:\.[\w-]+)*\.(?:xn--[A-Za-z0-9-]+|[^\W\d_]{2,})")
REDACTED = "[redacted]"
# The reference extract the customer dimension is loaded from (see defs/assets/dimensions.py).
CUSTOMER_REFERENCE_FILE = "customers.jsonl"


def customer_reference_path(platform: Platform) -> Path:
    """The source customer extract: it sits next to the landing zone (``<landing>/../reference``)."""
    return platform.landing_root.parent / "reference" / CUSTOMER_REFERENCE_FILE


def _reference_values(path: Path) -> set[str]:
    if not path.is_file():
        return set()
    values = set()
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a malformed line holds nothing we can match on; the dimension load reports it
        if isinstance(row, dict):
            values.update(str(row[c]) for c in PII_COLUMNS if row.get(c))
    return values


def _dimension_values(platform: Platform) -> set[str]:
    if platform.warehouse.existing(DIM_CUSTOMER) is None:
        return set()
    table = platform.warehouse.read(DIM_CUSTOMER)
    return {v for column in PII_COLUMNS for v in table.column(column).to_pylist() if v}


def pii_values(platform: Platform) -> tuple[str, ...]:
    """Every known customer name and email: the source reference extract plus the loaded dimension, longest first."""
    values = _reference_values(customer_reference_path(platform)) | _dimension_values(platform)
    return tuple(sorted((v for v in values if v.strip()), key=lambda v: (-len(v), v)))


def _pattern(values: Iterable[str]) -> re.Pattern | None:
    # Longest first, so "Casey Synthetic" is replaced whole before a shorter value inside it.
    alternatives = ["\\s+".join(re.escape(part) for part in v.split()) for v in sorted(values, key=len, reverse=True)
                    if v.split()]
    return re.compile("|".join(alternatives), re.IGNORECASE) if alternatives else None


def redact(text: str, values: Iterable[str] = ()) -> str:
    """``text`` with every value of ``values`` (any case, any spacing) and every email-shaped string replaced."""
    return _redactor(_pattern(values))(text)


def _redactor(pattern: re.Pattern | None) -> Callable[[str], str]:
    def apply(text: str) -> str:
        if pattern is not None:
            text = pattern.sub(REDACTED, text)
        return _EMAIL.sub(REDACTED, text)

    return apply


def redact_for(platform: Platform) -> Callable[[str], str]:
    """A redactor for everything the platform knows to be customer PII (built once, applied per text)."""
    return _redactor(_pattern(pii_values(platform)))
