"""What a consumer notice must never contain: the platform's internal names and raw data structures."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

from atlasmart_dagster.domain import check_names
from atlasmart_dagster.product.slo import OBJECTIVES
from atlasmart_dagster.store.ledger import partition_states

RUN_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# Words of the evidence that mean nothing to a consumer (states with underscores, manifest fields, file kinds).
INTERNAL_WORDS = ("blocked upstream", "expected_rows", "batch_id", "source_seq", "manifest", "_manifest.json",
                  ".jsonl", ".parquet", ".csv", "None", "observed {", "Decimal(")


def internal_names(env) -> set[str]:
    """Asset and check names of the code location, ledger state names, batch ids and file names of the home."""
    names = {spec.key.to_user_string() for spec in env.defs.resolve_all_asset_specs()}
    names |= {value for key, value in vars(check_names).items() if key.isupper() and isinstance(value, str)}
    names |= {f"slo_{objective}" for objective in OBJECTIVES}
    names |= {value for key, value in vars(partition_states).items()
              if key.isupper() and isinstance(value, str) and value.isupper() and value != "CERTIFIED"
              and value != "WITHDRAWN"}
    for batch in env.ledger.batches.list():
        names |= {batch["batch_id"], batch["data_file"]}
    return names


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def problems(env, markdown: str, notice: dict[str, Any]) -> list[str]:
    """Every internal name or data-structure fragment found in a notice (Markdown and JSON text)."""
    found = []
    as_json = json.dumps(notice, sort_keys=True)
    for name in sorted(internal_names(env)) + list(INTERNAL_WORDS):
        for label, text in (("markdown", markdown), ("json", as_json)):
            if name in text:
                found.append(f"{label} names {name!r}")
    for label, text in (("markdown", markdown), ("json", as_json)):
        if RUN_ID.search(text):
            found.append(f"{label} holds a run id")
    if "{" in markdown or "}" in markdown:
        found.append("markdown holds a dict repr")
    for text in _strings(notice):
        if "{" in text or "}" in text or "'" in text:
            found.append(f"json value holds a dict repr: {text!r}")
    return found


def notices_in(folder: Path) -> list[tuple[str, str, dict[str, Any]]]:
    """(name, markdown, json) of every notice written to ``folder``."""
    out = []
    for md in sorted(folder.glob("*.md")):
        out.append((md.stem, md.read_text(), json.loads(md.with_suffix(".json").read_text())))
    return out
