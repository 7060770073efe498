"""deploy/README.md tells a team which sensors and schedules to turn on, for every one the code location has."""

import re
from pathlib import Path

import dagster as dg

from atlasmart_dagster.definitions import defs

README = Path(__file__).resolve().parents[2] / "deploy" / "README.md"
HEADING = "### Sensors and the schedule to turn on"


def _automation_table() -> dict[str, tuple[str, str]]:
    """name -> (default, turn on for a team) from the README's table under HEADING."""
    text = README.read_text()
    assert HEADING in text, f"deploy/README.md has no section {HEADING!r}"
    section = text.split(HEADING, 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        match = re.fullmatch(r"`(\w+)`", cells[0]) if len(cells) == 4 else None
        if match:
            rows[match.group(1)] = (cells[1], cells[2])
    return rows


def test_every_sensor_and_schedule_is_listed_with_its_default_and_whether_to_turn_it_on():
    table = _automation_table()
    running = {dg.DefaultSensorStatus.RUNNING, dg.DefaultScheduleStatus.RUNNING}
    actual = {s.name: ("on" if s.default_status in running else "off") for s in [*defs.sensors, *defs.schedules]}
    assert {name: row[0] for name, row in table.items()} == actual
    assert all(row[1].startswith("yes") for row in table.values()), "a team deployment needs every one of them"
