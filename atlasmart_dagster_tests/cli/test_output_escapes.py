"""Text a person typed is printed with its control characters made visible: it cannot clear the screen or forge
a line of the command's own output. What is stored stays as it was typed; JSON escapes it itself."""

from __future__ import annotations

import json

import pytest

from atlasmart_dagster.cli.output import table, visible
from atlasmart_dagster.store.ledger.incidents import IncidentStore
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster_tests.cli.commands import run_in as run
from atlasmart_dagster_tests.environment import Env

FORGED = "prices look off\x1b[2J\nCERTIFIED mart_finance_daily_sales"
FORGED_ACTOR = "eve\r\x1b[1A\nCERTIFIED by"


@pytest.mark.parametrize("text,shown", [
    ("plain text, unchanged", "plain text, unchanged"),
    ("a\x1b[2Jb", "a\\x1b[2Jb"),
    ("one\ntwo\rthree\tfour", "one\\ntwo\\rthree\\tfour"),
    ("nul\x00 del\x7f csi\x9b", "nul\\x00 del\\x7f csi\\x9b"),
    ("line\u2028separator, \u202eoverride", "line\\u2028separator, \\u202eoverride"),
    ("caf\u00e9 \u2713", "caf\u00e9 \u2713"),
    (None, ""),
])
def test_visible_shows_control_characters_as_escapes(text, shown):
    assert visible(text) == shown


def test_visible_keeps_the_lines_of_a_text_that_has_several():
    assert visible("# notice\nsummary\x1b[2J", lines=True) == "# notice\nsummary\\x1b[2J"


def test_a_table_cell_cannot_break_its_row():
    assert table(["id", "title"], [["INC-1", "a\nb"]]).splitlines()[-1] == "INC-1  a\\nb"



@pytest.fixture
def env(tmp_path) -> Env:
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-22T09:00:00Z")
    return env


def test_forged_lines_and_escapes_in_notes_and_actors_are_printed_on_one_line(env, capsys):
    code, out, _ = run(env, capsys, "incident", "report", "--actor", FORGED_ACTOR, "--partition", "2026-09-19",
                       "--text", FORGED, "--json")
    assert code == 0
    incident = json.loads(out)["incident"]
    assert run(env, capsys, "incident", "note", incident, "--actor", FORGED_ACTOR, "--text", FORGED)[0] == 0

    code, out, _ = run(env, capsys, "incident", "show", incident)
    assert code == 0
    assert "\x1b" not in out and "\r" not in out
    assert not any(line.startswith("CERTIFIED") for line in out.splitlines())
    notes = [line for line in out.splitlines() if " note " in line]
    assert notes and all("prices look off\\x1b[2J\\nCERTIFIED mart_finance_daily_sales" in n for n in notes)
    assert all("eve\\r\\x1b[1A\\nCERTIFIED by" in n for n in notes)

    code, out, _ = run(env, capsys, "incident", "list")
    assert code == 0 and "\x1b" not in out and len(out.strip().splitlines()) == 3  # header, rule, one incident

    # Stored as typed; JSON carries it escaped in its own way.
    stored = IncidentStore(env.ledger).get(incident)
    assert any(FORGED in e["message"] and e["actor"] == FORGED_ACTOR for e in stored.events)
    code, out, _ = run(env, capsys, "incident", "show", incident, "--json")
    assert "\x1b" not in out and any(FORGED in e["message"] for e in json.loads(out)["timeline"])


def test_an_error_line_shows_the_escapes_of_the_argument_it_quotes(env, capsys):
    code, out, err = run(env, capsys, "incident", "show", "INC-1\x1b[2J\nCERTIFIED")
    assert (code, out) == (2, "")
    assert "\x1b" not in err and len(err.strip().splitlines()) == 1
    assert "INC-1\\x1b[2J" in err
