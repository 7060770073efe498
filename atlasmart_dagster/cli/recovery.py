"""Commands for disaster recovery: backup, restore, relocate, verify, rollback."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import AtlasmartError
from .context import CliContext, sales_date
from .output import print_json, visible


def _backup_root(ctx: CliContext, given: str | None) -> Path:
    # Beside the home, never inside it: a restore moves the home's contents aside.
    return Path(given) if given else ctx.platform.home.root.parent / f"{ctx.platform.home.root.name}-backups"


def cmd_backup(args: argparse.Namespace, ctx: CliContext) -> int:
    """Back up the committed state of the home (catalog, table files, raw store, ledger), even while runs write."""
    from ..ops.recovery import backup  # lazy: loaded by its command only

    try:
        manifest = backup(ctx.platform, _backup_root(ctx, args.to))
    except AtlasmartError as exc:
        raise SystemExit(f"error: {visible(exc)}") from None
    summary = {"backup_id": manifest["backup_id"], "path": manifest["path"], "files": len(manifest["files"]),
               "tables": manifest["tables"]}
    print_json(summary) if ctx.as_json else print(
        f"backup {manifest['backup_id']} at {manifest['path']}: {len(manifest['files'])} files, "
        f"{len(manifest['tables'])} tables")
    return 0


def _verify_anew(ctx: CliContext) -> dict:
    """``verify`` on the home opened anew: the command's platform was opened on what restore or relocate replaced."""
    from ..ops.recovery import verify  # lazy: loaded by its command only
    from ..store.platform import Platform  # lazy: loaded by its command only

    return verify(Platform.open(home=ctx.platform.home.root, landing=ctx.platform.landing_root, clock=ctx.clock))


def cmd_restore(args: argparse.Namespace, ctx: CliContext) -> int:
    """Restore a backup into its home, all or nothing (staged and checked beside it first), then verify.

    The previous home is kept beside it as <home>.damaged-<time>; a failure before the swap leaves it untouched.
    """
    from ..ops.recovery import restore  # lazy: loaded by its command only

    try:
        report = restore(Path(args.backup), ctx.platform.home, ctx.platform.clock.now(), relocate=args.relocate)
    except AtlasmartError as exc:
        raise SystemExit(f"error: {visible(exc)}") from None
    checked = _verify_anew(ctx)
    result = {**report, "verify": checked}
    if ctx.as_json:
        print_json(result)
    else:
        print(f"restored {report['backup_id']} ({report['restored_files']} files)"
              + (f", relocated from {report['relocated_from']}" if report["relocated_from"] else "")
              + (f"; previous contents kept in {report['aside']}" if report["aside"] else ""))
        if report["left_aside"]:
            print(f"note: {', '.join(report['left_aside'])} could not be moved back and stay in {report['aside']}")
        print(f"verify: {'ok' if checked['ok'] else 'PROBLEMS'}")
        _print_findings(checked)
    return 0 if checked["certified_ok"] else 1


def cmd_relocate(args: argparse.Namespace, ctx: CliContext) -> int:
    """Make a home copied or moved to this path (cp -a) work here: rewrite its tables' metadata, then verify.

    Iceberg metadata holds absolute paths, so a copied home is refused until then. The copy's catalog, manifest
    lists and manifests are rewritten for this path under the catalog's lock (all or nothing); the home it was
    copied from is not touched.
    """
    from ..ops.recovery.relocation import relocate_home  # lazy: loaded by its command only

    try:
        report = relocate_home(ctx.platform.home)
    except AtlasmartError as exc:
        raise SystemExit(f"error: {visible(exc)}") from None
    checked = _verify_anew(ctx)
    if ctx.as_json:
        print_json({**report, "verify": checked})
    else:
        print(f"relocated {report['tables']} tables from {report['from']} to {report['to']} "
              f"({report['files_rewritten']} metadata files rewritten)" if report["relocated"] else
              f"{report['to']} names its own path already: nothing to relocate")
        print(f"verify: {'ok' if checked['ok'] else 'PROBLEMS'}")
        _print_findings(checked)
    return 0 if checked["certified_ok"] else 1


