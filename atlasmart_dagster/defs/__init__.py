"""Dagster definitions: partitions, resources, assets, checks, jobs, schedules and sensors.

``atlasmart_dagster/definitions.py`` puts them together into the code location.
"""
