"""The docs say what the code does: every setting, every command, every link, and a README that stays a front door.

The README is the front door (at most 300 lines) and the depth lives in
``docs/``. These tests hold the two parts a reader relies on most to the code
as it is: the settings table of ``docs/deploying.md`` against the settings
``atlasmart_dagster/settings.py`` declares (every ``ATLASMART_*`` variable
the project reads: ``test_settings.py`` holds the code to that), and the
README's command table against ``atlasmart``'s real argument parser. Every relative link of the
README and the docs must reach a file (and a heading, when it names one).

Each check is a function of the document's text, so a second test feeds it
the real document with a row taken out, a stale row added or a link broken,
and sees it fail: a check nobody has seen fail proves nothing.
"""

from __future__ import annotations

import argparse
import re
from functools import cache
from pathlib import Path

import pytest

from atlasmart_dagster import settings
from atlasmart_dagster.cli import main as cli
from atlasmart_dagster.errors import UsageError

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
SETTINGS_PAGE = DOCS / "deploying.md"
SETTINGS_HEADING = "## Settings"
COMMANDS_HEADING = "## Command line"
README_MAX_LINES = 300

@cache
def variables_declared(settings_class: type[settings.Settings] = settings.Settings) -> frozenset[str]:
    """The variables ``atlasmart_dagster/settings.py`` declares (``test_settings.py`` holds the code to them)."""
    return frozenset(s.name for s in settings.registry(settings_class))


def _cells(line: str) -> list[str]:
    """The cells of one Markdown table row (``\\|`` inside a cell is not a separator)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def table_after(text: str, heading: str) -> list[list[str]]:
    """The rows (header and separator left out) of the first table in the section under ``heading``."""
    assert heading in text.splitlines(), f"no section {heading!r}"
    section = text.split(f"\n{heading}\n", 1)[1]
    section = re.split(r"\n#{1,%d} " % heading.index(" "), section, maxsplit=1)[0]
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append(_cells(line))
    return table[2:]


def settings_rows(page: str) -> list[str]:
    """The variable each row of the settings table names (its first cell, as `NAME`)."""
    names = []
    for cells in table_after(page, SETTINGS_HEADING):
        match = re.fullmatch(r"`(ATLASMART_[A-Z0-9_]+)`", cells[0])
        assert match, f"a settings row must start with one `ATLASMART_...` variable, not {cells[0]!r}"
        assert len(cells) == 4 and all(cells), f"row {cells[0]}: name, default, what it does, where it applies"
        names.append(match.group(1))
    return names


def settings_problems(page: str, declared: frozenset[str]) -> tuple[list[str], list[str], list[str]]:
    """(settings declared but not in the table, rows naming a variable no setting declares, rows repeated)."""
    rows = settings_rows(page)
    repeated = sorted({name for name in rows if rows.count(name) > 1})
    return sorted(declared - set(rows)), sorted(set(rows) - declared), repeated


def _default_text(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def default_problems(page: str, settings_class: type[settings.Settings] = settings.Settings) -> list[str]:
    """Rows whose default cell does not begin with their setting's default, in backticks. A setting that has
    no value of its own when unset (None, or a flag) says in words what unset means, and is not compared."""
    cells = {row[0].strip("`"): row[1] for row in table_after(page, SETTINGS_HEADING)}
    wrong = []
    for setting in settings.registry(settings_class):
        if setting.default is None or isinstance(setting.default, bool) or setting.name not in cells:
            continue
        expected = f"`{_default_text(setting.default)}`"
        if not cells[setting.name].startswith(expected):
            wrong.append(f"{setting.name}: the table says {cells[setting.name]!r}, settings.py {expected}")
    return wrong


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser | None]:
    """A parser's sub-commands: its subparsers, else the choices of its first positional argument
    (``atlasmart batch list|retire|...``, ``atlasmart drill dr``), which take no parser of their own."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    positional = [a for a in parser._actions if not a.option_strings]
    if positional and positional[0].choices:
        return dict.fromkeys(positional[0].choices)
    return {}


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> set[tuple[str, ...]]:
    found = {path}
    for name, sub in _subcommands(parser).items():
        found |= _walk(sub, path + (name,)) if sub is not None else {path + (name,)}
    return found


