"""AtlasMart: a Dagster code location for certified daily sales.

``defs`` is loaded on first access (PEP 562), so ``dagster ... -m
atlasmart_dagster`` finds it while the ``atlasmart`` command line and plain
library imports do not pay for building the asset graph.
"""


def __getattr__(name: str):
    if name == "defs":
        from .definitions import defs

        return defs
    raise AttributeError(f"module 'atlasmart_dagster' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), "defs"])
