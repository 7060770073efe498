"""Commands for incidents, blast radius, contract approvals and dashboards.

Exit codes as every ``atlasmart`` command: 0 done; 1 refused or failed (a
repair whose run failed or whose certification the gate refused for a reason
other than the incident's own hold, a verification that did not pass, a
refused step); 2 wrong arguments (a missing id or text, an unknown incident,
a bad range), nothing done.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import AtlasmartError, UsageError
from .context import CliContext, iso_date, sales_date
from .output import print_json, table, visible


def _workflow(ctx: CliContext):
    from ..ops.response.incidents.workflow import IncidentWorkflow  # lazy: loaded by its command only

    return IncidentWorkflow(ctx.platform, ctx.defs, ctx.instance, ctx.log_level)


def _partitions(args) -> list[str] | None:
    if not getattr(args, "start", None):
        return None
    import dagster as dg  # local: only a scope needs Dagster (cold start)

    from ..defs.partitions import daily_partitions  # lazy: loaded by its command only

    return list(daily_partitions.get_partition_keys_in_range(dg.PartitionKeyRange(args.start, args.end or args.start)))


def _show(ctx: CliContext, incident) -> None:
    data = incident.to_json() | {"fingerprint": incident.fingerprint()}
    if ctx.as_json:
        print_json(data)
        return
    print(f"{incident.id}  [{incident.status}]  {visible(incident.title)}")
    print(f"days: {', '.join(incident.partitions) or '-'}   assets: {', '.join(incident.assets) or '-'}")
    print(f"fingerprint: {data['fingerprint']}\n\ntimeline:")
    for e in incident.events:
        print(f"  {e['at']}  {visible(e['actor']):<28} {e['kind']:<17} {visible(e['message'])}")
    if data["triage"]:
        print(f"\ntriage: {data['triage']['verdict']} ({visible(data['triage']['note'])})")
    for action in data["postmortem_actions"]:
        print(f"action {action['action_id']}: {visible(action['owner'])} by {visible(action['due'])}: "
              f"{visible(action['gap'])} [{'done: ' + visible(action['evidence']) if action['done'] else 'open'}]")


def cmd_incident(args: argparse.Namespace, ctx: CliContext) -> int:
    """Work incidents: list, show, note, triage, contain, notify, repair, verify, resolve, postmortem, report, detect."""
    # lazy: loaded by its command only
    from ..ops.response.incidents.detection import consumer_report, detect
    from ..ops.response.incidents.workflow import kept_versions, refused_beyond_hold

    wf = _workflow(ctx)
    action = args.action
    try:
        if action == "list":
            incidents = [i for i in wf.store.all() if args.all or i.status != "resolved"]
            if ctx.as_json:
                print_json([i.to_json(with_events=False) for i in incidents])
            else:
                print(table(["id", "status", "days", "opened", "title"],
                            [[i.id, i.status, ",".join(i.partitions), i.opened_at, i.title] for i in incidents]))
            return 0
        if action == "detect":
            touched = detect(ctx.platform, ctx.instance, actor=args.actor)
            _show_in_ui(ctx, *touched)
            print_json(touched) if ctx.as_json else print("incidents opened or updated: " + (", ".join(touched) or "none"))
            return 0
        if action == "report":
            if not (args.text or "").strip():
                raise UsageError("incident report needs the consumer's words (--text)")
            if args.asset and args.asset not in _asset_names(ctx):
                raise UsageError(f"incident report: {args.asset!r} is not an asset of the code location")
            incident_id = consumer_report(ctx.platform, args.actor, args.text, args.asset, args.partition)
            _show_in_ui(ctx, incident_id)
            print_json({"incident": incident_id}) if ctx.as_json else print(f"reported as {incident_id}")
            return 0
        if not args.id:
            raise UsageError(f"incident {action} needs an incident id (atlasmart incident list)")
        if action == "show":
            _show(ctx, wf.get(args.id))
        elif action == "note":
            wf.note(args.id, args.actor, args.text)
        elif action == "triage":
            result = wf.identify(args.id, args.actor, origin_asset=args.origin_asset, origin_field=args.origin_field)
            _show_in_ui(ctx, args.id)
            if ctx.as_json:
                print_json({"triage": result["triage"], "blast_radius": result["blast_radius"].to_json()})
            else:
                t = result["triage"]
                print(f"verdict: {t['verdict']} ({visible(t['note'])})")
                for mechanism, evidence in t["evidence"].items():
                    for item in evidence:
                        print(f"  {mechanism}: {visible(item)}")
                for day, due in t.get("due", {}).items():
                    print(f"  {day}: {due['state']} ({visible(due['detail'])})")
                for day, served in t.get("served", {}).items():
                    print(f"  {day}: {visible(served)}")
                for lines in t.get("dashboards", {}).values():
                    for line in lines:
                        print(f"  {visible(line)}")
                print(result["blast_radius"].render_text())
        elif action == "contain":
            assets = args.assets.split(",") if args.assets else None
            data = wf.contain(args.id, args.actor, assets, _partitions(args), withdraw=not args.no_withdraw,
                              hold=not args.no_hold, withdraw_served=args.withdraw_served)
            _show_in_ui(ctx, args.id)
            scope = f"{', '.join(data['assets'])} {data['partitions'][0]}..{data['partitions'][-1]}"
            print_json(data) if ctx.as_json else print(
                f"withdrew {len(data['withdrawn'])} certifications; "
                + "".join(f"{line}; " for line in kept_versions(data["kept"]))
                + (f"certification held for {scope}" if data["hold_id"] is not None
                   else f"certification NOT held for {scope} (correct late data is certified as it arrives)"))
        elif action == "notify":
            notice = wf.notify(args.id, args.actor, stage=args.stage, summary=args.summary, repair=args.repair,
                               next_update=args.next_update, restated=args.restated,
                               out_dir=Path(args.out) if args.out else None)
            _show_in_ui(ctx, args.id)
            print_json(notice) if ctx.as_json else print(visible(wf.get(args.id).latest("notice")["data"]["markdown"], lines=True))
        elif action == "repair":
            outcome = wf.repair(args.id, args.actor, args.start, args.end or args.start, args.reason,
                                start_at=args.start_at, include_current=args.include_current)
            _show_in_ui(ctx, args.id)
            refused = refused_beyond_hold(outcome.decisions, args.id)
            if ctx.as_json:
                print_json(outcome.to_json() | {"refused_beyond_hold": refused})
            else:
                verdict = "succeeded" if outcome.success else "FAILED: " + "; ".join(outcome.failures)
                print(f"repair run {outcome.run_id} {verdict}; certification stays held until "
                      "`atlasmart incident verify`")
                for d in refused:
                    print(f"refused {d['asset']} {d['partition']}: {'; '.join(d['reasons'])}")
            return 0 if outcome.success and not refused else 1
        elif action == "verify":
            data = wf.verify(args.id, args.actor)
            _show_in_ui(ctx, args.id)
            if ctx.as_json:
                print_json(data)
            elif data["passed"]:
                print(f"verification passed: canonical controls {data['canonical_total']}; hold released, scope "
                      "re-certified")
            else:
                print("verification FAILED, certification stays held; missing:")
                print("\n".join(f"  - {item}" for item in data["missing"]))
            return 0 if data["passed"] else 1
        elif action == "resolve":
            wf.resolve(args.id, args.actor, args.summary or "resolved")
            _show_in_ui(ctx, args.id)
            print(f"{args.id} resolved")
        elif action == "postmortem":
            if args.complete:
                wf.complete_action(args.id, args.complete, args.actor, args.evidence or "")
                print(f"{visible(args.complete)} done")
            else:
                action_id = wf.add_action(args.id, args.actor, args.owner or "", args.due or "", args.gap or "",
                                          args.verification or "")
                print_json({"action_id": action_id}) if ctx.as_json else print(f"added {action_id}")
        return 0
    except UsageError:
        raise  # wrong arguments: `atlasmart` prints the line and exits 2
    except AtlasmartError as exc:
        raise SystemExit(f"error: {visible(exc)}") from None  # refused: exit 1


def _show_in_ui(ctx: CliContext, *incident_ids: str | None) -> None:
    """Show the incidents a command changed on the assets they affect in the Dagster UI (incident_sensor does too)."""
    from ..ops.response.incidents.ui_reporting import show_incidents_in_ui  # lazy: loaded by its command only

    ids = [i for i in incident_ids if i]
    if ids:
        show_incidents_in_ui(ctx.instance, ctx.platform, ids)


def _asset_names(ctx: CliContext) -> set[str]:
    return {spec.key.to_user_string() for spec in ctx.defs.resolve_all_asset_specs()}


def cmd_blast_radius(args: argparse.Namespace, ctx: CliContext) -> int:
    """Everything downstream of an asset or a source field: assets, checks, marts, dashboards, consumers, owners."""
    from ..ops.response.incidents import blast_radius  # lazy: loaded by its command only

    if bool(args.asset) == bool(args.field):
        raise SystemExit("give exactly one of --asset or --field")
    partitions = _partitions(args) or []
    try:
        br = (blast_radius.from_asset(ctx.defs, args.asset, partitions) if args.asset
              else blast_radius.from_field(ctx.defs, args.field, partitions))
    except AtlasmartError as exc:
        raise SystemExit(f"error: {visible(exc)}") from None
    if ctx.as_json:
        print_json(br.to_json())
    elif args.mermaid:
        print(br.mermaid())
    else:
        print(br.render_text())
    return 0


def _check_batch_of_day(ctx: CliContext, batch_id: str, partition: str) -> None:
    """Refuse (exit 2, nothing recorded) an approval for a batch the day neither admitted nor has in its landing
    folder: it would wait in the ledger for a batch that may never come, and apply to whatever arrives under that
    id, unreviewed."""
    from ..store.landing import named_batch_id  # lazy: loaded by its command only

    platform = ctx.platform
    admitted = {b["batch_id"] for b in platform.ledger.batches.list(partition)}
    landed = named_batch_id(platform.landing.read_manifest_bytes(partition) or b"")
    if batch_id not in admitted and batch_id != landed:
        known = sorted(admitted | ({landed} if landed else set()))
        raise UsageError(f"{partition} has no batch {batch_id}, nothing was recorded (its batches: "
                         f"{', '.join(known) or 'none'}; `atlasmart batch list` lists the admitted ones)")


def cmd_contract(args: argparse.Namespace, ctx: CliContext) -> int:
    """Approve a source contract version for a batch (the owner's compatibility decision)."""
    from ..product.contract_approvals import approvals, approve  # lazy: loaded by its command only

    if args.action == "list":
        print_json(approvals(ctx.platform.ledger))
        return 0
    _check_batch_of_day(ctx, args.batch, args.partition)
    try:
        approve(ctx.platform.ledger, args.batch, args.partition, args.version, args.owner, args.approved_by,
                args.reason, ctx.platform.clock.now(), incident_id=args.incident)
    except AtlasmartError as exc:
        raise SystemExit(f"error: {visible(exc)}") from None
    print(f"batch {visible(args.batch)} ({args.partition}) will be read with contract {visible(args.version)}")
    return 0


def cmd_dashboard(args: argparse.Namespace, ctx: CliContext) -> int:
    """Show, deploy or restore a dashboard definition; `check` runs the golden cross-checks."""
    # lazy: loaded by its command only
    from ..product.dashboards import DEFAULT_DASHBOARDS, Dashboard, current, deploy, tile_values

    ledger = ctx.platform.ledger
    if args.action == "show":
        dashboard = current(ledger, args.dashboard)
        values = tile_values(ctx.platform, dashboard)
        data = dashboard.to_json() | {"values": {k: {d: format(v, "f") for d, v in by.items()} for k, by in values.items()},
                                      "compiled_from_governed": dashboard.compiled_from_governed}
        print_json(data)
        return 0
    if args.action == "deploy":
        dashboard = Dashboard.from_json(json.loads(Path(args.file).read_text()))
    elif args.action == "restore":
        dashboard = DEFAULT_DASHBOARDS[args.dashboard]
    else:  # check
        from ..ops.runs.chains import run_golden_checks  # lazy: loaded by its command only

        _, decisions = run_golden_checks(ctx.defs, ctx.instance, ctx.platform, args.actor, ctx.log_level)
        print_json([d.to_json() for d in decisions])
        return 0
    deploy(ledger, dashboard, args.actor, args.reason or args.action, ctx.platform.clock.now())
    print(f"deployed {visible(dashboard.asset)} v{visible(dashboard.version)} (compiled from governed metric: {dashboard.compiled_from_governed})")
    for tile in dashboard.hand_written_governed_tiles:
        print(f"  NOT governed: tile {visible(repr(tile.key))} ({visible(tile.title)}) presents {tile.presents_governed_metric} but is not "
              "compiled from the governed metric; the golden check compares it with the governed metric")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("incident", help=cmd_incident.__doc__, description=cmd_incident.__doc__)
    p.add_argument("action", choices=["list", "show", "note", "triage", "contain", "notify", "repair", "verify",
                                      "resolve", "postmortem", "report", "detect"])
    p.add_argument("id", nargs="?", help="incident id (INC-0001)")
    p.add_argument("--actor", default="operator", help="who acts (recorded)")
    p.add_argument("--text", help="note or consumer report text")
    p.add_argument("--asset", help="asset a consumer report is about")
    p.add_argument("--partition", type=sales_date, help="day a consumer report is about")
    p.add_argument("--all", action="store_true", help="list resolved incidents too")
    p.add_argument("--origin-asset", help="triage: blast radius from this asset")
    p.add_argument("--origin-field", help="triage: blast radius from this source field")
    p.add_argument("--assets", help="contain: comma-separated assets (default: the certified products)")
    p.add_argument("--from", dest="start", type=sales_date, help="first day of the scope")
    p.add_argument("--to", dest="end", type=sales_date, help="last day of the scope")
    p.add_argument("--no-withdraw", action="store_true", help="contain: hold certification without withdrawing")
    p.add_argument("--withdraw-served", action="store_true",
                   help="contain: withdraw the served version even when the evidence is only about newer data that "
                        "was never certified (by default consumers keep that last known good version)")
    p.add_argument("--no-hold", action="store_true",
                   help="contain: do not hold certification (a late source: correct data is certified as it arrives)")
    p.add_argument("--stage", default="update", choices=["initial", "update", "resolved"], help="notify: the notice's stage")
    p.add_argument("--summary", help="notify/resolve: what to say")
    p.add_argument("--repair", default="under investigation", help="notify: the repair under way")
    p.add_argument("--next-update", default="when the next step completes", help="notify: what triggers the next update")
    p.add_argument("--restated", action="store_true", help="notify: figures will be restated")
    p.add_argument("--out", help="notify: folder for the notice's .md and .json")
    p.add_argument("--start-at", help="repair: rebuild from this asset down")
    p.add_argument("--reason", help="repair: why")
    p.add_argument("--include-current", action="store_true", help="repair: the scope includes the current day")
    p.add_argument("--owner", help="postmortem action owner")
    p.add_argument("--due", type=iso_date, help="postmortem action due date (YYYY-MM-DD)")
    p.add_argument("--gap", help="postmortem: the detected gap the action closes")
    p.add_argument("--verification", help="postmortem: how completion is proven")
    p.add_argument("--complete", help="postmortem: mark this action id done")
    p.add_argument("--evidence", help="postmortem: evidence that the action is done")
    p.set_defaults(handler=cmd_incident)

    p = sub.add_parser("blast-radius", help=cmd_blast_radius.__doc__, description=cmd_blast_radius.__doc__)
    p.add_argument("--asset", help="start from this asset")
    p.add_argument("--field", help="start from this source field: an ERP order line field (line_amount_usd) or a "
                                   "reference field (email, dim_customer.region); column lineage, the whole day for "
                                   "a required field, and dimension references")
    p.add_argument("--from", dest="start", type=sales_date, help="first affected day (YYYY-MM-DD)")
    p.add_argument("--to", dest="end", type=sales_date, help="last affected day (YYYY-MM-DD)")
    p.add_argument("--mermaid", action="store_true", help="print a Mermaid flowchart")
    p.set_defaults(handler=cmd_blast_radius)

    p = sub.add_parser("contract", help=cmd_contract.__doc__, description=cmd_contract.__doc__)
    p.add_argument("action", choices=["approve", "list"])
    p.add_argument("--batch")
    p.add_argument("--partition", type=sales_date, help="the batch's sales_date (YYYY-MM-DD)")
    p.add_argument("--version")
    p.add_argument("--owner", help="the contract's owning team (must match the contract)")
    p.add_argument("--approved-by", help="the person approving")
    p.add_argument("--reason")
    p.add_argument("--incident")
    p.set_defaults(handler=cmd_contract)

    p = sub.add_parser("dashboard", help=cmd_dashboard.__doc__, description=cmd_dashboard.__doc__)
    p.add_argument("action", choices=["show", "deploy", "restore", "check"])
    p.add_argument("dashboard", nargs="?", default="dashboard_executive_revenue")
    p.add_argument("--file", help="deploy: dashboard definition JSON")
    p.add_argument("--actor", default="operator")
    p.add_argument("--reason")
    p.set_defaults(handler=cmd_dashboard)
