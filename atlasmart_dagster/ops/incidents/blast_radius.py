"""Blast radius from the live Dagster asset graph: what is downstream, who owns it, who reads it.

From an asset (and a partition range) the radius is every downstream asset in
the graph: layers, the governed metric, certified marts, dashboards and
consumer groups, with their checks and owners. From a *source field* it
follows column lineage (``dagster/column_lineage`` metadata) first, so only
the columns built from that field, and the assets holding them, are in it;
consumers of an affected asset are in it whole.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterable

import dagster as dg

from ...defs.lineage import SOURCE

KIND_BY_GROUP = {
    "source": "source",
    "ingest": "raw layer",
    "staging": "staging layer",
    "facts": "fact table",
    "aggregates": "aggregate",
    "semantic": "governed metric",
    "marts": "certified mart",
    "dimensions": "dimension",
}


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

    def to_json(self) -> dict[str, Any]:
        return {
            "asset": self.asset,
            "kind": self.kind,
            "owners": self.owners,
            "description": self.description,
            "columns": self.columns,
            "checks": self.checks,
        }


@dataclass
class BlastRadius:
    origin: str
    partitions: list[str]
    affected: list[AffectedAsset]
    edges: list[tuple[str, str]]

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
            lines.append(f"  {a.kind:<16} {a.asset}{cols}  owners: {', '.join(a.owners) or '-'}")
            for check in a.checks:
                lines.append(f"  {'':<16}   check {check}")
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

    def affected(self, name: str, columns: Iterable[str] = ()) -> AffectedAsset:
        spec = self.specs[name]
        return AffectedAsset(name, _kind(spec), sorted(spec.owners), (spec.description or "").split("\n")[0],
                             sorted(columns), self.checks[name])


def _edges(g: LineageGraph, names: list[str]) -> list[tuple[str, str]]:
    inside = set(names)
    return [(a, c) for a in names for c in g.children[a] if c in inside]


def from_asset(defs: dg.Definitions, asset: str, partitions: list[str] | None = None) -> BlastRadius:
    g = LineageGraph(defs)
    if asset not in g.specs:
        raise KeyError(f"no asset {asset!r} in the code location")
    seen, queue = {asset}, deque([asset])
    while queue:
        current = queue.popleft()
        for child in g.children[current]:
            if child not in seen:
                seen.add(child)
                queue.append(child)
    order = [a for a in _topological(g) if a in seen]
    affected = [g.affected(a) for a in order]
    return BlastRadius(asset, sorted(partitions or []), affected, _edges(g, order))


def from_field(defs: dg.Definitions, source_field: str, partitions: list[str] | None = None) -> BlastRadius:
    """Follow column lineage from ``erp_order_lines.<source_field>``; whole assets past the last lineage."""
    g = LineageGraph(defs)
    lineage = {asset: g.column_lineage(asset) for asset in g.specs}
    downstream: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for asset in g.specs:
        for column, deps in lineage[asset].items():
            for dep in deps:
                downstream.setdefault(dep, []).append((asset, column))
    columns: dict[str, set[str]] = {SOURCE: {source_field}}
    queue = deque([(SOURCE, source_field)])
    while queue:
        for asset, column in downstream.get(queue.popleft(), []):
            if column not in columns.setdefault(asset, set()):
                columns[asset].add(column)
                queue.append((asset, column))
    # assets without column lineage (dashboards, consumer groups) read their parents whole
    topological = _topological(g)
    order = [a for a in topological if a in columns]
    whole: set[str] = set()
    for asset in topological:
        if asset in columns or asset in whole:
            for child in g.children[asset]:
                if child not in columns and not lineage[child]:
                    whole.add(child)
    order += [a for a in topological if a in whole and a not in columns]
    affected = [g.affected(a, columns.get(a, ())) for a in order]
    return BlastRadius(f"{SOURCE}.{source_field}", sorted(partitions or []), affected, _edges(g, order))


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
