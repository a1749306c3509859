"""The floor every part stands on: atomic writes, Parquet I/O, the S3 mirror, fault points.

Imports no ray and no part of the pipeline, so a stage, a writer of manifests or the
report can use it without reaching into the runtime.
"""
