"""Contract approvals: which contract an owner approved for a batch, and field mappings as data.

A batch is read with the contract its manifest declares, unless the contract
owner approved something else for that batch: another contract version (the
compatibility mapping of a known schema change, ``approve``), or a field
mapping written as data (``approve_mapping``: ``qty`` is ``quantity``) on top
of the declared version, so a rename nobody foresaw needs no code change.
Approvals are append-only ledger records with who approved, on whose behalf,
why and for which incident; the newest approval of a batch wins. A contract
that requires approval is never applied without one.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from typing import Callable

from ..domain.contracts import CANONICAL_NAMES, CONTRACT_V1, CONTRACTS, SourceContract
from ..errors import ContractViolation
from ..store.clock import format_ts
from ..store.landing import Manifest
from ..store.ledger import Ledger
from ..store.ledger.engine import LedgerTable

CONTRACT_APPROVALS = LedgerTable(
    "contract_approvals",
    """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        batch_id TEXT NOT NULL,
        partition TEXT NOT NULL,
        contract_version TEXT NOT NULL,
        owner TEXT NOT NULL,
        approved_by TEXT NOT NULL,
        reason TEXT NOT NULL,
        incident_id TEXT,
        at TEXT NOT NULL
    """,
)


def _owned_contract(version: str, owner: str, approved_by: str, reason: str) -> SourceContract:
    """The contract ``version``, if ``owner`` owns it and the approval names a person and a reason."""
    contract = CONTRACTS.get(version)
    if contract is None:
        raise ContractViolation(f"contract {version!r} is unknown (known: {', '.join(CONTRACTS)})")
    if owner != contract.owner:
        raise ContractViolation(f"contract {version} is owned by {contract.owner!r}; {owner!r} cannot approve it")
    if not approved_by.strip() or not reason.strip():
        raise ContractViolation("an approval needs the approving person and a reason")
    return contract


def approve(
    ledger: Ledger,
    batch_id: str,
    partition: str,
    version: str,
    owner: str,
    approved_by: str,
    reason: str,
    at: datetime,
    incident_id: str | None = None,
) -> int:
    _owned_contract(version, owner, approved_by, reason)
    return ledger.engine.append(
        CONTRACT_APPROVALS,
        {
            "batch_id": batch_id,
            "partition": partition,
            "contract_version": version,
            "owner": owner,
            "approved_by": approved_by,
            "reason": reason,
            "incident_id": incident_id,
            "at": format_ts(at),
        },
    )


CONTRACT_MAPPINGS = LedgerTable(
    "contract_mappings",
    """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        batch_id TEXT NOT NULL,
        partition TEXT NOT NULL,
        base_version TEXT NOT NULL,
        renames_json TEXT NOT NULL,
        owner TEXT NOT NULL,
        approved_by TEXT NOT NULL,
        reason TEXT NOT NULL,
        incident_id TEXT,
        at TEXT NOT NULL
    """,
)


def approve_mapping(
    ledger: Ledger,
    batch_id: str,
    partition: str,
    base_version: str,
    renames: dict[str, str],
    owner: str,
    approved_by: str,
    reason: str,
    at: datetime,
    incident_id: str | None = None,
) -> int:
    """Read ``batch_id`` with ``base_version`` plus ``renames`` (source field -> canonical field)."""
    _owned_contract(base_version, owner, approved_by, reason)
    if not renames:
        raise ContractViolation("a mapping needs at least one rename (source=canonical)")
    unknown = sorted(c for c in renames.values() if c not in CANONICAL_NAMES)
    if unknown:
        raise ContractViolation(f"{', '.join(unknown)} is not a field of the contract ({', '.join(CANONICAL_NAMES)})")
    targets = list(renames.values())
    if len(set(targets)) != len(targets):
        raise ContractViolation("two source fields cannot map onto the same contract field")
    return ledger.engine.append(
        CONTRACT_MAPPINGS,
        {
            "batch_id": batch_id,
            "partition": partition,
            "base_version": base_version,
            "renames_json": json.dumps(renames, sort_keys=True),
            "owner": owner,
            "approved_by": approved_by,
            "reason": reason,
            "incident_id": incident_id,
            "at": format_ts(at),
        },
    )


def _mapped_contract(row: dict) -> SourceContract:
    base = CONTRACTS[row["base_version"]]
    renames = {**base.renames, **json.loads(row["renames_json"])}
    return replace(
        base,
        version=f"{base.version}+mapping-{row['id']}",
        description=f"{base.description} Mapped for batch {row['batch_id']} by {row['approved_by']}: {row['reason']}",
        renames=renames,
        requires_approval=False,
    )


def contract_of(version: str) -> SourceContract:
    """The contract a recorded version names (a mapping's version names its base: v1+mapping-3 -> v1)."""
    return CONTRACTS.get(version.split("+")[0], CONTRACT_V1)


def contract_of_day(ledger: Ledger, partition: str) -> SourceContract:
    """The contract of the day's newest batch: its thresholds and tolerances apply to the day."""
    batches = ledger.batches.list(partition)
    return contract_of(batches[-1]["contract_applied"]) if batches else CONTRACT_V1


def approvals(ledger: Ledger) -> list[dict]:
    """Every approval, oldest first."""
    return ledger.engine.select(CONTRACT_APPROVALS)


def resolver(ledger: Ledger) -> Callable[[Manifest], SourceContract | None]:
    """Contract for a manifest: the newest approval or mapping for its batch, else its declared version."""
    newest: dict[str, tuple[str, SourceContract]] = {}
    for row in approvals(ledger):
        newest[row["batch_id"]] = (row["at"], CONTRACTS[row["contract_version"]])
    for row in ledger.engine.select(CONTRACT_MAPPINGS):
        if row["batch_id"] not in newest or newest[row["batch_id"]][0] <= row["at"]:
            newest[row["batch_id"]] = (row["at"], _mapped_contract(row))

    def contract_for(manifest: Manifest) -> SourceContract | None:
        approved = newest.get(manifest.batch_id)
        if approved is not None:
            return approved[1]
        contract = CONTRACTS.get(manifest.schema_version)
        if contract is not None and contract.requires_approval:
            return None  # declared, but nobody approved it for this batch
        return contract

    return contract_for
