"""Mixture plans and deterministic sampling of output sets."""
