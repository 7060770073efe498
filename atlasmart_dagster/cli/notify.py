"""Commands for notification channels: send a test message, list what was delivered, deliver what is due.

The channels and routes are ``<home>/notifications.yaml`` or the file
``$ATLASMART_NOTIFICATIONS`` names (docs/notifications.md). ``test CHANNEL``
sends one test message now and prints it as it was sent (a PagerDuty test
triggers an ``info`` alert and resolves it at once); nothing is recorded.
``status`` lists each message's delivery per channel from the ledger: sent,
failed (with the error and the next attempt) or given up. ``deliver`` sends
what is due now, as the incident sensor does on every tick.

Exit codes as every ``atlasmart`` command: 0 done; 1 the test message or a
delivery failed (a failed delivery is recorded and retried by a later call);
2 the configuration is wrong or has no such channel, nothing was sent.
"""

from __future__ import annotations

import argparse

from ..errors import AtlasmartError
from .context import CliContext
from .output import print_json, short, table

ACTIONS = ("test", "status", "deliver")


class NotificationNotSent(AtlasmartError):
    """A test message the channel did not take (the command line exits 1)."""


def _config(ctx: CliContext, required: bool):
    from ..ops.response.notifications.channel_config import NotificationConfigError, config_path, load_config  # lazy

    config = load_config(ctx.platform.home)
    if config is None and required:
        raise NotificationConfigError(f"no notification channels: write {config_path(ctx.platform.home)} or set "
                                      f"$ATLASMART_NOTIFICATIONS (see docs/notifications.md)")
    return config


def cmd_notify(args: argparse.Namespace, ctx: CliContext) -> int:
    """Notification channels: send a test message (`test CHANNEL`), list deliveries (`status`), send what is due."""
    if args.action == "test":
        return _test(args, ctx)
    if args.action == "deliver":
        return _deliver(ctx)
    return _status(args, ctx)


def _test(args: argparse.Namespace, ctx: CliContext) -> int:
    from ..errors import UsageError  # local: loads DuckDB (cold start)
    from ..ops.response.notifications.channels import SendFailed  # lazy: loaded by its command only
    from ..ops.response.notifications.delivery import send_test

    if not args.channel:
        raise UsageError("notify test needs the channel to test (atlasmart notify status lists them)")
    config = _config(ctx, required=True)
    try:
        sent = send_test(ctx.platform, config, args.channel, to=args.to)
    except SendFailed as exc:
        raise NotificationNotSent(f"the test message over {args.channel} was not sent: {exc.reason}") from None
    channel = config.channels[args.channel]
    if ctx.as_json:
        print_json({"channel": channel.name, "kind": channel.kind, "sent": [s.body for s in sent]})
    else:
        print(f"sent a test message over {channel.name} ({channel.kind}, {channel.describe()['to']})"
              + (": triggered and resolved an info alert" if len(sent) > 1 else ""))
    return 0


def _deliver(ctx: CliContext) -> int:
    from ..ops.response.notifications.delivery import deliver_pending  # lazy: loaded by its command only

    config = _config(ctx, required=True)  # a wrong file is a usage error here, not a line in a report
    report = deliver_pending(ctx.platform, instance=ctx.instance, config=config)
    if ctx.as_json:
        print_json(report.to_json())
    else:
        print(report.line())
        for entry in report.failed + report.gave_up:
            print(f"  {entry['key']} over {entry['channel']}: {entry['error']}")
    return 1 if report.problem or report.failed or report.gave_up else 0


def _status(args: argparse.Namespace, ctx: CliContext) -> int:
    from ..store.ledger.notification_deliveries import OUTCOMES  # lazy: loaded by its command only

    config = _config(ctx, required=False)
    outcome = args.outcome.upper() if args.outcome else None
    if outcome and outcome not in OUTCOMES:
        from ..errors import UsageError  # local: loads DuckDB (cold start)

        raise UsageError(f"--outcome is one of {', '.join(o.lower() for o in OUTCOMES)}, not {args.outcome!r}")
    rows = [r for r in ctx.platform.ledger.notifications.latest(args.only_channel).values()
            if outcome is None or r["outcome"] == outcome]
    rows = sorted(rows, key=lambda r: r["id"])[-args.limit:]
    channels = [c.describe() for c in config.channels.values()] if config else []
    if ctx.as_json:
        print_json({"config": str(config.path) if config else None, "channels": channels, "deliveries": rows})
        return 0
    if config is None:
        print("no notification channels configured (see docs/notifications.md)")
    else:
        print(f"channels from {config.path}:")
        for c in channels:
            print(f"  {c['channel']:<20} {c['kind']:<10} {c['to']}")
    if not rows:
        print("no deliveries recorded")
        return 0
    print(table(["message", "channel", "outcome", "attempt", "at", "next attempt", "error"],
                [[r["message_key"], r["channel"], r["outcome"].lower(), r["attempt"], r["at"],
                  r["next_attempt_at"] or "", short(r["error"], 60)] for r in rows]))
    return 0


def _positive(text: str) -> int:
    """argparse ``type=``: a whole number above 0."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number above 0")
    return int(text)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("notify", help=cmd_notify.__doc__, description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=list(ACTIONS))
    p.add_argument("channel", nargs="?", help="test: the channel to send a test message over")
    p.add_argument("--to", help="test: the address an email channel's test goes to (default: the channel's to)")
    p.add_argument("--channel", dest="only_channel", metavar="CHANNEL", help="status: only this channel's deliveries")
    p.add_argument("--outcome", help="status: only deliveries whose latest attempt is sent, failed or gave_up")
    p.add_argument("--limit", type=_positive, default=50, help="status: the newest N deliveries (default 50)")
    p.set_defaults(handler=cmd_notify)
