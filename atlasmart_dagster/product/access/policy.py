"""The access policy: roles, what each may read, what each may do, and who holds which role.

Reads are granted per relation, with the *version* a role sees. A grant is
certified unless it says ``PUBLISHED``: consumers read each day at its served
certification, and a day that was never certified is absent. A certified read
of a relation that is not itself a certified product (``fact_sales`` for
finance analysts) names the product it is read ``through``: each day of it at
the snapshot that product's served certification reconciled against. Only
three kinds of grant say ``PUBLISHED``, on purpose: the engineering roles
(``etl_service`` builds what is not certified yet, ``incident_responder``
diagnoses it), and the dimensions, which are reference data that no
certification covers. A grant can narrow a relation to some columns, which
is how customer PII (``full_name``, ``email``) stays out of every role:
the gateway never loads a column a role was not granted.

Principals are people or services, never both, each with its own credential
id; a role is held by principals, never shared credentials.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from ...errors import AtlasmartError
from ..pii import PII_COLUMNS
from ...store.tables import (
    CERTIFIED_ASSETS,
    DIM_CUSTOMER,
    DIM_PRODUCT,
    ENGINEERING_TABLES,
    FACT_SALES,
    MART_FINANCE_DAILY_SALES,
    REGISTRY,
)

CERTIFIED = "certified"  # newest certified version of each partition
PUBLISHED = "published"  # the table as published now

# The layers, as the table registry says them (live: a new certified mart is in the consumer layer).
CONSUMER_LAYER = CERTIFIED_ASSETS
ENGINEERING_LAYERS = ENGINEERING_TABLES
ALL_RELATIONS = REGISTRY.names(lambda spec: True)
NON_PII_CUSTOMER_COLUMNS = ("customer_id", "region")

WITHDRAW_CERTIFICATION = "withdraw_certification"
HOLD_CERTIFICATION = "hold_certification"


class AccessDenied(AtlasmartError):
    """The principal may not do this. The message names no data it may not see."""


@dataclass(frozen=True)
class Grant:
    relation: str
    version: str = CERTIFIED
    columns: tuple[str, ...] | None = None  # None: every column
    through: str | None = None  # the certified product whose certification pins a certified non-product read

    def describe(self) -> str:
        via = f" via {self.through}" if self.through else ""
        cols = f" ({', '.join(self.columns)} only)" if self.columns else ""
        return f"{self.version}{via}{cols}"


@dataclass(frozen=True)
class Role:
    name: str
    description: str
    grants: tuple[Grant, ...]
    permissions: frozenset[str] = frozenset()
    writes: tuple[str, ...] = ()

    @property
    def readable(self) -> dict[str, Grant]:
        return {g.relation: g for g in self.grants}


@dataclass(frozen=True)
class Principal:
    name: str
    kind: str  # "human" | "service"
    role: str
    credential_id: str


def build_roles() -> dict[str, Role]:
    """The roles, with the grants of each layer as the registry says it now."""
    consumer_grants = tuple(Grant(r, CERTIFIED) for r in CONSUMER_LAYER)
    engineering = tuple(ENGINEERING_LAYERS)
    dimensions = (Grant(DIM_PRODUCT.name, PUBLISHED), Grant(DIM_CUSTOMER.name, PUBLISHED, NON_PII_CUSTOMER_COLUMNS))
    roles = (
        Role(
            "bi_reader",
            "Dashboards and business readers: the governed metric and the certified marts, certified versions only.",
            consumer_grants,
        ),
        Role(
            "finance_analyst",
            "Finance analysts: the consumer layer plus sales facts and product/customer attributes, never PII.",
            consumer_grants + (Grant(FACT_SALES.name, CERTIFIED, through=MART_FINANCE_DAILY_SALES.name),) + dimensions,
        ),
        Role(
            "etl_service",
            "The pipeline's service identity: reads and writes the engineering layers; cannot read the consumer layer.",
            tuple(Grant(r, PUBLISHED) for r in engineering) + dimensions,
            writes=engineering + (DIM_CUSTOMER.name, DIM_PRODUCT.name),
        ),
        Role(
            "incident_responder",
            "On-call responders: read everything except PII to diagnose; may withdraw and hold certification.",
            tuple(Grant(r, PUBLISHED) for r in engineering + tuple(CONSUMER_LAYER)) + dimensions,
            permissions=frozenset({WITHDRAW_CERTIFICATION, HOLD_CERTIFICATION}),
        ),
    )
    return {role.name: role for role in roles}


class _Roles(Mapping[str, Role]):
    """The roles, rebuilt when the registry's tables change, so a table added to a layer is granted as its layer is."""

    def __init__(self) -> None:
        self._tables: tuple[str, ...] | None = None
        self._roles: dict[str, Role] = {}

    def _current(self) -> dict[str, Role]:
        tables = tuple(ALL_RELATIONS)
        if tables != self._tables:
            self._roles, self._tables = build_roles(), tables
        return self._roles

    def __getitem__(self, name: str) -> Role:
        return self._current()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())


