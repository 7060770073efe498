"""A bad value is a usage error (exit 2, one line naming the accepted form), never an "unexpected ...Error":
oversized text, a date that is not YYYY-MM-DD, a first- or last-partition setting out of range."""

from __future__ import annotations

import os

import pytest

from atlasmart_dagster.defs.first_sales_date import first_sales_date_problem
from atlasmart_dagster_tests.cli import commands
from atlasmart_dagster_tests.cli.commands import run

TEN_MB = "x" * 10_000_000


def one_line(err: str) -> str:
    assert "unexpected" not in err
    return commands.one_line(err)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    return str(tmp_path / "home")


DECIDE = ("--partition", "2026-09-20", "--owner", "erp-operations", "--by", "ana")


@pytest.mark.parametrize("argv,says", [
    (("backfill", "--from", "2026-09-20", "--to", "2026-09-20", "--operator", "ana", "--reason", TEN_MB),
     "--reason is 10,000,000 characters; at most 10,000 are taken"),
    (("anomaly", "approve", *DECIDE, "--reason", TEN_MB), "--reason is 10,000,000 characters"),
    (("incident", "note", "INC-0001", "--actor", "a" * 300, "--text", "x"), "--actor is 300 characters; at most 200"),
    (("contract", "approve", "--batch", "ERP-20260920-01", "--partition", "2026-09-20", "--version", "v2",
      "--owner", "erp-operations", "--approved-by", "a" * 300, "--reason", "compatible"),
     "--approved-by is 300 characters; at most 200"),
], ids=["backfill reason", "anomaly reason", "actor", "approved-by"])
def test_text_over_its_limit_is_refused_before_the_home_is_touched(capsys, home, argv, says):
    code, out, err = run(capsys, "--home", home, "--ephemeral-instance", *argv)
    assert (code, out) == (2, "")
    assert says in one_line(err) and "docs/incidents.md" in err
    assert not os.path.exists(home)


@pytest.mark.parametrize("argv", [
    ("blast-radius", "--asset", "fact_sales", "--from", "2026-13-01"),
    ("blast-radius", "--asset", "fact_sales", "--from", "2026-09-20", "--to", "yesterday"),
    ("contract", "approve", "--batch", "b", "--partition", "yesterday", "--version", "v2"),
    ("rollback", "--asset", "fact_sales", "--partition", "2026-13-01", "--actor", "ana", "--reason", "r"),
    ("incident", "postmortem", "INC-0001", "--due", "yesterday", "--owner", "ana", "--gap", "g"),
    ("generate", "--days", "1", "--rows", "1", "--start", "2026-13-01", "--out", "x"),
    ("status", "--partition", "yesterday"),
], ids=lambda argv: " ".join(argv[:2]))
def test_a_date_that_is_not_yyyy_mm_dd_is_a_usage_error(capsys, home, argv):
    code, out, err = run(capsys, "--home", home, "--ephemeral-instance", *argv)
    assert (code, out) == (2, "")
    assert "is not a date in YYYY-MM-DD form" in one_line(err)
    assert not os.path.exists(home)


@pytest.mark.parametrize("value,says", [
    ("2026-13-01", "is '2026-13-01', not a date"),
    ("yesterday", "is 'yesterday', not a date"),
    ("20260917", "is '20260917', not a date"),
    ("1999-12-31", "is 1999-12-31, out of range"),
    ("2999-01-01", "is 2999-01-01, out of range"),
])
@pytest.mark.parametrize("argv", [
    ("status",),
    ("incident", "list"),
    ("backfill", "--from", "2026-09-20", "--to", "2026-09-20", "--operator", "ana", "--reason", "r"),
], ids=lambda argv: argv[0])
def test_the_first_sales_date_setting_is_checked_before_any_command(capsys, home, monkeypatch, argv, value, says):
    monkeypatch.setenv("ATLASMART_FIRST_SALES_DATE", value)
    code, out, err = run(capsys, "--home", home, "--ephemeral-instance", *argv)
    assert (code, out) == (2, "")
    line = one_line(err)
    assert f"$ATLASMART_FIRST_SALES_DATE {says}: expected a day YYYY-MM-DD from 2000-01-01 to " in line
    assert not os.path.exists(home)


@pytest.mark.parametrize("value", [None, "", "2026-09-17", "2000-01-01", "2025-09-17"])
def test_a_good_first_sales_date_or_none_is_accepted(value):
    assert first_sales_date_problem(value) is None


@pytest.mark.parametrize("value,says", [
    ("2026-13-01", "is '2026-13-01', not a date: expected a day YYYY-MM-DD from 2026-09-17"),
    ("2026-09-16", "is 2026-09-16, before the first partition 2026-09-17"),
])
def test_the_last_sales_date_setting_is_checked_before_any_command(capsys, home, monkeypatch, value, says):
    monkeypatch.setenv("ATLASMART_LAST_SALES_DATE", value)
    code, out, err = run(capsys, "--home", home, "--ephemeral-instance", "status")
    assert (code, out) == (2, "")
    assert f"$ATLASMART_LAST_SALES_DATE {says}" in one_line(err)
    assert not os.path.exists(home)
