"""docs/ui.md names every check a user sees on a ``served_*`` asset, on the assets it is on, with what its states mean.

The checks are read from the code location itself (the asset graph of
``atlasmart_dagster.definitions``), not from a list kept beside the docs, so
a check added to a served asset fails this test until its row is written. The
table is the one under "## Checks on a served asset": its first cell names
one or more checks (`name`), its second the assets they are on (every
`served_*`, or the assets by name), the next ones what each state means.

As in ``test_docs.py``, the check is a function of the page's text, and a
second test feeds it the real page with a row taken out, a check renamed and
an asset left out, and sees each fail.
"""

from __future__ import annotations

import re
from collections import defaultdict

from atlasmart_dagster.definitions import defs
from atlasmart_dagster.defs.assets.served import SERVED_ASSETS, SERVED_PREFIX
from atlasmart_dagster_tests.test_docs import DOCS, table_after

UI_PAGE = DOCS / "ui.md"
CHECKS_HEADING = "## Checks on a served asset"
EVERY_SERVED = f"every `{SERVED_PREFIX}*`"
NAME = re.compile(r"`([a-z0-9_*]+)`")


def served_checks() -> dict[str, set[str]]:
    """Each check on a served asset, with the served assets it is on (from the code location's asset graph)."""
    on: dict[str, set[str]] = defaultdict(set)
    graph = defs.resolve_asset_graph()
    for key in graph.asset_check_keys:
        asset = key.asset_key.to_user_string()
        if asset in SERVED_ASSETS:
            on[key.name].add(asset)
    return dict(on)


def documented_checks(page: str) -> dict[str, set[str]]:
    """Each check the page's table names, with the assets its row says it is on; a row without states fails."""
    documented: dict[str, set[str]] = defaultdict(set)
    for cells in table_after(page, CHECKS_HEADING):
        checks, where, *states = cells
        names = NAME.findall(checks)
        assert names, f"a row must name its checks as `name`, not {checks!r}"
        assert states and states[0], f"row {checks}: what Passed means is missing"
        assert any(s not in ("", "—") for s in states[1:]), f"row {checks}: what a failure means is missing"
        assets = set(SERVED_ASSETS) if where == EVERY_SERVED else set(NAME.findall(where))
        for name in names:
            documented[name] |= assets
    return dict(documented)


def check_doc_problems(page: str, checks: dict[str, set[str]]) -> dict[str, list[str]]:
    """What the page gets wrong: checks it does not name, assets it leaves out, checks or assets it invents."""
    documented = documented_checks(page)
    problems: dict[str, list[str]] = {"missing": [], "assets_left_out": [], "invented": []}
    for name, assets in sorted(checks.items()):
        if name not in documented:
            problems["missing"].append(name)
        elif assets - documented[name]:
            problems["assets_left_out"] += [f"{name} on {a}" for a in sorted(assets - documented[name])]
    for name, assets in sorted(documented.items()):
        extra = assets - checks.get(name, set())
        problems["invented"] += [f"{name} on {a}" for a in sorted(extra)]
    return problems


def test_docs_ui_names_every_check_on_a_served_asset_and_only_those():
    checks = served_checks()
    # the reading itself: the headline and the incidents on every served asset, the SLOs on the marts
    assert checks["certification_state"] == set(SERVED_ASSETS) == checks["open_incidents"]
    assert checks["slo_freshness"] == {"served_mart_finance_daily_sales", "served_mart_executive_revenue"}
    assert check_doc_problems(UI_PAGE.read_text(), checks) == {"missing": [], "assets_left_out": [], "invented": []}


def test_no_check_on_a_served_asset_blocks_as_the_page_says():
    graph = defs.resolve_asset_graph()
    blocking = [str(k) for k in graph.asset_check_keys
                if k.asset_key.to_user_string() in SERVED_ASSETS and graph.get_check_spec(k).blocking]
    assert "None of them blocks anything" in UI_PAGE.read_text()
    assert blocking == []


def test_the_served_check_doc_check_sees_a_row_taken_out_a_renamed_check_and_an_asset_left_out():
    page, checks = UI_PAGE.read_text(), served_checks()
    row = next(line for line in page.splitlines() if line.startswith("| `open_incidents` |"))
    assert check_doc_problems(page.replace(row + "\n", ""), checks)["missing"] == ["open_incidents"]
    renamed = check_doc_problems(page.replace("| `open_incidents` |", "| `open_incident` |"), checks)
    assert renamed["missing"] == ["open_incidents"]
    assert renamed["invented"] == [f"open_incident on {a}" for a in sorted(SERVED_ASSETS)]
    narrowed = page.replace(row, row.replace(EVERY_SERVED, "`served_metric_gross_revenue`"))
    assert check_doc_problems(narrowed, checks)["assets_left_out"] == [
        "open_incidents on served_mart_executive_revenue", "open_incidents on served_mart_finance_daily_sales"]
    slo = next(line for line in page.splitlines() if line.startswith("| `slo_freshness`"))
    widened = page.replace(slo, slo.replace("`served_mart_executive_revenue` |", "`served_mart_executive_revenue`, "
                                                                              "`served_metric_gross_revenue` |"))
    assert "slo_freshness on served_metric_gross_revenue" in check_doc_problems(widened, checks)["invented"]
