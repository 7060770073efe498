"""AtlasMart: a Dagster code location for certified daily sales."""

from .definitions import defs

__all__ = ["defs"]
