"""Set-based SQL for each layer, free of Dagster so it can be tested and benchmarked alone.

Every function here takes a DuckDB connection on which the upstream relation
is registered under its table name and returns an Arrow table shaped like the
layer's ``TableSpec``. Nothing loops over rows in Python.
"""
