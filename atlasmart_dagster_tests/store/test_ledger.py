import sqlite3
from datetime import datetime, timezone

import pytest

from atlasmart_dagster.store.ledger import CERTIFIED, WITHDRAWN, Ledger

AT = datetime(2026, 9, 22, 8, 16, tzinfo=timezone.utc)


def certify(ledger, fingerprint, snapshot):
    return ledger.append_event("mart", "2026-09-20", CERTIFIED, AT, "test", snapshot_id=snapshot, fingerprint=fingerprint)


def test_the_ledger_is_append_only(tmp_path):
    ledger = Ledger(tmp_path / "ledger.db")
    certify(ledger, "a", 1)
    with ledger.connect() as con:
        for statement in ("UPDATE partition_events SET state = 'X'", "DELETE FROM partition_events"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                con.execute(statement)
    assert len(ledger.events()) == 1


def test_served_version_falls_back_after_a_withdrawal(tmp_path):
    ledger = Ledger(tmp_path / "ledger.db")
    first = certify(ledger, "a", 1)
    second = certify(ledger, "b", 2)
    assert ledger.served("mart", "2026-09-20").certification.id == second
    assert ledger.served("mart", "2026-09-20").version == 2
    ledger.append_event("mart", "2026-09-20", WITHDRAWN, AT, "oncall", detail={"certification_ids": [second]})
    served = ledger.served("mart", "2026-09-20")
    assert served.certification.id == first and served.version == 1
    ledger.append_event("mart", "2026-09-20", WITHDRAWN, AT, "oncall", detail={"certification_ids": [first]})
    assert ledger.served("mart", "2026-09-20") is None  # absent, not zeros


def test_recertifying_the_same_content_is_not_a_new_version(tmp_path):
    ledger = Ledger(tmp_path / "ledger.db")
    certify(ledger, "a", 1)
    certify(ledger, "a", 2)
    assert ledger.served("mart", "2026-09-20").version == 1
    certify(ledger, "b", 3)
    certify(ledger, "a", 4)
    assert ledger.served("mart", "2026-09-20").version == 3


def test_holds_cover_assets_and_ranges_until_released(tmp_path):
    ledger = Ledger(tmp_path / "ledger.db")
    hold = ledger.hold(["mart"], "2026-09-19", "2026-09-21", "oncall", "incident", AT, incident_id="INC-1")
    assert ledger.active_hold("mart", "2026-09-20")["incident_id"] == "INC-1"
    assert ledger.active_hold("mart", "2026-09-22") is None
    assert ledger.active_hold("other", "2026-09-20") is None
    ledger.release(hold, "oncall", "verified", AT)
    assert ledger.active_hold("mart", "2026-09-20") is None
