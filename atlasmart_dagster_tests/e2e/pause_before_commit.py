"""Run ``atlasmart`` with the next commit to one table paused, so a crash test can kill it mid-commit.

    python -m atlasmart_dagster_tests.e2e.pause_before_commit TABLE SECONDS [atlasmart arguments...]

Registers a hook on the warehouse's commit seam (``COMMIT_HOOKS``): once the
table's data files are written, it writes the marker
``<home>/locks/paused-before-commit-<TABLE>`` and sleeps. Test-only: the
product never pauses.
"""

import os
import sys
import time

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.store import warehouse


def pause(table: str, seconds: float):
    def hook(home, name: str) -> None:
        if name != table:
            return
        marker = home.locks_dir / f"paused-before-commit-{table}"
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(str(os.getpid()))
        time.sleep(seconds)

    return hook


if __name__ == "__main__":
    table, seconds, *argv = sys.argv[1:]
    warehouse.COMMIT_HOOKS.append(pause(table, float(seconds)))
    sys.exit(main(argv))