@cache
def command_tree() -> frozenset[tuple[str, ...]]:
    """Every command and sub-command of ``atlasmart``, as paths: ("drill",), ("drill", "dr"), ...

    ``build_parser`` loads each command's module only when the command is
    parsed; ``command_parser`` is the parser that module registers, the one
    that parses the command's arguments.
    """
    paths: set[tuple[str, ...]] = set()
    for name, entry in _subcommands(cli.build_parser()).items():
        assert isinstance(entry, cli.CommandParser), f"{name}: not one of atlasmart's lazily loaded commands"
        paths |= _walk(cli.command_parser(entry.command, entry.module), (name,))
    assert paths, "no commands found in atlasmart's parser"
    return frozenset(paths)


def documented_commands(readme: str, tree: frozenset[tuple[str, ...]]) -> set[tuple[str, ...]]:
    """The commands the README's command table names: each `atlasmart COMMAND [SUB|SUB...] ...` code span
    of a row's first cell. The word after a command is its sub-commands only if the command has any."""
    with_subcommands = {path[0] for path in tree if len(path) > 1}
    found = set()
    for cells in table_after(readme, COMMANDS_HEADING):
        spans = re.findall(r"`atlasmart ([^`]+)`", cells[0])
        assert spans, f"a command row must name `atlasmart ...` in its first cell, not {cells[0]!r}"
        for span in spans:
            words = span.split()
            found.add((words[0],))
            if words[0] in with_subcommands and len(words) > 1:
                found |= {(words[0], sub) for sub in words[1].replace("\\|", "|").split("|")}
    return found


def command_problems(readme: str, tree: frozenset[tuple[str, ...]]) -> tuple[list[str], list[str]]:
    """(commands the parser has and the table leaves out, commands the table names that do not exist)."""
    documented = documented_commands(readme, tree)
    return [" ".join(p) for p in sorted(tree - documented)], [" ".join(p) for p in sorted(documented - tree)]


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower())
    return text.replace(" ", "-")


