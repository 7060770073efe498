"""State: where AtlasMart keeps things, with no product rules.

The home folder, the logical/system clock, the append-only ledger, the Iceberg
warehouse and its table schemas, the write-once raw store, the landing zone
reader, locks, the Dagster instance folder, and ``Platform``, which opens them
all for one home.
"""