def cmd_verify(args: argparse.Namespace, ctx: CliContext) -> int:
    """Recompute controls and fingerprints of every certified partition and compare them with the ledger."""
    from ..ops.recovery import verify  # lazy: loaded by its command only

    result = verify(ctx.platform)
    if ctx.as_json:
        print_json(result)
    else:
        print(f"checked {result['checked']['certified_partitions']} certified partitions, "
              f"{result['checked']['raw_batches']} raw batches, {result['checked']['days']} days: "
              f"{'ok' if result['ok'] else 'PROBLEMS'}")
        _print_findings(result)
        for finding in result.get("not_built", []):  # reported, never a failure
            print(f"  {finding['scope']:<9} {finding['kind']:<16} {finding['message']}")
    return 0 if result["ok"] else 1


def _print_findings(result: dict) -> None:
    for finding in result["findings"]:
        print(f"  {finding['scope']:<9} {finding['kind']:<16} {finding['message']}")


def cmd_rollback(args: argparse.Namespace, ctx: CliContext) -> int:
    """Put one partition of one table back to the version its last certification was built on."""
    from ..ops.recovery import rollback_partition  # lazy: loaded by its command only

    try:
        result = rollback_partition(ctx.platform, args.asset, args.partition, args.actor, args.reason)
    except AtlasmartError as exc:
        raise SystemExit(f"error: {visible(exc)}") from None
    print_json(result) if ctx.as_json else print(
        f"{args.asset} {args.partition} rolled back to snapshot {result['to_snapshot_id']} ({result['rows']} rows)")
    return 0


def cmd_maintain(args: argparse.Namespace, ctx: CliContext) -> int:
    """Expire Iceberg snapshots nothing relies on any more (keeps commits fast); optionally delete orphan files."""
    from ..ops.recovery.maintenance import expire_snapshots, remove_orphan_files  # lazy: loaded by its command only

    report = {"expired": expire_snapshots(ctx.platform, keep_last=args.keep_last)}
    if args.remove_orphans:
        report["orphans_removed"] = remove_orphan_files(ctx.platform)
    if ctx.as_json:
        print_json(report)
    else:
        for table, figures in report["expired"].items():
            orphans = report.get("orphans_removed", {}).get(table)
            print(f"{table:<26} {figures['snapshots']:>4} snapshots, expired {figures['expired']}"
                  + (f", {orphans} orphan files removed" if orphans is not None else ""))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("backup", help=cmd_backup.__doc__, description=cmd_backup.__doc__)
    p.add_argument("--to", help="folder for backups (default: <home>-backups beside the home)")
    p.set_defaults(handler=cmd_backup)
    p = sub.add_parser("restore", help=cmd_restore.__doc__, description=cmd_restore.__doc__)
    p.add_argument("backup", help="a backup folder (<backups>/BK-0001)")
    p.add_argument("--relocate", action="store_true",
                   help="restore a backup taken at another home path into this one, its metadata rewritten for it")
    p.set_defaults(handler=cmd_restore)
    p = sub.add_parser("relocate", help=cmd_relocate.__doc__.splitlines()[0], description=cmd_relocate.__doc__)
    p.set_defaults(handler=cmd_relocate)
    p = sub.add_parser("verify", help=cmd_verify.__doc__, description=cmd_verify.__doc__)
    p.set_defaults(handler=cmd_verify)
    p = sub.add_parser("maintain", help=cmd_maintain.__doc__, description=cmd_maintain.__doc__)
    p.add_argument("--keep-last", type=int, default=20, help="newest snapshots kept per table besides protected ones")
    p.add_argument("--remove-orphans", action="store_true", help="delete data files no snapshot references (>1 h old)")
    p.set_defaults(handler=cmd_maintain)
    p = sub.add_parser("rollback", help=cmd_rollback.__doc__, description=cmd_rollback.__doc__)
    p.add_argument("--asset", required=True, help="a certified asset, fact_sales or agg_daily_sales")
    p.add_argument("--partition", required=True, type=sales_date, help="the day, YYYY-MM-DD")
    p.add_argument("--actor", required=True, help="who rolls back (recorded)")
    p.add_argument("--reason", required=True)
    p.set_defaults(handler=cmd_rollback)