ROLES: Mapping[str, Role] = _Roles()

PRINCIPALS: dict[str, Principal] = {
    p.name: p
    for p in (
        Principal("bi-dashboards", "service", "bi_reader", "cred-svc-bi-dashboards"),
        Principal("cfo@atlasmart.example", "human", "bi_reader", "cred-usr-cfo"),
        Principal("ana.finance@atlasmart.example", "human", "finance_analyst", "cred-usr-ana"),
        Principal("dagster-etl", "service", "etl_service", "cred-svc-dagster-etl"),
        Principal("oncall@atlasmart.example", "human", "incident_responder", "cred-usr-oncall"),
    )
}



def principal_for(name: str) -> Principal:
    """A principal by name; a role name resolves to the role's service (or only) principal."""
    if name in PRINCIPALS:
        return PRINCIPALS[name]
    if name in ROLES:
        holders = sorted((p for p in PRINCIPALS.values() if p.role == name), key=lambda p: (p.kind != "service", p.name))
        return holders[0]
    raise AccessDenied(f"unknown principal or role {name!r}")


def require(principal_name: str, permission: str) -> Principal:
    """The principal, if its role has ``permission``; otherwise AccessDenied."""
    try:
        principal = principal_for(principal_name)
    except AccessDenied:
        raise AccessDenied(f"{principal_name!r} is not a known principal; {permission} needs an authorised one") from None
    if permission not in ROLES[principal.role].permissions:
        raise AccessDenied(f"{principal.name} ({principal.role}) may not {permission.replace('_', ' ')}")
    return principal


def validate_policy(roles: Mapping[str, Role] = ROLES, principals: dict[str, Principal] = PRINCIPALS) -> list[str]:
    """Problems with the policy itself (shared credentials, unknown roles, PII granted, unpinned certified reads)."""
    problems = []
    credentials: dict[str, str] = {}
    for p in principals.values():
        if p.kind not in ("human", "service"):
            problems.append(f"{p.name}: kind must be human or service")
        if p.role not in roles:
            problems.append(f"{p.name}: unknown role {p.role}")
        if p.credential_id in credentials:
            problems.append(f"{p.name} shares credential {p.credential_id} with {credentials[p.credential_id]}")
        credentials[p.credential_id] = p.name
    for role in roles.values():
        for grant in role.grants:
            if grant.relation == DIM_CUSTOMER.name and (grant.columns is None or set(grant.columns) & set(PII_COLUMNS)):
                problems.append(f"{role.name} is granted customer PII")
            if grant.version == CERTIFIED and grant.relation not in CERTIFIED_ASSETS and grant.through not in CERTIFIED_ASSETS:
                problems.append(f"{role.name} reads {grant.relation} certified but names no certified product to read it through")
    return problems


def matrix() -> dict[str, dict[str, str]]:
    """relation -> role -> 'allow: <version/columns>' | 'deny'."""
    return {
        relation: {
            role.name: (f"allow: {role.readable[relation].describe()}" if relation in role.readable else "deny")
            for role in ROLES.values()
        }
        for relation in ALL_RELATIONS
    }
