"""Asset checks that compare two assets (checks on one asset live with that asset)."""
