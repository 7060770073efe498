"""The data product's vocabulary, pure definitions with no I/O: the source contract, the control tuple, the governed metric.

Everything else (SQL, storage, rules, Dagster) is written in these terms, so
this layer imports nothing of the package but ``errors``.
"""
