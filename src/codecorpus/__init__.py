"""codecorpus: a deterministic, resumable code-pretraining corpus pipeline on Ray."""

__version__ = "0.1.0"
