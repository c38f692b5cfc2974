"""Figures of the report: per-config sunbursts, the latency plot, and their static export."""
