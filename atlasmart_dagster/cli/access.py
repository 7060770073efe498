"""Commands for consumer access: query through the gateway, report the policy."""

from __future__ import annotations

import argparse
import os

from ..product.access.access_log import access_log
from ..product.access.gateway import (
    DEFAULT_MEMORY,
    DEFAULT_TIMEOUT_S,
    MAX_TIMEOUT_S,
    MEMORY_ENV,
    TIMEOUT_ENV,
    Gateway,
    QueryError,
    QueryLimits,
)
from ..product.access.policy import PRINCIPALS, ROLES, AccessDenied, matrix, validate_policy
from .context import CliContext
from .output import print_json, table, visible


def cmd_query(args: argparse.Namespace, ctx: CliContext) -> int:
    """Run one SELECT as a role or principal, seeing only what the access policy grants it."""
    limits = QueryLimits.from_settings(os.environ, timeout_s=args.timeout, memory=args.memory)  # UsageError: exit 2
    try:
        result = Gateway(ctx.platform, limits).query(args.who, args.sql)
    except (AccessDenied, QueryError) as exc:
        raise SystemExit(f"denied: {visible(exc)}" if isinstance(exc, AccessDenied) else f"error: {visible(exc)}") from None
    rows = result.to_pylist()
    if ctx.as_json:
        print_json(rows)
    else:
        print(table(result.column_names, [[r[c] for c in result.column_names] for r in rows]))
    return 0


def cmd_access(args: argparse.Namespace, ctx: CliContext) -> int:
    """Print the effective allow/deny matrix, permissions and principals as evidence."""
    grid = matrix()
    report = {
        "matrix": grid,
        "permissions": {r.name: sorted(r.permissions) for r in ROLES.values()},
        "writes": {r.name: list(r.writes) for r in ROLES.values()},
        "principals": [{"name": p.name, "kind": p.kind, "role": p.role, "credential_id": p.credential_id}
                       for p in PRINCIPALS.values()],
        "policy_problems": validate_policy(),
    }
    if args.log:
        report["access_log"] = access_log(ctx.platform.ledger)[-args.log:]
    if ctx.as_json:
        print_json(report)
        return 0
    roles = list(ROLES)
    print(table(["relation", *roles], [[rel, *(cells[r] for r in roles)] for rel, cells in grid.items()]))
    print()
    print(table(["role", "may also"], [[r, ", ".join(p) or "-"] for r, p in report["permissions"].items()]))
    print()
    print(table(["principal", "kind", "role", "credential"],
                [[p["name"], p["kind"], p["role"], p["credential_id"]] for p in report["principals"]]))
    print(f"\npolicy problems: {', '.join(report['policy_problems']) or 'none'}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("query", help=cmd_query.__doc__, description=cmd_query.__doc__)
    p.add_argument("--as", dest="who", required=True, help="role (bi_reader, finance_analyst, ...) or principal name")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help=f"stop the query after this long, up to {MAX_TIMEOUT_S:g} (default ${TIMEOUT_ENV} or "
                        f"{DEFAULT_TIMEOUT_S:g})")
    p.add_argument("--memory", metavar="SIZE",
                   help=f"memory the query may use, e.g. 512MB or 2GiB: its engine, values and result are held to it "
                        f"(default ${MEMORY_ENV} or {DEFAULT_MEMORY})")
    p.add_argument("sql", help="one SELECT statement")
    p.set_defaults(handler=cmd_query)
    p = sub.add_parser("access", help=cmd_access.__doc__, description=cmd_access.__doc__)
    p.add_argument("action", choices=["report"])
    p.add_argument("--log", type=int, default=0, help="also show the last N access decisions")
    p.set_defaults(handler=cmd_access)
