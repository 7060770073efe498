"""``has_table`` answered once per table and process: Dagster asks it for every check evaluation it stores."""

from __future__ import annotations


class RememberedTables:
    """Mixin for a Dagster storage: a table that exists is remembered (Dagster's migrations add tables, never drop one).

    Dagster's SQLite event log builds a new engine for each ask, its Postgres one
    opens a new connection; a range stores hundreds of evaluations.
    """

    def has_table(self, table_name: str) -> bool:
        # set on first use: a storage may ask before its own __init__ has set anything of ours
        seen = self.__dict__.setdefault("_tables_seen", set())
        if table_name in seen:
            return True
        found = super().has_table(table_name)
        if found:
            seen.add(table_name)
        return found
