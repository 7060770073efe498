"""Benchmarking: a landing-zone generator, the pure-DuckDB reference, and the benchmark itself.

Not part of the default test run: ``atlasmart bench`` (one slow test runs
``--quick``). Results of the full benchmark are committed under ``bench/``.
"""