def _without_code(text: str) -> str:
    """The text outside fenced blocks and inline code, where a link is a link."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", text, flags=re.DOTALL))


def broken_links(page: Path, text: str) -> list[str]:
    """The relative links of ``text`` (a Markdown file at ``page``) that reach no file, or no heading there."""
    broken = []
    for target in re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", _without_code(text)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # http:, https:, mailto: ...
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page
        if not path.exists():
            broken.append(f"{target} (no such file)")
            continue
        if anchor and path.suffix == ".md":
            headings = re.findall(r"^#{1,6} (.+)$", _without_code(path.read_text()), flags=re.MULTILINE)
            if anchor not in {_anchor(h) for h in headings}:
                broken.append(f"{target} (no such heading)")
    return broken


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


# --- the documents as they are ------------------------------------------------------------------


def test_every_setting_has_one_row_in_the_settings_table_and_every_row_is_a_setting():
    missing, stale, repeated = settings_problems(SETTINGS_PAGE.read_text(), variables_declared())
    assert not missing, f"declared in settings.py, missing from the settings table of docs/deploying.md: {missing}"
    assert not stale, f"rows of docs/deploying.md's settings table that settings.py does not declare: {stale}"
    assert not repeated, f"settings table rows given twice: {repeated}"
    assert not default_problems(SETTINGS_PAGE.read_text()), "defaults of the settings table that settings.py does not have"


def test_every_command_and_subcommand_is_in_the_readme_command_table_and_every_one_there_exists():
    missing, stale = command_problems(README.read_text(), command_tree())
    assert not missing, f"atlasmart has them, the README's command table does not: {missing}"
    assert not stale, f"the README's command table names commands atlasmart does not have: {stale}"


def test_every_relative_link_of_the_readme_and_the_docs_reaches_a_file():
    broken = {str(p.relative_to(REPO)): broken_links(p, p.read_text()) for p in _pages()}
    assert not {page: links for page, links in broken.items() if links}


def test_the_readme_is_a_front_door_of_at_most_300_lines():
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move the depth into docs/"


# --- each check fails when it should ------------------------------------------------------------


def test_the_settings_check_sees_a_row_taken_out_a_stale_row_a_repeated_one_and_a_wrong_default():
    page = SETTINGS_PAGE.read_text()
    row = next(line for line in page.splitlines() if line.startswith("| `ATLASMART_QUEUE_TIMEOUT` |"))
    stale = "| `ATLASMART_NOT_READ_ANYWHERE` | - | nothing | nowhere |"
    assert settings_problems(page.replace(row + "\n", ""), variables_declared())[0] == ["ATLASMART_QUEUE_TIMEOUT"]
    assert settings_problems(page.replace(row, f"{row}\n{stale}"), variables_declared())[1] == ["ATLASMART_NOT_READ_ANYWHERE"]
    assert settings_problems(page.replace(row, f"{row}\n{row}"), variables_declared())[2] == ["ATLASMART_QUEUE_TIMEOUT"]
    changed = row.replace("| `3600` |", "| `600` |")
    assert default_problems(page.replace(row, changed)) == [
        "ATLASMART_QUEUE_TIMEOUT: the table says '`600`', settings.py `3600`"]


def test_adding_a_setting_as_the_docs_say_takes_its_declaration_and_its_row():
    """The steps of "Adding a setting" (docs/deploying.md), followed once on a copy of the registry."""
    def keep_days(text: str) -> int:
        if not text.isdigit():
            raise settings.SettingError(f"$ATLASMART_EXAMPLE_KEEP_DAYS must be a whole number of days, not {text!r}")
        return int(text)

    class WithExample(settings.Settings):  # step 1: the declaration
        example_keep_days = settings.Setting("ATLASMART_EXAMPLE_KEEP_DAYS", keep_days, 7, "days an example is kept")

    declared = variables_declared(WithExample)
    page = SETTINGS_PAGE.read_text()
    assert settings_problems(page, declared) == (["ATLASMART_EXAMPLE_KEEP_DAYS"], [], []), "the check demands its row"
    row = next(line for line in page.splitlines() if line.startswith("| `ATLASMART_QUEUE_TIMEOUT` |"))
    added = "| `ATLASMART_EXAMPLE_KEEP_DAYS` | `7` | days an example is kept, a whole number | nowhere: this test |"
    with_row = page.replace(row, f"{row}\n{added}")  # step 3: its row
    assert settings_problems(with_row, declared) == ([], [], []) and default_problems(with_row, WithExample) == []
    # step 2: read where it is used, from the environment given
    assert WithExample.from_environ({"ATLASMART_EXAMPLE_KEEP_DAYS": "3"}).example_keep_days == 3
    assert WithExample.from_environ({}).example_keep_days == 7
    with pytest.raises(UsageError, match=r"^\$ATLASMART_EXAMPLE_KEEP_DAYS must be a whole number of days, not 'soon'$"):
        _ = WithExample.from_environ({"ATLASMART_EXAMPLE_KEEP_DAYS": "soon"}).example_keep_days


def test_the_command_check_sees_a_command_taken_out_and_commands_that_do_not_exist():
    readme, tree = README.read_text(), command_tree()
    drill = next(line for line in readme.splitlines() if line.startswith("| `atlasmart drill "))
    taken_out = command_problems(readme.replace(drill + "\n", ""), tree)[0]
    assert ("drill dr" in taken_out) and ("drill" in taken_out)
    invented = readme.replace("`atlasmart anomaly approve\\|reject", "`atlasmart anomaly approve\\|reject\\|defer")
    invented = invented.replace(drill, f"{drill}\n| `atlasmart undo` | undo |")
    assert command_problems(invented, tree)[1] == ["anomaly defer", "undo"]


def test_the_link_check_sees_a_missing_file_and_a_missing_heading():
    text = "[a](docs/nowhere.md), [b](docs/deploying.md#no-such-heading), [c](docs/deploying.md#settings), `[d](x.md)`"
    assert broken_links(README, text) == ["docs/nowhere.md (no such file)", "docs/deploying.md#no-such-heading (no such heading)"]
