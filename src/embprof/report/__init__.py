"""The shareable latency report: loading the workflow's results, tables, deltas, HTML and Markdown."""
