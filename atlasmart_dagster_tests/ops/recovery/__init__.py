"""Tests of recovery: backup, restore, verify, rollback, migration, maintenance."""
