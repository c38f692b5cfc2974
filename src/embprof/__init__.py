"""Per-op profiling of embedding tables: trace attribution, plots and the report."""
