"""Workflow-only helpers: what the Snakemake rules and the ``embprof`` commands share.

Kept free of torch and pytest imports: the Snakefile imports parts of this
package at parse time, and a dry run must stay cheap.
"""
