"""Packing tokenized documents into fixed-length sequences with Best-Fit-Decreasing.

``bfd`` is the bin-packing algorithm alone (lengths in, bins of indices out);
``pack`` splits over-long documents, runs BFD and gathers the tokens and the
segment table that a launcher turns into ``cu_seqlens``.
"""
