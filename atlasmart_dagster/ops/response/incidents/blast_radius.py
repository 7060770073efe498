"""Blast radius from the live Dagster asset graph: what is downstream, who owns it, who reads it.

From an asset (and a partition range) the radius is every downstream asset in
the graph: layers, the governed metric, certified marts, dashboards and
consumer groups, with their checks and owners. From a *source field* (an ERP
order line field, or a field of a reference extract such as
``dim_customer.email``) it follows column lineage (``dagster/column_lineage``)
for the columns built from the field, takes the whole day's chain when the
field is required by the source contract (a broken required field stops the
batch), and follows the references between facts and dimensions. Consumers
of an affected asset are in it whole, and the roles of the access policy that
may read the affected columns are listed as its readers. An unknown field is
an error, never an empty radius.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterable

import dagster as dg

from ....defs.lineage import SOURCE
from ....domain.contracts import CANONICAL_FIELDS, CANONICAL_NAMES
from ....store.tables import TABLES_BY_NAME, TableSpec
from ....product.access.policy import PRINCIPALS, ROLES
from ....store.ledger.incidents import IncidentError

KIND_BY_GROUP = {
    "source": "source",
    "ingest": "raw layer",
    "staging": "staging layer",
    "facts": "fact table",
    "aggregates": "aggregate",
    "semantic": "governed metric",
    "marts": "certified mart",
    "served": "served state",
    "dimensions": "dimension",
}


# Why an asset is in a field's radius.
VALUE = "values built from the field"
WHOLE_DAY = "the whole day stops (required field)"
REFERENCE = "linked by the dimension key"
READS_AFFECTED = "reads an affected asset"
DOWNSTREAM = "downstream"


def _kind(spec: dg.AssetSpec) -> str:
    name = spec.key.to_user_string()
    if name.startswith("dashboard_"):
        return "dashboard"
    if name.startswith("consumer_group_"):
        return "consumer group"
    return KIND_BY_GROUP.get(spec.group_name or "", "asset")


@dataclass
class AffectedAsset:
    asset: str
    kind: str
    owners: list[str]
    description: str
    columns: list[str] = field(default_factory=list)  # affected columns, when known from column lineage
    checks: list[str] = field(default_factory=list)
    impact: list[str] = field(default_factory=list)  # why it is in the radius

    def to_json(self) -> dict[str, Any]:
        return {
            "asset": self.asset,
            "kind": self.kind,
            "owners": self.owners,
            "description": self.description,
            "columns": self.columns,
            "checks": self.checks,
            "impact": self.impact,
        }


@dataclass
class BlastRadius:
    origin: str
    partitions: list[str]
    affected: list[AffectedAsset]
    edges: list[tuple[str, str]]
    readers: list[dict[str, Any]] = field(default_factory=list)  # roles that may read what is affected

    def of_kind(self, *kinds: str) -> list[AffectedAsset]:
        return [a for a in self.affected if a.kind in kinds]

    @property
    def owners(self) -> list[str]:
        return sorted({o for a in self.affected for o in a.owners})

    def to_json(self) -> dict[str, Any]:
        return {
            "origin": self.origin,
            "partitions": self.partitions,
            "assets": [a.to_json() for a in self.affected],
            "marts": [a.asset for a in self.of_kind("certified mart")],
            "dashboards": [a.asset for a in self.of_kind("dashboard")],
            "consumer_groups": [a.asset for a in self.of_kind("consumer group")],
            "checks": sorted({c for a in self.affected for c in a.checks}),
            "owners": self.owners,
            "readers": self.readers,
            "mermaid": self.mermaid(),
        }

    def mermaid(self) -> str:
        """A Mermaid flowchart of the affected part of the graph, for notices."""
        shape = {"dashboard": ('[/"', '"/]'), "consumer group": ('(["', '"])'), "certified mart": ('[["', '"]]'),
                 "governed metric": ('{{"', '"}}')}
        lines = ["flowchart LR"]
        ids = {a.asset: f"n{i}" for i, a in enumerate(self.affected)}
        for a in self.affected:
            left, right = shape.get(a.kind, ('["', '"]'))
            cols = f"<br/>{', '.join(a.columns[:4])}{' …' if len(a.columns) > 4 else ''}" if a.columns else ""
            lines.append(f"  {ids[a.asset]}{left}{a.asset}{cols}{right}")
        for up, down in self.edges:
            lines.append(f"  {ids[up]} --> {ids[down]}")
        lines.append("  classDef origin stroke:#d33,stroke-width:3px;")
        if self.affected:
            lines.append(f"  class {ids[self.affected[0].asset]} origin;")
        return "\n".join(lines)

    def render_text(self) -> str:
        lines = [f"Blast radius of {self.origin}" + (f" for {_span(self.partitions)}" if self.partitions else "")]
        for a in self.affected:
            cols = f" [{', '.join(a.columns)}]" if a.columns else ""
            why = f"  ({'; '.join(a.impact)})" if a.impact else ""
            lines.append(f"  {a.kind:<16} {a.asset}{cols}  owners: {', '.join(a.owners) or '-'}{why}")
            for check in a.checks:
                lines.append(f"  {'':<16}   check {check}")
        for r in self.readers:
            cols = f" ({', '.join(r['columns'])})" if r["columns"] else ""
            lines.append(f"  {'reader':<16} {r['role']} reads {r['relation']}{cols}: {', '.join(r['principals']) or '-'}")
        if not self.readers:
            lines.append(f"  {'reader':<16} none: no role may read what is affected")
        lines.append(f"  owners to notify: {', '.join(self.owners)}")
        return "\n".join(lines)


def _span(partitions: list[str]) -> str:
    if not partitions:
        return ""
    return partitions[0] if len(partitions) == 1 else f"{partitions[0]}..{partitions[-1]}"


class LineageGraph:
    """What the blast radius needs from a Definitions object."""

    def __init__(self, defs: dg.Definitions):
        self.graph = defs.resolve_asset_graph()
        self.specs = {s.key.to_user_string(): s for s in defs.resolve_all_asset_specs()}
        self.children = {name: sorted(c.to_user_string() for c in self.graph.get(dg.AssetKey(name)).child_keys)
                         for name in self.specs}
        self.checks = {name: sorted(k.name for k in self.graph.get(dg.AssetKey(name)).check_keys)
                       for name in self.specs}

    def column_lineage(self, asset: str) -> dict[str, list[tuple[str, str]]]:
        value = self.specs[asset].metadata.get("dagster/column_lineage")
        if value is None:
            return {}
        deps = getattr(value, "deps_by_column", None) or getattr(value, "value").deps_by_column
        return {col: [(d.asset_key.to_user_string(), d.column_name) for d in ds] for col, ds in deps.items()}

    def affected(self, name: str, columns: Iterable[str] = (), impact: Iterable[str] = ()) -> AffectedAsset:
        spec = self.specs[name]
        return AffectedAsset(name, _kind(spec), sorted(spec.owners), (spec.description or "").split("\n")[0],
                             sorted(columns), self.checks[name], list(impact))


def readers_of(affected: Iterable[AffectedAsset]) -> list[dict[str, Any]]:
    """Roles of the access policy that may read what is affected (the affected columns, when a grant narrows them)."""
    out = []
    for a in affected:
        for role in ROLES.values():
            grant = role.readable.get(a.asset)
            if grant is None:
                continue
            columns = sorted(set(a.columns) & set(grant.columns)) if grant.columns and a.columns else list(a.columns)
            whole = not a.columns or any(i != VALUE and i != REFERENCE for i in a.impact)
            if grant.columns and a.columns and not columns and not whole:
                continue  # the role may not read the affected columns (e.g. customer PII)
            out.append({"relation": a.asset, "role": role.name, "columns": columns,
                        "principals": sorted(p.name for p in PRINCIPALS.values() if p.role == role.name)})
    return out


def _edges(g: LineageGraph, names: list[str]) -> list[tuple[str, str]]:
    inside = set(names)
    return [(a, c) for a in names for c in g.children[a] if c in inside]


def from_asset(defs: dg.Definitions, asset: str, partitions: list[str] | None = None) -> BlastRadius:
    g = LineageGraph(defs)
    if asset not in g.specs:
        raise IncidentError(f"no asset {asset!r} in the code location (known: {', '.join(sorted(g.specs))})")
    seen = _downstream_of(g, asset)
    order = [a for a in _topological(g) if a in seen]
    affected = [g.affected(a, impact=[DOWNSTREAM] if a != asset else []) for a in order]
    return BlastRadius(asset, sorted(partitions or []), affected, _edges(g, order), readers_of(affected))


def _dimensions(g: LineageGraph) -> dict[str, TableSpec]:
    """The reference dimensions in the graph, with their table specs (columns and key)."""
    return {name: TABLES_BY_NAME[name] for name, spec in g.specs.items()
            if spec.group_name == "dimensions" and name in TABLES_BY_NAME}


def source_fields(defs: dg.Definitions) -> dict[str, tuple[str, ...]]:
    """Every field a blast radius can start from: the ERP order line fields and each reference dimension's fields."""
    g = LineageGraph(defs)
    return {SOURCE: CANONICAL_NAMES, **{name: spec.column_names for name, spec in _dimensions(g).items()}}


