"""Every blocking check of the built graph has a case in test_blocking.py that fails it, and every case a check.

A blocking check nobody has seen fail is a green light nobody has tested: a
new blocking check fails this test until a fault that fails it is added to
``CASES``, and a case whose check is gone (renamed, moved, made non-blocking)
fails it too.
"""

import dagster as dg

from atlasmart_dagster_tests.defs.assets.test_blocking import CASES


def blocking_checks(defs: dg.Definitions) -> set[dg.AssetCheckKey]:
    graph = defs.resolve_asset_graph()
    return {key for key in graph.asset_check_keys if graph.get_check_spec(key).blocking}


def named(keys) -> list[str]:
    return sorted(f"{key.asset_key.to_user_string()}:{key.name}" for key in keys)


def test_every_blocking_check_has_exactly_one_tampering_case(env):
    blocking = blocking_checks(env.defs)
    assert blocking, "the built graph has no blocking check: the case table proves nothing"
    cased = [case.check for case in CASES]
    twice = {key for key in cased if cased.count(key) > 1}
    missing, stale = blocking - set(cased), set(cased) - blocking
    problems = [f"{what}: {', '.join(named(keys))}" for what, keys in (
        ("blocking checks without a case", missing),
        ("cases whose check is not a blocking check of the graph", stale),
        ("checks with more than one case", twice),
    ) if keys]
    assert not problems, "; ".join(problems)
