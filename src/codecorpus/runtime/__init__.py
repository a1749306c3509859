"""The only package that imports ray: executor, shard IO, resume, stats, progress."""