def _origins(defs: dg.Definitions, source_field: str) -> list[tuple[str, str]]:
    """(source, field) pairs named by ``source_field`` (``field`` or ``source.field``); an unknown name is an error."""
    known = source_fields(defs)
    source, _, name = source_field.rpartition(".")
    found = [(s, name) for s, fields in known.items() if (not source or s == source) and name in fields]
    if not found:
        listing = "; ".join(f"{s}: {', '.join(fields)}" for s, fields in known.items())
        raise IncidentError(f"unknown source field {source_field!r}: known fields are {listing}")
    return found


def from_field(defs: dg.Definitions, source_field: str, partitions: list[str] | None = None) -> BlastRadius:
    """Everything a broken source field reaches: its value lineage, the whole day when it is required, its references.

    * **value lineage**: the columns computed from the field, following
      ``dagster/column_lineage``; assets without column lineage (dashboards,
      consumer groups) that read an affected asset are affected whole;
    * **whole day**: a *required* order line field that is missing or broken
      stops the batch (contract gate, quality gate), so every product of the
      day is unavailable: every asset downstream of the source is in it;
    * **references**: a dimension's key carried by the facts links the two
      (a broken ``customer_id`` breaks the facts' link to ``dim_customer``), and
      a field of a reference extract reaches its dimension; a dimension's
      consumers are its graph children and the roles that may read the field.
    """
    g = LineageGraph(defs)
    origins = _origins(defs, source_field)
    lineage = {asset: g.column_lineage(asset) for asset in g.specs}
    downstream: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for asset in g.specs:
        for column, deps in lineage[asset].items():
            for dep in deps:
                downstream.setdefault(dep, []).append((asset, column))
    columns: dict[str, set[str]] = {}
    impact: dict[str, set[str]] = {}

    def reach(asset: str, why: str, column: str | None = None) -> None:
        impact.setdefault(asset, set()).add(why)
        cols = columns.setdefault(asset, set())
        if column:
            cols.add(column)

    dimensions = _dimensions(g)
    required = {f.name for f in CANONICAL_FIELDS if f.required}
    for source, name in origins:
        reach(source, VALUE, name)
        queue = deque([(source, name)])
        while queue:
            for asset, column in downstream.get(queue.popleft(), []):
                if column not in columns.get(asset, set()):
                    reach(asset, VALUE, column)
                    queue.append((asset, column))
        if source == SOURCE and name in required:
            for asset in _downstream_of(g, SOURCE):
                reach(asset, WHOLE_DAY)
    # references between the facts and the dimensions, by the dimension's key
    for dim, spec in dimensions.items():
        key = spec.grain[0]
        facts = [a for a in g.specs if _kind(g.specs[a]) == "fact table" and key in lineage[a]]
        if any(key in columns.get(a, set()) for a in facts):
            reach(dim, REFERENCE, key)
        if key in columns.get(dim, set()) and any(source == dim for source, _ in origins):
            for fact in facts:
                reach(fact, REFERENCE, key)
    # assets without column lineage (dashboards, consumer groups) read their parents whole
    topological = _topological(g)
    for asset in topological:
        if asset in impact:
            for child in g.children[asset]:
                if not lineage[child] and child not in impact:
                    reach(child, READS_AFFECTED)
    order = [a for a in topological if a in impact]
    affected = [g.affected(a, columns.get(a, ()), sorted(impact[a])) for a in order]
    origin = ", ".join(f"{source}.{name}" for source, name in origins)
    return BlastRadius(origin, sorted(partitions or []), affected, _edges(g, order), readers_of(affected))


def _downstream_of(g: LineageGraph, asset: str) -> set[str]:
    seen, queue = {asset}, deque([asset])
    while queue:
        for child in g.children[queue.popleft()]:
            if child not in seen:
                seen.add(child)
                queue.append(child)
    return seen


def _topological(g: LineageGraph) -> list[str]:
    parents = {name: 0 for name in g.specs}
    for name in g.specs:
        for child in g.children[name]:
            parents[child] += 1
    ready = deque(sorted(n for n, c in parents.items() if c == 0))
    order = []
    while ready:
        node = ready.popleft()
        order.append(node)
        for child in g.children[node]:
            parents[child] -= 1
            if parents[child] == 0:
                ready.append(child)
    return order
