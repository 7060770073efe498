"""The ``atlasmart`` command line."""
