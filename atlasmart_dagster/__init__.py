"""AtlasMart: a Dagster code location for certified daily sales.

The code location's ``Definitions`` are built in ``definitions.py`` and are
reachable from the package as ``code_location``, loaded on first access
(PEP 562): ``dagster ... -m atlasmart_dagster`` finds them (Dagster looks for a
``Definitions`` among the package's members), while the ``atlasmart`` command
line and plain library imports do not pay for building the asset graph. (The
name ``defs`` belongs to the ``defs/`` folder of Dagster definitions.)
"""


def __getattr__(name: str):
    if name == "code_location":
        from .definitions import defs

        return defs
    raise AttributeError(f"module 'atlasmart_dagster' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), "code_location"])
