"""Write-audit-publish in Iceberg itself: a ``certified`` branch that holds what consumers are served.

``main`` is what runs build: every build, held, anomalous, failed or not yet
certified, lands there first (write), the checks and the certification gate
judge it (audit), and the ledger records the decision. This module then
*publishes* the decision in the table format's own terms, so any engine that
reads the ``certified`` ref (Trino, Spark, DuckDB, pyiceberg, polars) reads
exactly what ``atlasmart query`` serves, without the product's code:

- on every certified product of the registry, and on the fact read *through*
  a product (``THROUGH``), the ``certified`` branch holds, for every day, the
  rows of the version served now (``DayStates``: the newest certification no
  withdrawal names). A day never certified, or withdrawn with nothing older,
  has no rows there;
- it is written without copying data: a publish commit references the data
  files ``main`` committed at each day's certified snapshot (see
  ``Warehouse.publish_branch``);
- one commit per table per change of the served state, covering every day
  that changed, with summary properties that say what it holds
  (``atlasmart.days``, ``atlasmart.versions``, ``atlasmart.fingerprints``,
  ``atlasmart.certification-ids``, ``atlasmart.served-digest``); the table
  property ``atlasmart.certified.index`` is the whole branch's index (day ->
  version, fingerprint, certification id, snapshot id), set in the same
  commit;
- every certified (day, version) of a product is also a tag,
  ``certified-<day>-v<version>``, on the snapshot it was certified at (the
  documented lookup for an older version).

``publish_certified`` is convergence, not a log replay: it compares the served
state with the branch's index and commits only the difference, so calling it
again is free, and a crash between a ledger decision and its publish is
repaired by the next call (every certification, the certification sensor's
every tick). The ledger decides first; the branch follows.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Any, Iterable

from ..errors import AtlasmartError
from ..store.ledger.day_states import DayStates
from ..store.platform import Platform
from ..store.tables import CERTIFIED_ASSETS, CERTIFIED_MARTS, FACTS, REGISTRY, TABLES_BY_NAME, TableSpec

BRANCH = "certified"
INDEX_PROPERTY = "atlasmart.certified.index"
DIGEST_PROPERTY = "atlasmart.served-digest"
# Tables that are not products but that a role reads certified, each day at the build its product's
# certification pinned (product/access/policy.py: fact_sales through the finance mart).
THROUGH = REGISTRY.names(lambda s: s.layer == FACTS and s.pinned)


def tag_name(day: str, version: int) -> str:
    return f"{BRANCH}-{day}-v{version}"


@dataclass(frozen=True)
class Target:
    """A table that carries the branch, and the product whose serving decides each of its days."""

    spec: TableSpec
    product: str

    @property
    def through(self) -> str | None:
        return None if self.product == self.spec.name else self.product


def targets() -> list[Target]:
    """Every certified product (by itself) and every ``THROUGH`` table (through the first certified mart)."""
    out = [Target(TABLES_BY_NAME[name], name) for name in CERTIFIED_ASSETS]
    if CERTIFIED_MARTS:
        out += [Target(TABLES_BY_NAME[name], CERTIFIED_MARTS[0]) for name in THROUGH]
    return out


def served_index(states: DayStates, target: Target) -> dict[str, dict[str, Any]]:
    """Day -> what the branch must hold for it (only days served now, with a readable snapshot)."""
    index: dict[str, dict[str, Any]] = {}
    for day, served in states.served_map(target.product).items():
        cert = served.certification
        if target.through is None:
            snapshot_id, fingerprint = cert.snapshot_id, cert.fingerprint
        else:
            pinned = states.pinned_build(target.spec.name, cert)
            if pinned is None:
                continue
            snapshot_id, fingerprint = pinned.snapshot_id, pinned.fingerprint
        if snapshot_id is None:
            continue
        index[day] = {"version": served.version, "certification_id": cert.id, "snapshot_id": snapshot_id,
                      "fingerprint": fingerprint, "certified_at": served.certified_at}
        if target.through is not None:
            index[day]["through"] = target.through
    return index


def _encode(index: dict[str, dict[str, Any]]) -> str:
    return json.dumps(index, sort_keys=True, separators=(",", ":"))


def digest(index: dict[str, dict[str, Any]]) -> str:
    return hashlib.sha256(_encode(index).encode()).hexdigest()


def published(platform: Platform, spec: TableSpec) -> tuple[int | None, dict[str, dict[str, Any]] | None]:
    """The branch head and what it holds by its index ((None, None): no branch, or no table)."""
    head, _, held = _published(platform, spec)
    return head, held


def _published(platform: Platform, spec: TableSpec) -> tuple[int | None, frozenset[int], dict[str, dict[str, Any]] | None]:
    """``published`` and the snapshot ids the table still has."""
    head, text, kept = platform.warehouse.ref_state(spec, BRANCH, INDEX_PROPERTY)
    if head is None:
        return None, kept, None
    return head, kept, (json.loads(text) if text else {})


def _tags(states: DayStates, target: Target) -> dict[str, int]:
    if target.through is not None:
        return {}
    return {tag_name(day, v.version): v.certification.snapshot_id
            for day, versions in states.versions_map(target.spec.name).items() for v in versions
            if v.certification.snapshot_id is not None}


def _joined(changed: list[str], index: dict[str, dict[str, Any]], key: str) -> str:
    return ",".join(f"{day}={index[day][key]}" for day in changed if index[day].get(key) is not None)


def publish_certified(
    platform: Platform, tables: Iterable[str] | None = None, states: DayStates | None = None
) -> dict[str, dict[str, Any]]:
    """Bring each target's ``certified`` branch in line with the served state; returns what changed per table.

    ``states`` is the caller's fresh read of the ledger (read here when None).
    A table whose branch already holds the served state is not committed to.
    """
    wanted = set(tables) if tables is not None else None
    chosen = [t for t in targets() if wanted is None or t.spec.name in wanted]
    if not chosen:
        return {}
    if states is None:
        states = platform.ledger.partitions.states(None, sorted({n for t in chosen for n in (t.spec.name, t.product)}))
    report: dict[str, dict[str, Any]] = {}
    for target in chosen:
        spec = target.spec
        index = served_index(states, target)
        _, held = published(platform, spec)
        if held is None and not index:
            continue  # nothing served yet, and no branch to empty
        if held is not None and _encode(held) == _encode(index):
            continue
        held = held or {}
        changed = sorted(day for day in index if held.get(day) != index[day])
        removed = sorted(day for day in held if day not in index)
        sources = {day: index[day]["snapshot_id"] for day in changed} | {day: None for day in removed}
        snapshot_properties = {
            "served-digest": digest(index),
            "days": ",".join(changed),
            "removed-days": ",".join(removed),
            "versions": _joined(changed, index, "version"),
            "certification-ids": _joined(changed, index, "certification_id"),
            "fingerprints": _joined(changed, index, "fingerprint"),
            "source-snapshots": _joined(changed, index, "snapshot_id"),
            "days-served": str(len(index)),
        }
        if target.through is not None:
            snapshot_properties["through"] = target.through
        snapshot_id = platform.warehouse.publish_branch(
            spec, BRANCH, sources, table_properties={INDEX_PROPERTY: _encode(index), DIGEST_PROPERTY: digest(index)},
            snapshot_properties=snapshot_properties, tags=_tags(states, target),
        )
        report[spec.name] = {"snapshot_id": snapshot_id, "days": changed, "removed_days": removed}
    return report


def converge(platform: Platform, states: DayStates | None = None) -> str | None:
    """``publish_certified`` after a decision: a failure is told (and returned), never raised.

    ``states``: the caller's read of the ledger, when nothing was recorded since (read here when None).

    The ledger's decision stands whatever happens to its publication; a branch
    left behind (a catalog outage, a snapshot gone) is repaired by the next
    call, and no reader inside the product reads a branch that disagrees with
    the ledger (``branch_agrees``).
    """
    try:
        publish_certified(platform, states=states)
    except AtlasmartError as exc:
        logging.getLogger(__name__).warning("the certified branch was not published (it converges on the next "
                                            "certification or sensor tick): %s", exc)
        return str(exc)
    return None


def branch_agrees(platform: Platform, spec: TableSpec, index: dict[str, dict[str, Any]],
                  days: Iterable[str] | None = None) -> int | None:
    """The branch head's snapshot id if the branch holds exactly ``index`` for ``days`` (all when None), else None.

    What a reader inside the product asks before reading the branch instead of
    each day at its own snapshot: a branch behind the ledger (a decision whose
    publish has not run yet) is never read. Nor is it while a certified
    snapshot it stands for is gone from the table (expired behind
    maintenance's back): the reader then goes to that snapshot and is refused
    with its name, rather than served by a branch that hides the loss.
    """
    head, kept, held = _published(platform, spec)
    if head is None:
        return None
    wanted = list(index) if days is None else list(days)
    if any(index[d].get("snapshot_id") not in kept for d in wanted if d in index and index[d].get("snapshot_id")):
        return None
    if days is None:
        return head if _encode(held) == _encode(index) else None
    return head if all(held.get(d) == index.get(d) for d in days) else None
