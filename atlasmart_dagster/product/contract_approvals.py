"""Contract approvals: which contract version an owner approved for a batch.

A batch is read with the contract its manifest declares, unless the contract
owner approved another version for that batch (the compatibility mapping of a
schema change). Approvals are append-only ledger records with who approved,
on whose behalf, why and for which incident; the newest approval of a batch
wins. A contract that requires approval is never applied without one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Callable

from ..domain.contracts import CONTRACTS, SourceContract
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
    contract = CONTRACTS.get(version)
    if contract is None:
        raise ContractViolation(f"contract {version!r} is unknown (known: {', '.join(CONTRACTS)})")
    if owner != contract.owner:
        raise ContractViolation(f"contract {version} is owned by {contract.owner!r}; {owner!r} cannot approve it")
    if not approved_by.strip() or not reason.strip():
        raise ContractViolation("an approval needs the approving person and a reason")
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


def approvals(ledger: Ledger) -> list[dict]:
    """Every approval, oldest first."""
    return ledger.engine.select(CONTRACT_APPROVALS)


def resolver(ledger: Ledger) -> Callable[[Manifest], SourceContract | None]:
    """Contract for a manifest: the newest approval for its batch, else its declared version."""
    approved = {row["batch_id"]: row["contract_version"] for row in approvals(ledger)}

    def contract_for(manifest: Manifest) -> SourceContract | None:
        version = approved.get(manifest.batch_id)
        if version is not None:
            return CONTRACTS[version]
        contract = CONTRACTS.get(manifest.schema_version)
        if contract is not None and contract.requires_approval:
            return None  # declared, but nobody approved it for this batch
        return contract

    return contract_for
