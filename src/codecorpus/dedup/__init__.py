"""Deduplication: exact content-hash groups, MinHash-LSH near duplicates, repository forks (``spec.py``: the phases)."""
