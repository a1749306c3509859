"""Deduplication: exact content-hash grouping (near-dup MinHash-LSH comes later)."""
