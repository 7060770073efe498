"""The consumer layer as relations: certified versions only, pinned per partition.

Dashboards, golden checks and the query gateway all read through here, so no
consumer ever sees an uncertified or withdrawn version.
"""

from __future__ import annotations

import duckdb

from .certification_gate import CERTIFIED_ASSETS
from ..store.platform import Platform
from .serving import read_certified


def register_certified(con: duckdb.DuckDBPyConnection, platform: Platform) -> None:
    """Register each certified asset's served version on ``con`` as a relation of the same name."""
    for name in CERTIFIED_ASSETS:
        con.register(name, read_certified(platform, name))
