"""Figures: per-config sunbursts, the latency plot, the bandwidth chart as plotly objects, and their
static export (PNG). No page: :mod:`embprof.pages` puts figures on pages, and imports this package,
never the other way."""
