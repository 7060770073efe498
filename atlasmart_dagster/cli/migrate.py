"""The command that moves an embedded home up to a team deployment.

  atlasmart --home HOME migrate --to team --database-url URL --warehouse SHARED [--json]

The target comes from the arguments, else from $ATLASMART_DATABASE_URL and
$ATLASMART_WAREHOUSE; the source is the embedded home (--home, else
$ATLASMART_HOME, else ./.atlasmart), read only and kept as the fallback. A
target that already holds anything is refused (exit 1); missing or wrong
settings are a usage error (exit 2). After the copy the command verifies the
team deployment as `atlasmart verify` does and exits 1 if a certified
partition does not check out.
"""

from __future__ import annotations

import argparse

from .context import CliContext
from .output import print_json


def cmd_migrate(args: argparse.Namespace, ctx: CliContext) -> int:
    """Copy an embedded home (ledger, catalog, table files, raw batches) into an empty team deployment, then verify it.

    Snapshot ids, ledger ids and fingerprints are kept; the embedded home is only read. A deployment that already
    holds ledger rows, AtlasMart tables or files in its shared warehouse/ or raw/ is refused, never merged into.
    """
    from ..ops.recovery.migration import embedded_source, migrate_to_team, team_platform, team_target  # lazy
    from ..ops.recovery import verify  # lazy: loaded by its command only

    source = embedded_source(ctx.home)
    target = team_target(source, args.database_url, args.warehouse)
    report = migrate_to_team(source, target)
    checked = verify(team_platform(target, ctx.landing, ctx.clock))
    result = {**report, "verify": checked}
    if ctx.as_json:
        print_json(result)
    else:
        tables = report["tables"].values()
        print(f"migrated {report['source']} to the team deployment ({report['database']}, shared folder "
              f"{report['shared_folder']}): {len(report['tables'])} tables with "
              f"{sum(t['snapshots'] for t in tables)} snapshots and {sum(t['data_files'] for t in tables)} data files, "
              f"{report['raw_batches']} raw batches, {sum(report['ledger_rows'].values())} ledger rows")
        print(f"verify: {'ok' if checked['ok'] else 'PROBLEMS'} ({checked['checked']['certified_partitions']} "
              f"certified partitions)")
        for finding in checked["findings"]:
            print(f"  {finding['scope']:<9} {finding['kind']:<16} {finding['message']}")
        print(f"the embedded home {report['source']} is unchanged; use the team deployment with "
              f"ATLASMART_DATABASE_URL and ATLASMART_WAREHOUSE={report['shared_folder']}")
        print("the team's Dagster UI shows the migrated days as served (served_* assets) from certification_sensor's "
              "first tick (on by default); Dagster's run history stays with the embedded instance")
    return 0 if checked["certified_ok"] else 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("migrate", help=cmd_migrate.__doc__.splitlines()[0], description=cmd_migrate.__doc__)
    p.add_argument("--to", required=True, choices=["team"], help="the deployment to move up to")
    p.add_argument("--database-url", help="the team database, postgresql://... (default $ATLASMART_DATABASE_URL)")
    p.add_argument("--warehouse", help="the shared folder every worker mounts (default $ATLASMART_WAREHOUSE)")
    p.set_defaults(handler=cmd_migrate)
