"""Tests of running the chain: queue, lanes, backfills."""
