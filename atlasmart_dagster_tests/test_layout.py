"""The package's structure holds: layers import downward only, no import cycles, no private APIs.

Walks every module's imports (top level and function-local alike) with ``ast``:
nothing is imported or run, so a test failure names the file and line to fix.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "atlasmart_dagster"

# Lower layers never import higher ones. A module belongs to the first layer
# whose prefix matches its dotted path inside the package.
LAYERS = (
    ("errors", "settings"),
    ("domain",),
    ("transforms",),
    ("store",),
    ("product",),
    ("defs",),
    ("ops",),
    ("definitions", "__init__"),
    ("cli", "drills", "bench"),
)

# Modules allowed to reach into a library's private API, each the narrowest
# adapter for something the public API cannot do, with a test that fails when
# an upgrade changes the behaviour relied on.
PRIVATE_ADAPTERS = {
    "store.iceberg_adapter": "pyiceberg",
    "ops.runs.dagster_backfill_adapter": "dagster",
    "store.instance.dagster_sqlite_adapter": "dagster",
    "store.instance.dagster_postgres_adapter": "dagster",
    "defs.dagster_interrupts_adapter": "dagster",
    "defs.dagster_event_adapter": "dagster",
}
WATCHED_LIBRARIES = ("dagster", "pyiceberg", "argparse")


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _typing_only_lines(tree: ast.AST) -> set[int]:
    """The lines of ``if TYPE_CHECKING:`` blocks: imports there are for annotations, never run."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _imports(name: str, runtime_only: bool = False) -> list[tuple[int, str, bool]]:
    """(line, imported module, is-private-name) for every import in module ``name`` (``runtime_only``: not those
    made only for type checking)."""
    path = MODULES[name]
    tree = ast.parse(path.read_text(), str(path))
    skipped = _typing_only_lines(tree) if runtime_only else set()
    here = name.split(".") if _is_package(name) else name.split(".")[:-1]
    if name == "__init__":
        here = []
    out = []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skipped:
            continue
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name, False) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)] if node.level > 1 else here
                target = ".".join(["atlasmart_dagster", *base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                inner = candidate.removeprefix("atlasmart_dagster.")
                module = candidate if inner in MODULES else target
                out.append((node.lineno, module, alias.name.startswith("_") and not alias.name.startswith("__")))
    return out


def _internal(module: str) -> str | None:
    if module == "atlasmart_dagster":
        return "__init__"
    if module.startswith("atlasmart_dagster."):
        inner = module.removeprefix("atlasmart_dagster.")
        while inner and inner not in MODULES:
            inner = inner.rpartition(".")[0]
        return inner or None
    return None


def _layer(name: str) -> int:
    for index, prefixes in enumerate(LAYERS):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return index
    raise AssertionError(f"module {name} is in no layer: add its folder to LAYERS")


def test_every_module_has_a_layer():
    for name in MODULES:
        _layer(name)


def test_layers_import_downward_only():
    upward = []
    for name in sorted(MODULES):
        for line, module, _ in _imports(name):
            target = _internal(module)
            if target and _layer(target) > _layer(name):
                upward.append(f"{MODULES[name].relative_to(PACKAGE.parent)}:{line} imports {target}")
    assert not upward, "imports that run up the layers:\n" + "\n".join(upward)


def test_no_import_cycles():
    # an import made only for type checking is no edge at run time (it is how Python breaks a cycle of annotations)
    graph = {name: {t for _, m, _ in _imports(name, runtime_only=True) if (t := _internal(m)) and t != name} for name in MODULES}
    # a package's __init__ re-exporting its modules is not a cycle of meaning
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_no_private_library_apis_outside_their_adapter():
    reach_ins = []
    for name in sorted(MODULES):
        for line, module, private_name in _imports(name):
            root = module.split(".")[0]
            if root not in WATCHED_LIBRARIES:
                continue
            private = private_name or any(part.startswith("_") for part in module.split("."))
            if private and PRIVATE_ADAPTERS.get(name) != root:
                reach_ins.append(f"{MODULES[name].relative_to(PACKAGE.parent)}:{line} imports private {module}")
    assert not reach_ins, "private library APIs outside their adapter:\n" + "\n".join(reach_ins)


def test_no_private_attribute_reach_ins():
    """``obj._private = ...`` / ``obj._private`` on a library object (argparse's ``_parser_class`` was one)."""
    known_private_attributes = {"_parser_class", "_check_pyarrow_schema_compatible"}
    found = []
    for name, path in sorted(MODULES.items()):
        if name in PRIVATE_ADAPTERS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in known_private_attributes:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} uses {node.attr}")
    assert not found, "\n".join(found)


def test_module_names_are_not_twins():
    """No two modules share a file name (``metrics.py`` twice sent readers to the wrong file).

    Two mirrors are the map itself, not twins: ``transforms/X.py`` holds the
    SQL of the asset layer ``defs/assets/X.py``, and ``cli/X.py`` is the
    command over what its name says.
    """
    by_stem: dict[str, list[str]] = {}
    for name in MODULES:
        stem = name.rpartition(".")[2]
        if _is_package(name) or name.startswith(("transforms.", "cli.")):
            continue
        by_stem.setdefault(stem, []).append(name)
    twins = {stem: names for stem, names in by_stem.items() if len(names) > 1}
    assert not twins, f"module names used twice: {twins}"
    mirrored = {n.rpartition(".")[2] for n in MODULES if n.startswith("transforms.") and not _is_package(n)}
    assert mirrored <= {n.rpartition(".")[2] for n in MODULES if n.startswith("defs.assets.")}, (
        "every transforms/ module names the asset layer whose SQL it holds"
    )


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_says_what_it_holds(name):
    tree = ast.parse(MODULES[name].read_text())
    if _is_package(name) and not tree.body:
        return
    assert ast.get_docstring(tree), f"{MODULES[name]} has no module docstring"


# The questions only the ledger asks of its raw partition events: every other module reads a day through
# ``store/ledger/day_states.py`` (the one read model of a day), built once per command, tick or request.
RAW_READS = (".partitions.events(", ".partitions.served(", ".partitions.served_map(", ".partitions.versions_map(",
             "events.events(")


def _raw_event_readers(package: Path = PACKAGE) -> tuple[set[str], int]:
    """The modules outside the ledger that ask a raw-event question, and how many modules were read."""
    found, read = set(), 0
    for path in package.rglob("*.py"):
        name = ".".join(path.relative_to(package).with_suffix("").parts)
        if name.startswith("store.ledger"):
            continue
        read += 1
        if any(question in path.read_text() for question in RAW_READS):
            found.add(name)
    return found, read


def test_a_days_state_is_derived_in_one_place():
    """No module outside the ledger derives a day's state from raw events: each reads ``DayStates``."""
    readers, read = _raw_event_readers()
    assert read > 100, "the walk missed the package"
    assert readers == set(), f"read the day through ledger.partitions.states() (DayStates): {sorted(readers)}"


def test_the_raw_event_check_sees_a_module_that_asks_the_events(tmp_path):
    (tmp_path / "product").mkdir()
    (tmp_path / "product" / "asks.py").write_text("served = platform.ledger.partitions.served_map(asset)\n")
    (tmp_path / "store" / "ledger").mkdir(parents=True)
    (tmp_path / "store" / "ledger" / "day_states.py").write_text("events = self.partitions.events()\n")
    assert _raw_event_readers(tmp_path) == ({"product.asks"}, 1)


TESTS = Path(__file__).resolve().parent


def test_test_modules_stand_on_their_own_not_on_conftest():
    """A test module imports its helpers from a module that says what it holds (``environment``, a folder's
    own helpers), never from a ``conftest``: pytest loads conftests itself, and an import of one ties the
    module to where it sits. Fixtures are still used by name."""
    modules = [p for p in TESTS.rglob("*.py") if p.name != "conftest.py"]
    assert len(modules) > 100, "the walk found no test modules"
    offenders = []
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom) else
                     [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            if any(name.split(".")[-1] == "conftest" for name in names):
                offenders.append(f"{path.relative_to(TESTS)}:{node.lineno}")
    assert not offenders, offenders


DEFINITION_DECORATORS = ("sensor", "schedule", "asset", "multi_asset", "asset_check", "multi_asset_check",
                         "observable_source_asset")


def test_defs_is_the_whole_dagster_surface():
    """Every Dagster definition (asset, check, sensor, schedule) is made under ``defs/`` (``definitions.py``
    composes them; the benchmark's peer is a code location of its own). A room above that needs one hands
    its work in, as ``definitions.py`` does for the incident sensor."""
    outside = []
    for name, path in MODULES.items():
        if name.startswith(("defs.", "bench.")) or name in ("defs", "definitions"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            call = node.func if isinstance(node, ast.Call) else node
            if (isinstance(call, ast.Attribute) and call.attr in DEFINITION_DECORATORS
                    and getattr(call.value, "id", None) == "dg"):
                outside.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} dg.{call.attr}")
    assert not outside, "Dagster definitions outside defs/:\n" + "\n".join(outside)
    assert any(n.startswith("defs.automation.") and "sensor" in n for n in MODULES), "the walk found no sensor module"


def _folder(name: str) -> str:
    return name if _is_package(name) else name.rpartition(".")[0]


# The one tie, on the top floor: `atlasmart bench` is a command (cli -> bench), and the publishing-cost benchmark
# times the user's own `atlasmart certify` in its process (bench/publish_cost.py -> cli.main).
ALLOWED_TIES = {("bench", "cli"): "the benchmark runs the command it measures"}


def test_no_two_folders_tie_each_other():
    """No two folders import each other (``incidents`` and ``notifications`` once did): one of them is the
    lower. A folder and its own subfolder are one concern (a registry of kinds) and are not held to it."""
    edges: set[tuple[str, str]] = set()
    for name in MODULES:
        for _, module, _ in _imports(name, runtime_only=True):
            target = _internal(module)
            if target and (a := _folder(name)) != (b := _folder(target)):
                edges.add((a, b))
    assert edges, "the walk found no imports"

    def nested(a: str, b: str) -> bool:
        return a == "" or b == "" or a.startswith(b + ".") or b.startswith(a + ".")

    ties = sorted({tuple(sorted((a, b))) for a, b in edges if (b, a) in edges and not nested(a, b)})
    assert [t for t in ties if t not in ALLOWED_TIES] == [], f"folders that import each other: {ties}"
    assert set(ALLOWED_TIES) <= set(ties), "an allowed tie is gone: remove it from ALLOWED_TIES"


def test_no_room_holds_over_15_percent_of_the_package():
    """A room is a folder's own modules (its subfolders are rooms of their own): none holds more than 15 % of
    the package's lines, so no folder becomes the grab-bag ``ops/`` once was (29 %)."""
    lines = {name: len(path.read_text().splitlines()) for name, path in MODULES.items()}
    total = sum(lines.values())
    rooms: dict[str, int] = {}
    for name, count in lines.items():
        rooms[_folder(name)] = rooms.get(_folder(name), 0) + count
    assert total > 20_000 and len(rooms) > 10, "the walk missed the package"
    over = {room or "atlasmart_dagster": f"{count / total:.1%}" for room, count in rooms.items() if count > 0.15 * total}
    assert not over, f"rooms over 15 % of the package ({total} lines): {over}"
