"""Least-privilege consumer access: the policy as code, and a gateway that enforces it by construction."""
