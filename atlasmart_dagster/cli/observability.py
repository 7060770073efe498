"""Commands for metrics: serve them, or write them as a textfile."""

from __future__ import annotations

import argparse
import time

from .context import CliContext


def cmd_metrics(args: argparse.Namespace, ctx: CliContext) -> int:
    """Prometheus metrics from the ledger: `serve` on 127.0.0.1, or `write` a textfile for node-exporter."""
    from ..ops.observability.prometheus import registry_for, write_textfile  # lazy: loaded by its command only

    if args.action == "write":
        path = args.out or str(ctx.platform.home.root / "metrics" / "atlasmart.prom")
        from pathlib import Path  # lazy: loaded by its command only

        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_textfile(ctx.platform, path)
        print(path)
        return 0
    from prometheus_client import start_http_server  # lazy: loaded by its command only

    server, thread = start_http_server(args.port, addr="127.0.0.1", registry=registry_for(ctx.platform))
    print(f"serving http://127.0.0.1:{server.server_port}/metrics", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.shutdown()
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("metrics", help=cmd_metrics.__doc__, description=cmd_metrics.__doc__)
    p.add_argument("action", choices=["serve", "write"])
    p.add_argument("--port", type=int, default=9464, help="serve: port on 127.0.0.1 (0 picks a free one)")
    p.add_argument("--out", help="write: textfile path (default <home>/metrics/atlasmart.prom)")
    p.set_defaults(handler=cmd_metrics)
