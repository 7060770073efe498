"""settings.py is the one place an ``ATLASMART_*`` variable is declared, and the package's one reader of them.

Three things hold: every ``ATLASMART_*`` variable named anywhere in the
project (the package, ``scripts/dev``, the tests) is declared in the registry
and every declared one is named somewhere else (no dead setting); no module
of the package reads one from ``os.environ`` but ``settings.py``; and a
``Settings`` reads as the docs say (a frozen copy, parsed when asked, unset
or blank is the default, a bad value a ``UsageError`` naming the variable).
``test_docs.py`` holds the settings table to the same registry.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from atlasmart_dagster import settings
from atlasmart_dagster.errors import UsageError
from atlasmart_dagster.settings import Settings

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "atlasmart_dagster"
VARIABLE = re.compile(r"\bATLASMART_[A-Z0-9_]+\b")
HERE = Path(__file__).resolve()


def _sources() -> list[Path]:
    """Every file the project names a variable in: the package (its Python, the instance configs, the dbt
    peer's profile and macros), ``scripts/dev`` and the tests. Left out: ``settings.py``, which declares
    them, and the two tests that invent variables to see their checks fail."""
    files = [p for ext in ("py", "yaml", "yml", "sql") for p in PACKAGE.rglob(f"*.{ext}")]
    files += [REPO / "scripts" / "dev"]
    files += list((REPO / "atlasmart_dagster_tests").rglob("*.py"))
    left_out = {PACKAGE / "settings.py", HERE, REPO / "atlasmart_dagster_tests" / "test_docs.py"}
    return [p for p in files if p not in left_out]


def _named() -> dict[str, set[str]]:
    """Each variable named in the sources, with the files naming it."""
    found: dict[str, set[str]] = {}
    for path in _sources():
        for name in VARIABLE.findall(path.read_text()):
            found.setdefault(name, set()).add(str(path.relative_to(REPO)))
    return found


def _attributes(settings_class: type[Settings] = Settings) -> dict[str, settings.Setting]:
    return {attr: value for klass in reversed(settings_class.__mro__) for attr, value in vars(klass).items()
            if isinstance(value, settings.Setting)}


def naming_problems(named: dict[str, set[str]], code: str,
                    settings_class: type[Settings] = Settings) -> tuple[dict[str, list[str]], list[str]]:
    """(variables named in the project that no setting declares, with where; settings neither named nor read).

    A setting the package reads through settings.py may be named only by its attribute
    (``current().celery_queue``): a ``.attr`` in ``code`` counts as its use."""
    declared = {s.name for s in settings.registry(settings_class)}
    undeclared = {name: sorted(files) for name, files in named.items() if name not in declared}
    read = {s.name for attr, s in _attributes(settings_class).items() if re.search(rf"\.{attr}\b", code)}
    return undeclared, sorted(declared - set(named) - read)


def test_every_variable_the_project_names_is_declared_and_every_declared_one_is_used():
    code = "\n".join(p.read_text() for p in _sources() if p.suffix == ".py")
    undeclared, unused = naming_problems(_named(), code)
    assert not undeclared, f"declare them in atlasmart_dagster/settings.py (docs/deploying.md, 'Adding a setting'): {undeclared}"
    assert not unused, f"declared in settings.py, named and read nowhere in the project: {unused}"


def test_the_naming_check_sees_an_undeclared_variable_and_an_unused_setting():
    class WithUnused(Settings):
        never_read = settings.Setting("ATLASMART_NEVER_READ", str, None, "read by nothing")

    named = {s.name: {"somewhere.py"} for s in settings.SETTINGS} | {"ATLASMART_NOT_DECLARED": {"x.py"}}
    assert naming_problems(named, "", WithUnused) == ({"ATLASMART_NOT_DECLARED": ["x.py"]}, ["ATLASMART_NEVER_READ"])
    assert naming_problems(named, "current().never_read", WithUnused)[1] == []


def test_each_setting_is_named_after_its_variable_and_says_what_it_does():
    for attr, value in _attributes().items():
        assert attr == value.name.removeprefix(settings.PREFIX).lower(), f"{value.name} as Settings.{attr}"
        assert value.doc and "\n" not in value.doc, f"{value.name}: one line of what it does"
    assert len(settings.BY_NAME) == len(settings.SETTINGS), "a variable declared twice"


# --- the package reads them through settings.py -----------------------------------------------------

# Modules that still read an ``ATLASMART_*`` variable from ``os.environ`` themselves. The list may only
# shrink: a new reader reads ``settings.current()``. The benchmark's runner saves and restores the first
# partition's variable around a child process it starts (a write, with the read that undoes it).
ENVIRON_READERS = {"bench.runner"}


def _constant_value(node: ast.AST) -> str | None:
    """The variable a constant's value names: ``"ATLASMART_..."``, or ``Settings.attr.name``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(settings.PREFIX):
        return node.value
    if (isinstance(node, ast.Attribute) and node.attr == "name" and isinstance(node.value, ast.Attribute)
            and getattr(node.value.value, "id", None) == "Settings"):
        setting = vars(Settings).get(node.value.attr)
        return setting.name if isinstance(setting, settings.Setting) else None
    return None


def _constants(tree: ast.Module) -> dict[str, str]:
    """The module's constants naming a variable (``QUEUE_ENV = "ATLASMART_CELERY_QUEUE"``,
    ``HOME_ENV = Settings.home.name``)."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and (value := _constant_value(node.value)):
            found.update({target.id: value for target in node.targets if isinstance(target, ast.Name)})
    return found


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ" and getattr(node.value, "id", None) == "os")


def environ_reads(source: str, imported: dict[str, str] | None = None) -> list[tuple[int, str]]:
    """(line, variable) for each read of an ``ATLASMART_*`` variable from ``os.environ`` (``.get``, ``[...]``,
    ``os.getenv``) in ``source``; a variable given as a literal or as a constant holding one. Writes
    (``os.environ[X] = ...``, ``.setdefault``, ``.pop``) are not reads."""
    tree = ast.parse(source)
    names = {**(imported or {}), **_constants(tree)}

    def variable(node: ast.AST | None) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(settings.PREFIX):
            return node.value
        if isinstance(node, ast.Name):
            return names.get(node.id)
        return None

    reads = []
    for node in ast.walk(tree):
        asked = None
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            environ_get = isinstance(func, ast.Attribute) and func.attr == "get" and _is_environ(func.value)
            getenv = isinstance(func, ast.Attribute) and func.attr == "getenv" and getattr(func.value, "id", None) == "os"
            if environ_get or getenv:
                asked = variable(node.args[0])
        elif isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load):
            asked = variable(node.slice)
        if asked:
            reads.append((node.lineno, asked))
    return reads


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__")


def _imported_constants(path: Path, trees: dict[str, ast.Module]) -> dict[str, str]:
    """The ``ATLASMART_*`` constants ``path`` imports from the package (``from ..store.home import HOME_ENV``)."""
    name = _module_name(path)
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = {}
    for node in ast.walk(trees[name]):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = here[: len(here) - (node.level - 1)]
            source = ".".join([*base, *([node.module] if node.module else [])])
        else:
            source = (node.module or "").removeprefix("atlasmart_dagster.")
        constants = _constants(trees[source]) if source in trees else {}
        found.update({a.asname or a.name: constants[a.name] for a in node.names if a.name in constants})
    return found


def _package_reads() -> dict[str, list[tuple[int, str]]]:
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    trees = {name: ast.parse(path.read_text()) for name, path in paths.items()}
    found = {}
    for name, path in paths.items():
        if name == "settings":
            continue
        reads = environ_reads(path.read_text(), _imported_constants(path, trees))
        if reads:
            found[name] = reads
    return found


def test_no_module_of_the_package_reads_an_atlasmart_variable_from_os_environ_but_settings():
    readers = _package_reads()
    new = {name: reads for name, reads in readers.items() if name not in ENVIRON_READERS}
    assert not new, f"read them through atlasmart_dagster.settings (settings.current().x): {new}"
    assert ENVIRON_READERS - set(readers) == set(), "ported: remove it from ENVIRON_READERS"


def test_the_read_check_sees_each_way_of_reading_and_not_a_write():
    source = '''
import os
QUEUE_ENV = "ATLASMART_CELERY_QUEUE"
a = os.environ.get("ATLASMART_HOME")
b = os.environ[QUEUE_ENV]
c = os.getenv(HOME_ENV, "x")
WAREHOUSE_ENV = Settings.warehouse.name
e = os.environ.get(WAREHOUSE_ENV) or None
os.environ["ATLASMART_HOME"] = "h"
os.environ.setdefault("ATLASMART_CLOCK", "system")
d = os.environ.get("DAGSTER_HOME")
'''
    assert environ_reads(source, {"HOME_ENV": "ATLASMART_HOME"}) == [
        (4, "ATLASMART_HOME"), (5, "ATLASMART_CELERY_QUEUE"), (6, "ATLASMART_HOME"), (8, "ATLASMART_WAREHOUSE")]


# --- how a Settings reads -------------------------------------------------------------------------


def test_a_settings_is_a_copy_of_the_environment_it_was_read_from():
    env = {"ATLASMART_QUEUE_TIMEOUT": "5", "PATH": "/bin"}
    taken = Settings.from_environ(env)
    env["ATLASMART_QUEUE_TIMEOUT"] = "9"
    assert taken.queue_timeout == 5.0 and "PATH" not in taken.environ
    with pytest.raises(AttributeError):
        taken.environ = {}  # type: ignore[misc]


def test_current_reads_the_environment_at_each_call(monkeypatch):
    monkeypatch.setenv("ATLASMART_CELERY_QUEUE", "first")
    assert settings.current().celery_queue == "first"
    monkeypatch.setenv("ATLASMART_CELERY_QUEUE", "second")
    assert settings.current().celery_queue == "second"
    monkeypatch.delenv("ATLASMART_CELERY_QUEUE")
    assert settings.current().celery_queue == "dagster"


@pytest.mark.parametrize("text", [None, "", "   "])
def test_unset_empty_or_blank_is_the_default(text):
    env = {} if text is None else {"ATLASMART_EXECUTOR": text, "ATLASMART_QUEUE_TIMEOUT": text}
    assert (Settings.from_environ(env).executor, Settings.from_environ(env).queue_timeout) == ("in_process", 3600.0)


def test_a_bad_value_is_a_usage_error_naming_the_variable_and_only_where_it_is_read():
    taken = Settings.from_environ({"ATLASMART_BACKFILL_RUN_DAYS": "0", "ATLASMART_HOME": "/h"})
    assert taken.home == "/h"  # another setting's bad value stops nothing that does not read it
    refused = r"^\$ATLASMART_BACKFILL_RUN_DAYS must be a whole number of days \(>= 1\), not '0'$"
    with pytest.raises(UsageError, match=refused):
        _ = taken.backfill_run_days
    assert taken.problems() == {"ATLASMART_BACKFILL_RUN_DAYS": Settings.backfill_run_days.problem(taken.environ)}
    assert Settings.from_environ({}).problems() == {}


@pytest.mark.parametrize("name,text,value", [
    ("ATLASMART_CLOCK", " Logical ", "logical"),
    ("ATLASMART_FIRST_SALES_DATE", "2025-09-17", "2025-09-17"),
    ("ATLASMART_BACKFILL_RUN_DAYS", "10", 10),
    ("ATLASMART_STORAGE_RETRY_WINDOW", " 0 ", 0.0),
    ("ATLASMART_QUEUE_TIMEOUT", "2.5", 2.5),
    ("ATLASMART_QUERY_TIMEOUT_S", "30", 30.0),
    ("ATLASMART_QUERY_MEMORY", " 512MB ", "512MB"),
    ("ATLASMART_UPDATE_SNAPSHOT", "1", True),
])
def test_each_form_reads_as_its_type(name, text, value):
    assert settings.BY_NAME[name].read({name: text}) == value


@pytest.mark.parametrize("name,text,says", [
    ("ATLASMART_CLOCK", "wall", "the clock must be 'system' or 'logical', not 'wall' (--clock or $ATLASMART_CLOCK)"),
    ("ATLASMART_EXECUTOR", "k8s", "$ATLASMART_EXECUTOR must be 'in_process' or 'celery', not 'k8s'"),
    ("ATLASMART_STORAGE_RETRY_WINDOW", "-1", "$ATLASMART_STORAGE_RETRY_WINDOW must be a number of seconds from 0 to 3600"),
    ("ATLASMART_QUEUE_TIMEOUT", "inf", "$ATLASMART_QUEUE_TIMEOUT must be a positive number of seconds, not 'inf'"),
    ("ATLASMART_QUERY_TIMEOUT_S", "0", "ATLASMART_QUERY_TIMEOUT_S must be a number of seconds above 0"),
    ("ATLASMART_QUERY_MEMORY", "1PB", "ATLASMART_QUERY_MEMORY must be a size such as 512MB"),
    ("ATLASMART_FIRST_SALES_DATE", "1999-12-31", "$ATLASMART_FIRST_SALES_DATE is 1999-12-31, out of range"),
])
def test_each_form_refuses_what_it_does_not_accept(name, text, says):
    assert settings.BY_NAME[name].problem({name: text}).startswith(says)
