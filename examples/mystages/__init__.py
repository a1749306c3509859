"""Example stages of a data team's own, run from a recipe (see examples/README.md)."""
