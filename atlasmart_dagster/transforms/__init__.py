"""Set-based SQL for each layer, free of Dagster so it can be tested and benchmarked alone.

Every ``*_sql`` function returns DuckDB SQL (one SELECT) over the relations
its arguments name, by default the upstream layers' table names; the caller
decides where it runs: the assets stream it to Parquet with ``COPY``, tests
and the benchmark read it as Arrow. ``run_gate`` and ``gate_tables`` run the
staging quality gate on a given connection. Nothing loops over rows in Python.
Each module is named after the asset layer in ``defs/assets/`` whose SQL it holds.
"""
