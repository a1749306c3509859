"""The audit report: HTML with inline charts, plus long-form Parquet/CSV tables."""
