import sqlite3
from datetime import datetime, timezone

import pytest

from atlasmart_dagster.store.ledger import Ledger
from atlasmart_dagster.store.ledger.partition_states import CERTIFIED, WITHDRAWN

AT = datetime(2026, 9, 22, 8, 16, tzinfo=timezone.utc)


def certify(ledger, fingerprint, snapshot):
    return ledger.partitions.append("mart", "2026-09-20", CERTIFIED, AT, "test", snapshot_id=snapshot, fingerprint=fingerprint)


def test_the_ledger_is_append_only(tmp_path):
    ledger = Ledger(tmp_path / "ledger.db")
    certify(ledger, "a", 1)
    with ledger.engine.connect() as con:
        for statement in ("UPDATE partition_events SET state = 'X'", "DELETE FROM partition_events"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                con.execute(statement)
    assert len(ledger.partitions.events()) == 1


def test_served_version_falls_back_after_a_withdrawal(tmp_path):
    ledger = Ledger(tmp_path / "ledger.db")
    first = certify(ledger, "a", 1)
    second = certify(ledger, "b", 2)
    assert ledger.partitions.served("mart", "2026-09-20").certification.id == second
    assert ledger.partitions.served("mart", "2026-09-20").version == 2
    ledger.partitions.append("mart", "2026-09-20", WITHDRAWN, AT, "oncall", detail={"certification_ids": [second]})
    served = ledger.partitions.served("mart", "2026-09-20")
    assert served.certification.id == first and served.version == 1
    ledger.partitions.append("mart", "2026-09-20", WITHDRAWN, AT, "oncall", detail={"certification_ids": [first]})
    assert ledger.partitions.served("mart", "2026-09-20") is None  # absent, not zeros


def test_recertifying_the_same_content_is_not_a_new_version(tmp_path):
    ledger = Ledger(tmp_path / "ledger.db")
    certify(ledger, "a", 1)
    certify(ledger, "a", 2)
    assert ledger.partitions.served("mart", "2026-09-20").version == 1
    certify(ledger, "b", 3)
    certify(ledger, "a", 4)
    assert ledger.partitions.served("mart", "2026-09-20").version == 3


def test_holds_cover_assets_and_ranges_until_released(tmp_path):
    ledger = Ledger(tmp_path / "ledger.db")
    hold = ledger.holds.hold(["mart"], "2026-09-19", "2026-09-21", "oncall", "incident", AT, incident_id="INC-1")
    assert ledger.holds.covering("mart", "2026-09-20")["incident_id"] == "INC-1"
    assert ledger.holds.covering("mart", "2026-09-22") is None
    assert ledger.holds.covering("other", "2026-09-20") is None
    ledger.holds.release(hold, "oncall", "verified", AT)
    assert ledger.holds.covering("mart", "2026-09-20") is None


def _declared_tables():
    """Every LedgerTable any domain store declares (found by importing the stores' modules)."""
    import importlib
    import pkgutil

    import atlasmart_dagster
    from atlasmart_dagster.store.ledger.engine import LedgerTable

    tables = {}
    for info in pkgutil.walk_packages(atlasmart_dagster.__path__, "atlasmart_dagster."):
        if info.name.startswith(("atlasmart_dagster.cli", "atlasmart_dagster.bench", "atlasmart_dagster.drills")):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, LedgerTable):
                tables[value.name] = value
    return tables


def test_every_domain_table_is_append_only(tmp_path):
    tables = _declared_tables()
    assert {"partition_events", "batches", "check_results", "certification_holds", "slo_records",
            "backfill_requests", "run_phases", "step_retries", "incidents", "incident_events",
            "contract_approvals", "dashboard_deployments", "access_log"} <= set(tables)
    ledger = Ledger(tmp_path / "ledger.db")
    with ledger.engine.connect() as con:
        for table in tables.values():
            ledger.engine.ensure(table)
            # one row to touch (the triggers fire per row): 1 in every NOT NULL column
            required = [r[1] for r in con.execute(f"PRAGMA table_info({table.name})") if r[3] and not r[5]]
            con.execute(f"INSERT INTO {table.name} ({', '.join(required)}) VALUES ({', '.join('1' for _ in required)})")
            for statement in (f"UPDATE {table.name} SET rowid = rowid", f"DELETE FROM {table.name}"):
                with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                    con.execute(statement)


def test_a_table_first_used_inside_a_transaction_commits_and_rolls_back_with_it(tmp_path):
    ledger = Ledger(tmp_path / "ledger.db")
    with pytest.raises(RuntimeError):
        with ledger.transaction():
            certify(ledger, "a", 1)  # creates partition_events inside the transaction
            raise RuntimeError("abandon")
    assert ledger.partitions.events() == []  # the table is created again, not assumed
    with ledger.transaction():
        certify(ledger, "a", 1)
    assert len(Ledger(tmp_path / "ledger.db").partitions.events()) == 1
