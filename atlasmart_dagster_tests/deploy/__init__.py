"""Tests of the team deployment files under deploy/ and the packaged team instance config."""
