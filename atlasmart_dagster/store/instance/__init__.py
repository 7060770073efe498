"""The home's Dagster instance: its folder and dagster.yaml, and the pooled SQLite storage of the embedded one."""
