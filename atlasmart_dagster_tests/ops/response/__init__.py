"""Tests of incident response: incidents and notifications."""
