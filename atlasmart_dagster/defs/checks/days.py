"""Days in check descriptions: a list of days written as ranges that name no other day."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Iterable


def day_ranges(days: Iterable[str]) -> str:
    """``2026-09-17...2026-09-19, 2026-09-21``: consecutive days as one range, never a day not given.

    A row of the check history that says ``2026-09-17...2026-09-21`` then
    means every one of those days, so a withdrawn day in the middle splits it.
    """
    runs: list[list[str]] = []
    for day in sorted(set(days)):
        if runs and date.fromisoformat(day) - date.fromisoformat(runs[-1][-1]) == timedelta(days=1):
            runs[-1].append(day)
        else:
            runs.append([day])
    return ", ".join(r[0] if len(r) == 1 else f"{r[0]}...{r[-1]}" for r in runs)
