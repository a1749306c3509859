"""Mixture plans and deterministic sampling of output sets (issue 7)."""
